"""Tracking is a plug-in seam: a tracker class in a file beside the scenario
('recorder.py:Recorder') receives every round's row, the scenario, the summary and the
plots; a file outside the scenario's folder is refused unless allowed; a class registered
in Python (kind tracker) is a name like the built-ins."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

import fedjoule
from fedjoule import arguments
from fedjoule.errors import FedjouleError
from fedjoule.plugins import REGISTRY
from fedjoule.scenarios.schema import Scenario
from tests.tracking.common import (
    PLOTS,
    TINY,
    numeric,
    rounds,
    same,
    scenario_params,
    summary_numbers,
    texts,
)

HERE = Path(__file__).parent


def scenario_file(folder: Path, backends: list[str]) -> Path:
    data: dict = {"name": "tiny", "tracking": {"backends": backends}}
    for key, value in TINY.items():
        *sections, field = key.split(".")
        place = data
        for section in sections:
            place = place.setdefault(section, {})
        place[field] = value
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(data))
    return folder / "tiny.yaml"


def test_a_plugin_tracker_receives_the_run(tmp_path):
    shutil.copy(HERE / "recorder.py", tmp_path / "recorder.py")
    out = tmp_path / "run"
    fedjoule.run(scenario_file(tmp_path, ["recorder.py:Recorder"]), out, device="cpu")
    log = json.loads((out / "tracking" / "recorder.json").read_text())
    assert log["name"] == "run" and log["complete"] is True
    assert log["params"] == scenario_params(out)
    rows = rounds(out)
    for column, by_round in numeric(rows).items():
        assert all(same(log["rounds"][str(r)][column], v) for r, v in by_round.items()), column
    for column, by_round in texts(rows).items():
        assert {int(r): v[column] for r, v in log["rounds"].items()} == by_round
    assert log["summary"].keys() == summary_numbers(out).keys()
    assert all(same(log["summary"][k], v) for k, v in summary_numbers(out).items())
    assert log["files"] == [f"{p}.png" for p in PLOTS]
    state = json.loads((out / "tracking.json").read_text())
    assert state["trackers"] == {"recorder.py:Recorder": {"started_at": 0}}


def test_a_plugin_file_outside_the_scenario_folder_needs_allowing(tmp_path):
    shutil.copy(HERE / "recorder.py", tmp_path / "recorder.py")
    path = scenario_file(tmp_path / "elsewhere", ["../recorder.py:Recorder"])
    with pytest.raises(FedjouleError, match="tracking.*outside the scenario's folder"):
        fedjoule.load_scenario(path)
    loaded = fedjoule.load_scenario(path, allow_plugin_paths=[tmp_path])
    assert loaded.tracking.backends == ["../recorder.py:Recorder"]


def test_a_registered_tracker_is_a_name():
    from tests.tracking.recorder import Recorder

    with pytest.raises(ValueError, match="unknown tracking backend 'recorder'; available: csv"):
        Scenario(tracking={"backends": ["recorder"]})
    REGISTRY.register("tracker", "recorder", Recorder)
    try:
        assert Scenario(tracking={"backends": ["recorder"]}).tracking.backends == ["recorder"]
        assert arguments.tracking("track", "csv,recorder") == ["csv", "recorder"]
    finally:
        del REGISTRY.entries("tracker")["recorder"]


FAILING = """
from fedjoule.tracking.base import Tracker


class Fails(Tracker):
    def log_round(self, round_, metrics, texts):
        if round_ == 1:
            raise RuntimeError("the tracking server is gone")
"""


def test_a_failing_tracker_stops_the_run_with_its_name(tmp_path):
    (tmp_path / "failing.py").write_text(FAILING)
    out = tmp_path / "run"
    with pytest.raises(
        FedjouleError,
        match=r"tracking backend 'failing.py:Fails' \(log_round\) failed: RuntimeError: the "
        "tracking server is gone",
    ):
        fedjoule.run(scenario_file(tmp_path, ["failing.py:Fails"]), out, device="cpu")
    assert [r["round"] for r in rounds(out)] == ["0", "1"]  # saved: it resumes from round 2
    assert json.loads((out / "tracking.json").read_text())["next_round"] == 1
