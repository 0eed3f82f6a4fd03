"""Sweep grids: parsing, run names, and errors before any run."""

import pytest
from typer.testing import CliRunner

from fedjoule.cli import app
from fedjoule.errors import FedjouleError
from fedjoule.planning.grid import parse_grid, plan_points, run_name, split_values


def test_values_split_on_top_level_commas():
    assert split_values("1, 5,20") == ["1", "5", "20"]
    assert split_values("[1,2],'a,b',{x: 1, y: 2}") == ["[1,2]", "'a,b'", "{x: 1, y: 2}"]


def test_points_are_the_cartesian_product_with_stable_names():
    axes = parse_grid(["training.local_steps=1,5", "algorithm.name=fedavg,fedprox"])
    points = plan_points("default", ["training.rounds=2"], axes)
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
        plan_points("default", ["training.rounds=2"], parse_grid([grid], ["training.rounds=2"]))
    result = CliRunner().invoke(
        app,
        ["sweep", "default", "-g", grid, "-s", "training.rounds=2", "--out", str(tmp_path / "s")],
    )
    assert isinstance(result.exception, FedjouleError)
    assert message in str(result.exception)
    assert not (tmp_path / "s").exists()
