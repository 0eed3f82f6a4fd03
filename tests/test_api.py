"""The Python API (fedjoule/api.py, docs/api.md): the same scenarios, files and numbers as
the command line; rows read back exactly; a callback that stops a run leaves a folder that
resumes to an uninterrupted run's files."""

import csv
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest

import fedjoule
from fedjoule.api import cell_value, read_table, value_text
from fedjoule.cli import invoke
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario as load_with_sets
from fedjoule.scenarios.schema import Scenario

# synthetic data, logistic model, 20 clients, 4 a round: each run well under a second
SMALL = {
    "population.size": 20,
    "training.clients_per_round": 4,
    "training.local_steps": 2,
    "dataset.synthetic.avg_samples": 50,
    "round.min_clients": 1,
    "output.events": True,
}
SMALL_SETS = [f"{k}={v}" for k, v in SMALL.items()]
WALL = ("wall_time_s", "ray_start_s")  # wall-clock figures: differ from run to run


def without_wall(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in WALL} for row in rows]


def csv_rows(path: Path) -> list[dict]:
    """A CSV file read with csv.DictReader and converted cell by cell (cell_value)."""
    with path.open(newline="") as f:
        return [{k: cell_value(v, k) for k, v in row.items()} for row in csv.DictReader(f)]


def small(rounds: int = 5, **more) -> Scenario:
    return fedjoule.load_scenario("default-theory", {**SMALL, "training.rounds": rounds, **more})


# --------------------------------------------------------------------------- the package


