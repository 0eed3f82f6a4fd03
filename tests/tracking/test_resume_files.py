"""A tracked run interrupted between a round's checkpoint and its trackers' logging, then
resumed, leaves the same tracker files as a run never interrupted (issue 26): the round the
trackers missed is logged on resume from rounds.csv with the values, and the types, the
live run gave ("9", not "9.0"). The interruption is a deterministic seam: a tracker listed
before csv in tracking.backends raises KeyboardInterrupt (what Ctrl-C raises) when given
round 1, once; the checkpoint of round 1 is then written, no tracker has logged it."""

import csv
import json

import pytest

from fedjoule.plugins import REGISTRY
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario
from fedjoule.tracking.base import Tracker
from tests.tracking.common import TINY

WALL_CLOCK = "wall_time_s"  # the one value that differs between two runs of a scenario


class Interrupt(Tracker):
    """Raises KeyboardInterrupt when given round `at` while armed (then disarms)."""

    at: int | None = None

    def log_round(self, round_, metrics, texts) -> None:
        if round_ == Interrupt.at:
            Interrupt.at = None
            raise KeyboardInterrupt


@pytest.fixture
def scenario():
    REGISTRY.register("tracker", "interrupt", Interrupt)
    sets = [f"{k}={v}" for k, v in TINY.items()]
    yield load_scenario("default", [*sets, 'tracking.backends=["interrupt","csv"]'])
    del REGISTRY.entries("tracker")["interrupt"]
    Interrupt.at = None


def tracker_files(out) -> dict[str, list]:
    """The csv tracker's files of the run in `out`, wall-clock values left out."""
    folder = out / "tracking" / "csv" / out.name
    files = {}
    for name in ("params.csv", "metrics.csv", "summary.csv"):
        with (folder / name).open(newline="") as f:
            files[name] = [row for row in csv.reader(f) if WALL_CLOCK not in row]
    files["run.json"] = json.loads((folder / "run.json").read_text())
    files["artifacts"] = sorted(p.name for p in (folder / "artifacts").iterdir())
    return files


def test_a_resumed_tracked_run_writes_the_files_of_an_uninterrupted_one(tmp_path, scenario):
    reference = tmp_path / "reference" / "run"
    run_scenario(scenario, reference, device="cpu")

    out = tmp_path / "resumed" / "run"
    Interrupt.at = 1
    with pytest.raises(KeyboardInterrupt):
        run_scenario(scenario, out, device="cpu")
    assert json.loads((out / "tracking.json").read_text())["next_round"] == 1
    with (out / "rounds.csv").open() as f:
        assert len(f.readlines()) == 1 + 2  # rounds 0 and 1 are saved
    run_scenario(None, out, device="cpu", resume=True)

    expected, resumed = tracker_files(reference), tracker_files(out)
    assert resumed == expected
    steps = [row[:2] for row in expected["metrics.csv"][1:]]
    assert ["1", "round"] in steps and len(steps) == len({tuple(s) for s in steps})
    assert ["1", "round", "1"] in resumed["metrics.csv"]  # an int column stays an int
