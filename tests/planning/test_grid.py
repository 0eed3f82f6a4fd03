"""Sweep grids: parsing, run names, and errors before any run."""

import json

import pytest
from typer.testing import CliRunner

from fedjoule.cli import app
from fedjoule.errors import FedjouleError
from fedjoule.planning.grid import (
    parse_grid,
    plan_points,
    point_label,
    run_name,
    split_values,
    table_columns,
)


def test_values_split_on_top_level_commas():
    assert split_values("1, 5,20") == ["1", "5", "20"]
    assert split_values("[1,2],'a,b',{x: 1, y: 2}") == ["[1,2]", "'a,b'", "{x: 1, y: 2}"]


def test_points_are_the_cartesian_product_with_stable_names():
    axes = parse_grid(["training.local_steps=1,5", "algorithm.name=fedavg,fedprox"])
    points = plan_points("default-theory", ["training.rounds=2"], axes)
    assert [p.name for p in points] == [
        "local_steps=1__name=fedavg",
        "local_steps=1__name=fedprox",
        "local_steps=5__name=fedavg",
        "local_steps=5__name=fedprox",
    ]
    assert [(p.scenario.training.local_steps, p.scenario.algorithm.name) for p in points] == [
        (1, "fedavg"),
        (1, "fedprox"),
        (5, "fedavg"),
        (5, "fedprox"),
    ]
    assert all(p.scenario.training.rounds == 2 for p in points)
    # the same point has the same name whatever else the grid holds
    assert run_name({"training.local_steps": "5", "algorithm.name": "fedprox"}) == points[3].name
    # keys sharing a last part keep their full path
    assert run_name({"algorithm.name": "fedavg", "dataset.name": "mnist"}) == (
        "algorithm.name=fedavg__dataset.name=mnist"
    )


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("training.local_step=1,2", "--grid training.local_step: value '1'"),
        ("training.local_steps=1,0", "--grid training.local_steps: value '0'"),
        ("training.local_steps=2,x", "--grid training.local_steps: value 'x'"),
        ("algorithm.name=fedavg,nope", "--grid algorithm.name: value 'nope'"),
        ("channel.uplink_bandwidth_hz=1e6,,2e6", "an empty value"),
        ("training.rounds=2,3", "training.rounds is both a --grid and a --set key"),
    ],
)
def test_bad_grid_fails_before_any_run(tmp_path, grid, message):
    with pytest.raises(FedjouleError, match=message.replace("[", r"\[")):
        plan_points(
            "default-theory", ["training.rounds=2"], parse_grid([grid], ["training.rounds=2"])
        )
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "default-theory",
            "-g",
            grid,
            "-s",
            "training.rounds=2",
            "--out",
            str(tmp_path / "s"),
        ],
    )
    assert isinstance(result.exception, FedjouleError)
    assert message in str(result.exception)
    assert not (tmp_path / "s").exists()


# ------------------------------------------------ algorithm settings as grid values (issue 22)
TINY = ["training.rounds=1", "population.size=10", "round.min_clients=1"]


def points_of(*grid: str, sets=("training.rounds=2",)):
    return plan_points("default-theory", list(sets), parse_grid(list(grid), list(sets)))


def algorithms(points) -> list[dict]:
    return [p.scenario.algorithm.model_dump(mode="json") for p in points]


def test_presets_name_runs_readably_and_set_the_algorithms_options():
    points = points_of("algorithm=fedavg,fedprox:mu=0.1,scaffold:server_lr=0.5")
    assert [p.name for p in points] == ["fedavg", "fedprox-mu=0.1", "scaffold-server_lr=0.5"]
    assert [p.label for p in points] == ["fedavg", "fedprox mu=0.1", "scaffold server_lr=0.5"]
    assert algorithms(points) == [
        {"name": "fedavg"},
        {"name": "fedprox", "mu": 0.1},
        {"name": "scaffold", "server_lr": 0.5, "variate_lr": "round"},
    ]
    # a mapping value is the same preset: the same scenario and folder
    (mapped,) = points_of("algorithm={name: fedprox, mu: 0.1}")
    assert (mapped.name, mapped.label, mapped.scenario) == (
        points[1].name,
        points[1].label,
        points[1].scenario,
    )