def test_import_is_cheap_and_the_api_loads_on_first_use():
    code = (
        "import sys, fedjoule\n"
        "assert 'torch' not in sys.modules and 'fedjoule.api' not in sys.modules\n"
        "assert fedjoule.__version__\n"
        "assert callable(fedjoule.run) and 'fedjoule.api' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_exports():
    assert set(fedjoule.__all__) == {"__version__", *fedjoule._EXPORTS}
    for name in fedjoule._EXPORTS:
        assert getattr(fedjoule, name) is not None
        assert name in dir(fedjoule)
    assert fedjoule.Scenario is Scenario
    assert fedjoule.RunResult is fedjoule.api.RunResult
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        fedjoule.nothing  # noqa: B018


# --------------------------------------------------------------------------- scenarios


def test_load_scenario_with_overrides_equals_the_command_lines():
    overrides = {
        "training.rounds": 5,
        "training.lr": 1e-3,
        "model.name": "mlp",
        "model.hidden": (16, 8),
        "round.deadline_s": None,
        "name": "a, b: [c]",
        "description": "1e5",  # text that reads as a number stays text
        "channel.shadowing_sigma_db": 0,
    }
    sets = [
        "training.rounds=5",
        "training.lr=0.001",
        "model.name=mlp",
        "model.hidden=[16, 8]",
        "round.deadline_s=null",
        'name="a, b: [c]"',
        "description='1e5'",
        "channel.shadowing_sigma_db=0",
    ]
    ours = fedjoule.load_scenario("default-theory", overrides)
    assert ours == load_with_sets("default-theory", sets)
    assert ours.name == "a, b: [c]" and ours.description == "1e5"
    assert ours.model.hidden == [16, 8] and ours.round.deadline_s is None


@pytest.mark.parametrize(
    "value",
    [0, -3, 2.5, 1e-300, 1e16, math.inf, -math.inf, True, None, "fedprox", "x,y", "1e5",
     "null", "", " padded ", "it's", 'say "hi"', "é", [1, [2, "a,b"]], {"a": 1, "b": [0.5]}],
)  # fmt: skip
def test_values_are_written_as_text_that_reads_back_the_same(value):
    from fedjoule.scenarios.yaml_reader import parse_yaml

    assert parse_yaml(value_text(value), "t") == value


def test_values_that_are_not_scenario_values_are_refused():
    with pytest.raises(TypeError, match="overrides"):
        fedjoule.load_scenario("default-theory", {"training.rounds": object()})
    with pytest.raises(FedjouleError, match="not a dotted scenario key"):
        fedjoule.load_scenario("default-theory", {"training.rounds=5": 1})
    with pytest.raises(FedjouleError, match="training.rounds"):
        fedjoule.load_scenario("default-theory", {"training.rounds": "many"})


def test_cell_values():
    assert [cell_value(t) for t in ("", "3", "-2", "2.0", "1e-05", "True", "x")] == [
        None, 3, -2, 2.0, 1e-05, True, "x",
    ]  # fmt: skip
    assert cell_value("nan") is math.nan and cell_value("-inf") == -math.inf
    assert cell_value("4", "selected_per_cell") == "4"  # a one-cell run's count stays text


# --------------------------------------------------------------------------- run


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """An uninterrupted run of 5 rounds, and the rows its callback saw."""
    seen = []
    result = fedjoule.run(
        small(), tmp_path_factory.mktemp("full") / "run", on_round=seen.append, device="cpu"
    )
    return result, seen


def test_run_rows_equal_the_files_and_the_callbacks_rows(full_run):
    result, seen = full_run
    folder = result.folder
    assert len(result.rounds) == 5 and not result.stopped_early and not result.diverged
    assert result.rounds == csv_rows(folder / "rounds.csv") == seen
    assert result.clients == csv_rows(folder / "clients.csv") == read_table(folder / "clients.csv")
    assert len(result.clients) == 20
    assert result.summary == json.loads((folder / "summary.json").read_text())
    first = result.rounds[0]
    assert type(first["round"]) is int and type(first["energy_total_j"]) is float
    assert first["selected_per_cell"] == "4" and first["probed"] is None
    assert result.rounds[-1]["accuracy"] == result.summary["final_accuracy"]
    assert fedjoule.RunResult.from_folder(folder) == result


def test_a_callback_that_returns_false_stops_and_resume_finishes_the_same_files(full_run, tmp_path):
    full, _ = full_run
    # the same scenario built in code, from the resolved data
    scenario = Scenario.model_validate(small().model_dump(mode="json"))
    seen = []

    def until_round_2(row: dict) -> bool:
        seen.append(row["round"])
        return row["round"] < 1  # False after the second round

    out = tmp_path / "run"
    stopped = fedjoule.run(scenario, out, on_round=until_round_2, device="cpu")
    assert seen == [0, 1] and stopped.stopped_early and stopped.folder == out
    assert len(stopped.rounds) == 2 and stopped.summary["rounds_completed"] == 2
    assert without_wall(stopped.rounds) == without_wall(full.rounds[:2])
    assert (out / "checkpoint.pt").exists() and len(stopped.clients) == 20

    finished = fedjoule.run(None, out, resume=True, device="cpu")
    assert not finished.stopped_early
    assert without_wall(finished.rounds) == without_wall(full.rounds)
    assert finished.clients == full.clients
    assert without_wall([finished.summary]) == without_wall([full.summary])
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in full.folder.iterdir())
    for name in ("events.jsonl", "scenario.yaml", "clients.csv"):
        assert (out / name).read_bytes() == (full.folder / name).read_bytes(), name


def test_an_exception_in_the_callback_propagates_after_the_round_is_saved(full_run, tmp_path):
    full, _ = full_run

    def fails_in_round_3(row: dict) -> None:
        if row["round"] == 2:
            raise KeyError("from the callback")

    out = tmp_path / "run"
    with pytest.raises(KeyError, match="from the callback"):
        fedjoule.run(small(), out, on_round=fails_in_round_3, device="cpu")
    assert len(read_table(out / "rounds.csv")) == 3 and not (out / "summary.json").exists()
    finished = fedjoule.run(small(), out, resume=True, device="cpu")  # the same scenario
    assert without_wall(finished.rounds) == without_wall(full.rounds)


def test_run_mistakes(tmp_path):
    with pytest.raises(FedjouleError, match="executor='fast'"):
        fedjoule.run(small(), tmp_path / "a", executor="fast")
    with pytest.raises(FedjouleError, match="needs the run folder"):
        fedjoule.run(None, resume=True)
    with pytest.raises(FedjouleError, match="overrides cannot change it"):
        fedjoule.run(None, tmp_path / "a", resume=True, overrides={"seed": 1})
    once = fedjoule.run(small(), tmp_path / "b", overrides={"training.rounds": 1}, device="cpu")
    assert len(once.rounds) == 1  # overrides apply to a Scenario too
    with pytest.raises(FedjouleError, match="another scenario .*seed"):
        fedjoule.run(small(rounds=1, seed=7), tmp_path / "b", resume=True, device="cpu")
    with pytest.raises(FedjouleError, match="already holds a run"):
        once = fedjoule.run(small(), tmp_path / "b", overrides={"training.rounds": 1}, device="cpu")
    assert len(once.rounds) == 1  # overrides apply to a Scenario too
    assert not (tmp_path / "a").exists()


def test_a_diverged_run_returns_its_results(tmp_path):
    seen = []
    result = fedjoule.run(
        "default-theory", tmp_path / "run", overrides={**SMALL, "training.lr": 1e38},
        on_round=seen.append, device="cpu",
    )  # fmt: skip
    assert result.diverged and "round 0" in result.summary["diverged_reason"]
    assert len(result.rounds) == 1 and result.rounds[0]["diverged"] == 1
    assert result.rounds[0]["loss"] is math.nan  # the nan token, as one object: rows compare
    assert result.rounds == seen == csv_rows(result.folder / "rounds.csv")


def test_to_pandas(full_run, monkeypatch):
    result, _ = full_run
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "pandas", None)  # as if not installed
        with pytest.raises(ImportError, match=r"pip install .fedjoule\[pandas\]."):
            result.to_pandas()
    with monkeypatch.context() as m:  # the rows go to DataFrame.from_records as they are
        frame = types.SimpleNamespace(from_records=lambda rows: ("frame", rows))
        m.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=frame))
        assert result.to_pandas() == {
            "rounds": ("frame", result.rounds),
            "clients": ("frame", result.clients),
        }
    pytest.importorskip("pandas")
    frames = result.to_pandas()
    assert list(frames["rounds"].columns) == list(result.rounds[0])
    assert len(frames["rounds"]) == 5 and len(frames["clients"]) == 20
    assert frames["rounds"]["accuracy"].tolist() == [r["accuracy"] for r in result.rounds]


# --------------------------------------------------------------------------- sweep, plan, capacity


def test_sweep_returns_what_the_command_line_writes(tmp_path):
    sets = [s for s in SMALL_SETS if not s.startswith("training.local_steps")]
    args = [
        "sweep",
        "default-theory",
        "--grid",
        "training.local_steps=1,3",
        "--out",
        str(tmp_path / "cli"),
    ]
    for s in [*sets, "training.rounds=3"]:
        args += ["--set", s]
    assert invoke([*args, "--workers", "1", "--device", "cpu", "-q"]) == 0

    scenario = small(rounds=3)  # a Scenario: written to the sweep folder's scenario.yaml
    result = fedjoule.sweep(
        scenario, {"training.local_steps": [1, 3]}, tmp_path / "api", workers=1, device="cpu"
    )
    cli = read_table(tmp_path / "cli" / "sweep.csv")
    assert result.table == csv_rows(result.folder / "sweep.csv")
    assert without_wall(result.table) == without_wall(cli)
    assert [r["training.local_steps"] for r in result.table] == [1, 3]
    assert result.status == {"local_steps=1": "ran", "local_steps=3": "ran"}
    assert result.info["scenario"] == str(tmp_path / "api" / "scenario.yaml")
    run = result.run("local_steps=3")
    assert len(run.rounds) == 3 and run.summary["final_accuracy"] == cli[1]["final_accuracy"]

    # the same folder again: every run finished, so all are skipped
    again = fedjoule.sweep(
        scenario, {"training.local_steps": [1, 3]}, tmp_path / "api", workers=1, device="cpu"
    )
    assert set(again.status.values()) == {"skipped"} and again.table == result.table