def test_a_setting_axis_multiplies_only_the_algorithms_that_have_it():
    points = points_of("algorithm=fedavg,fedprox,scaffold", "algorithm.mu=0.01,0.1")
    assert [p.name for p in points] == ["fedavg", "fedprox-mu=0.01", "fedprox-mu=0.1", "scaffold"]
    assert [p.label for p in points] == ["fedavg", "fedprox mu=0.01", "fedprox mu=0.1", "scaffold"]
    assert [a.get("mu") for a in algorithms(points)] == [None, 0.01, 0.1, None]
    assert points[0].values == {"algorithm": "fedavg"}  # no mu: it has none
    # with another axis: 2 x 4 points, none twice; the refused form now runs
    points = points_of(
        "algorithm.name=fedavg,fedprox", "algorithm.mu=0.1", "training.local_steps=1,5"
    )
    assert [p.label for p in points] == [
        "fedavg, local_steps=1",
        "fedavg, local_steps=5",
        "fedprox mu=0.1, local_steps=1",
        "fedprox mu=0.1, local_steps=5",
    ]
    assert points[3].name == "name=fedprox-mu=0.1__local_steps=5"
    assert len({p.scenario.model_dump_json() for p in points}) == 4
    # the printed table: one `algorithm` column of labels, then the other axes
    keys = ["algorithm.name", "algorithm.mu", "training.local_steps"]
    rows = [{"run": p.name, **p.values} for p in points]
    shown_keys, shown = table_columns(keys, rows)
    assert shown_keys == ["algorithm", "training.local_steps"]
    assert [r["algorithm"] for r in shown] == ["fedavg", "fedavg", "fedprox mu=0.1"] + [
        "fedprox mu=0.1"
    ]
    # a scenario whose algorithm has the setting: the axis alone, names as before
    alone = points_of("algorithm.mu=0.01,0.1", sets=("training.rounds=2", "algorithm.name=fedprox"))
    assert [(p.name, p.label) for p in alone] == [("mu=0.01", "mu=0.01"), ("mu=0.1", "mu=0.1")]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (
            ["algorithm=fedavg,scaffold", "algorithm.mu=0.1"],
            "--grid algorithm.mu: no algorithm of the grid has this setting (the grid's "
            "algorithms and their settings: fedavg: no settings; scaffold: server_lr, "
            "variate_lr)",
        ),
        (
            ["algorithm=fedavg,fedprox:mux=0.1"],
            "--grid algorithm: preset 'fedprox:mux=0.1': fedprox has no setting 'mux'; allowed: mu",
        ),
        (
            ["algorithm=fedavg:mu=0.1"],
            "preset 'fedavg:mu=0.1': fedavg has no setting 'mu'; allowed: none",
        ),
        (["algorithm=fedprox:mu=-1"], "--grid algorithm: preset 'fedprox:mu=-1'"),
        (["algorithm=nope"], "--grid algorithm: preset 'nope': unknown algorithm 'nope'"),
        (
            ["algorithm=fedprox:mu=0.1", "algorithm.mu=0.2"],
            "--grid algorithm.mu and the preset 'fedprox:mu=0.1' both set it",
        ),
    ],
)
def test_bad_algorithm_grid_values_fail_before_any_run(tmp_path, grid, message):
    with pytest.raises(FedjouleError) as caught:
        points_of(*grid)
    assert message in str(caught.value)
    args = ["sweep", "default-theory", "-s", "training.rounds=2", "--out", str(tmp_path / "s")]
    result = CliRunner().invoke(app, [*args, *(x for g in grid for x in ("-g", g))])
    assert isinstance(result.exception, FedjouleError) and message in str(result.exception)
    assert not (tmp_path / "s").exists()