def test_sweep_mistakes_leave_no_folder(tmp_path):
    for axes, words in (
        ({"training.local_steps": 3}, "expected a list of 1 to 1,000 values"),
        ({"training.local_steps": []}, "expected a list of 1 to 1,000 values"),
        ({"training.local_steps": [1, 1]}, "repeated"),
        ({"training.rounds": [2], "training.local_steps": ["x"]}, "local_steps"),
    ):
        with pytest.raises(FedjouleError, match=words):
            fedjoule.sweep(small(), axes, tmp_path / "s", workers=1)
        assert not (tmp_path / "s").exists()


PLAN = {**{k: v for k, v in SMALL.items() if k != "training.local_steps"},
        "training.rounds": 4, "training.target_value": 0.3, "round.deadline_s": None}  # fmt: skip


def test_plan_returns_what_the_command_line_writes(tmp_path):
    args = ["plan", "default-theory", "--k", "1,2", "--snr-db", "10,20", "--bandwidth-hz", "1e6"]
    args += ["--out", str(tmp_path / "cli"), "--workers", "1", "--device", "cpu"]
    for key, value in PLAN.items():
        args += ["--set", f"{key}={value_text(value)}"]
    assert invoke(args) == 0

    result = fedjoule.plan(
        "default-theory", tmp_path / "api", k=[1, 2], snr_db=[10, 20], bandwidth_hz=[1e6],
        overrides=PLAN, workers=1, device="cpu",
    )  # fmt: skip
    assert result.table == read_table(tmp_path / "cli" / "plan.csv")
    assert result.table == csv_rows(result.folder / "plan.csv")
    cli = json.loads((tmp_path / "cli" / "plan.json").read_text())
    assert result.best == cli["best"] and result.method == cli["method"] == "reprice"
    assert result.best[0]["K_star"] in (1, 2)
    for key in ("k_values", "snr_db", "bandwidth_hz", "set", "reason", "max_rounds"):
        assert result.info[key] == cli[key], key


def test_plan_mistakes(tmp_path):
    with pytest.raises(FedjouleError, match=r"k\[1\]=2.5: expected a whole number"):
        fedjoule.plan("default-theory", tmp_path / "p", k=[1, 2.5])
    with pytest.raises(FedjouleError, match="repeated"):
        fedjoule.plan("default-theory", tmp_path / "p", snr_db=[0, 0])
    with pytest.raises(FedjouleError, match="not a cell of the grid"):
        fedjoule.plan("default-theory", tmp_path / "p", cells=[(5, 1e6)])
    assert not (tmp_path / "p").exists()


def test_capacity_returns_what_the_command_line_writes(tmp_path):
    args = ["capacity", "default-theory", "--rounds", "3"]
    args += ["--out", str(tmp_path / "cli"), "-q"]
    for s in SMALL_SETS:
        args += ["--set", s]
    assert invoke(args) == 0

    result = fedjoule.capacity(small(), tmp_path / "api", rounds=3)
    assert result.table == read_table(tmp_path / "cli" / "capacity.csv")
    assert result.table == csv_rows(result.folder / "capacity.csv")
    assert result.info == json.loads((tmp_path / "cli" / "capacity.json").read_text())
    assert result.answer == result.info["answer"] and result.table[0]["meets"] is True
    with pytest.raises(FedjouleError, match="rounds=0"):
        fedjoule.capacity(small(), tmp_path / "x", rounds=0)