def test_labels_group_seeds_and_the_api_takes_presets_and_dicts(tmp_path):
    from fedjoule.overrides import grid_texts
    from fedjoule.report.aggregate import group_by_seed
    from fedjoule.report.compare import seed_groups

    values = [{"algorithm": "fedprox:mu=0.1", "seed": str(s)} for s in (0, 1)]
    dirs = [tmp_path / str(s) for s in (0, 1)]
    for s, d in enumerate(dirs):
        d.mkdir()
        (d / "scenario.yaml").write_text(f"seed: {s}\nname: x\n")
    (group,) = group_by_seed(list(zip(values, dirs, strict=True)))
    assert (group.label, group.seeds) == ("fedprox mu=0.1", [0, 1])
    labels = [point_label(v) for v in values]
    assert labels == ["fedprox mu=0.1, seed=0", "fedprox mu=0.1, seed=1"]
    (group,) = seed_groups(dirs, labels)
    assert (group.label, group.seeds) == ("fedprox mu=0.1", [0, 1])
    # the API: presets as text, dicts, setting axes
    grid = grid_texts(
        {"algorithm": ["fedavg", {"name": "fedprox", "mu": 0.1}, "scaffold:server_lr=0.5"]}
    )
    assert grid == ["algorithm=fedavg,{name: fedprox, mu: 0.1},scaffold:server_lr=0.5"]
    points = points_of(*grid)
    assert [p.label for p in points] == ["fedavg", "fedprox mu=0.1", "scaffold server_lr=0.5"]
    import fedjoule

    with pytest.raises(FedjouleError, match="give the grid once: axes= or grid=, not both"):
        fedjoule.sweep("default-theory", {"seed": [0]}, tmp_path / "x", grid={"seed": [0]})
    assert not (tmp_path / "x").exists()
    grid = grid_texts({"algorithm": ["fedavg", "fedprox"], "algorithm.mu": [0.01, 0.1]})
    assert [p.name for p in points_of(*grid)] == ["fedavg", "fedprox-mu=0.01", "fedprox-mu=0.1"]


def test_a_preset_sweep_labels_its_report_and_resumes_by_its_recorded_names(tmp_path):
    """A real two-run sweep: folders and labels from presets, the report's run labels;
    a sweep.json of an older naming keeps its folders on a restart."""
    from fedjoule.planning.sweep import SweepOptions, recorded_names, run_sweep
    from fedjoule.report.compare import compare_runs

    out, options = tmp_path / "s", SweepOptions(workers=1, device="cpu")
    grid = ["algorithm=fedavg,fedprox:mu=0.1"]
    result = run_sweep("default-theory", grid, out, TINY, options)
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["fedavg", "fedprox-mu=0.1"]
    recorded = json.loads((out / "sweep.json").read_text())["runs"]
    assert [(r["name"], r["label"]) for r in recorded] == [
        ("fedavg", "fedavg"),
        ("fedprox-mu=0.1", "fedprox mu=0.1"),
    ]
    rows = compare_runs([out], tmp_path / "r").rows
    assert [r["run"] for r in rows] == ["fedavg", "fedprox mu=0.1"]
    assert set(run_sweep("default-theory", grid, out, TINY, options).status.values()) == {"skipped"}
    assert result.status == {"fedavg": "ran", "fedprox-mu=0.1": "ran"}
    # an older sweep.json named the mapping form's folder otherwise: that name is kept
    old = {"algorithm": "{name: fedprox, mu: 0.1}"}
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "sweep.json").write_text(
        json.dumps({"runs": [{"name": "algorithm=_name__fedprox__mu__0.1_", "values": old}]})
    )
    points = points_of("algorithm={name: fedprox, mu: 0.1},fedavg")
    assert [p.name for p in recorded_names(tmp_path / "o", points)] == [
        "algorithm=_name__fedprox__mu__0.1_",
        "fedavg",
    ]
