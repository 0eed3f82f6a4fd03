"""Checkpoints hold only data and belong to their run: a pickled payload is refused
without being run; a checkpoint, scenario.yaml, rounds.csv or client-state file that does
not belong with the others is refused, naming the file and what differs."""

import copy
import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.errors import FedjouleError
from fedjoule.planning.sweep import SweepOptions, run_sweep
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.checkpoint import FORMAT, read_checkpoint
from fedjoule.simulator.run import run_scenario
from fedjoule.storage import FolderLock


def small(*sets: str):
    base = ["training.rounds=4", "population.size=20", "training.clients_per_round=5"]
    return load_scenario("default-theory", [*base, *sets])


class Payload:
    """Unpickling this calls os.system: what a hostile checkpoint would carry."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def plant_payload(folder, marker):
    torch.save({"format": FORMAT, "run": Payload(f"touch {marker}")}, folder / "checkpoint.pt")


def rows(path):
    with path.open() as f:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in csv.DictReader(f)]


def test_a_pickled_payload_is_refused_on_resume_and_runs_nothing(tmp_path):
    folder = tmp_path / "run"
    run_scenario(small(), folder, device="cpu", stop_after=2)
    marker = tmp_path / "payload-ran"
    plant_payload(folder, marker)
    proc = subprocess.run(
        [sys.executable, "-m", "fedjoule.cli", "run", "--resume", "--out", str(folder)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert "checkpoint.pt" in proc.stderr and "not loaded" in proc.stderr.replace("\n", " ")
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


def test_a_pickled_payload_is_refused_on_a_sweep_restart(tmp_path):
    out = tmp_path / "sweep"
    options = SweepOptions(workers=1, device="cpu")
    sets = ["training.rounds=2", "population.size=20", "training.clients_per_round=5"]
    run_sweep("default-theory", ["seed=0,1"], out, sets, options)
    marker = tmp_path / "payload-ran"
    run_folder = next((out / "runs").iterdir())
    (run_folder / "summary.json").unlink()  # as if interrupted: the restart reads the checkpoint
    plant_payload(run_folder, marker)
    with pytest.raises(FedjouleError, match="checkpoint.pt: not a checkpoint"):
        run_sweep("default-theory", ["seed=0,1"], out, sets, options)
    assert not marker.exists()


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_checkpoints_plain_data_and_resumes_exactly(tmp_path, name):
    sets = [f"algorithm.name={name}"]
    if name == "taco":
        sets.append("population.freeloaders.fraction=0.2")
    _, whole = run_scenario(small(*sets), tmp_path / "whole", device="cpu")
    run_scenario(small(*sets), tmp_path / "cut", device="cpu", stop_after=2)
    saved = read_checkpoint(tmp_path / "cut" / "checkpoint.pt")  # weights_only=True
    assert saved["round"] == 2 and saved["format"] == FORMAT
    _, resumed = run_scenario(None, tmp_path / "cut", device="cpu", resume=True)
    whole.pop("wall_time_s"), resumed.pop("wall_time_s")
    assert resumed == whole
    assert rows(tmp_path / "cut" / "rounds.csv") == rows(tmp_path / "whole" / "rounds.csv")


@pytest.fixture
def stopped(tmp_path):
    """A run stopped after 2 of 4 rounds."""
    folder = tmp_path / "run"
    run_scenario(small(), folder, device="cpu", stop_after=2)
    return folder


def resume(folder):
    return run_scenario(None, folder, device="cpu", resume=True)


def test_an_edited_scenario_is_refused_naming_the_field(stopped):
    path = stopped / "scenario.yaml"
    path.write_text(path.read_text().replace("lr: 0.1", "lr: 0.2", 1))
    with pytest.raises(FedjouleError, match=r"another scenario .*training\.lr"):
        resume(stopped)


def test_a_checkpoint_of_another_scenario_is_refused(stopped, tmp_path):
    other = tmp_path / "other"
    run_scenario(small("seed=7"), other, device="cpu", stop_after=2)
    shutil.copy(other / "checkpoint.pt", stopped / "checkpoint.pt")
    with pytest.raises(FedjouleError, match=r"another scenario .*seed"):
        resume(stopped)


def test_a_checkpoint_of_a_later_round_is_refused(stopped, tmp_path):
    later = tmp_path / "later"
    run_scenario(small(), later, device="cpu", stop_after=3)
    shutil.copy(later / "checkpoint.pt", stopped / "checkpoint.pt")
    with pytest.raises(FedjouleError, match=r"rounds\.csv: .*truncated or replaced"):
        resume(stopped)


def test_a_truncated_or_edited_rounds_file_is_refused(stopped):
    path = stopped / "rounds.csv"
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])  # the last row cut
    with pytest.raises(FedjouleError, match="truncated or replaced"):
        resume(stopped)
    edited = data.replace(b"0.1,", b"0.2,", 1)  # same length, other content
    assert len(edited) == len(data) and edited != data
    path.write_bytes(edited)
    with pytest.raises(FedjouleError, match="differ from those the checkpoint recorded"):
        resume(stopped)


def test_rows_after_the_checkpoint_are_cut_and_the_run_finishes(stopped, tmp_path):
    """A kill between a row's append and its checkpoint leaves one row too many."""
    _, whole = run_scenario(small(), tmp_path / "whole", device="cpu")
    with (stopped / "rounds.csv").open("a") as f:
        f.write("2,garbage of an unfinished round\n")
    _, resumed = resume(stopped)
    assert rows(stopped / "rounds.csv") == rows(tmp_path / "whole" / "rounds.csv")
    whole.pop("wall_time_s"), resumed.pop("wall_time_s")
    assert resumed == whole


def test_a_truncated_client_state_file_is_refused(tmp_path):
    folder = tmp_path / "run"
    scenario = small("algorithm.name=scaffold")
    run_scenario(scenario, folder, device="cpu", stop_after=2, state_memory_mb=0.001)
    [state_file] = folder.glob("client_state*.bin")
    size = state_file.stat().st_size
    assert size > 0
    with state_file.open("r+b") as f:
        f.truncate(size - 4)
    with pytest.raises(FedjouleError, match="client-state file was truncated"):
        run_scenario(None, folder, device="cpu", resume=True, state_memory_mb=0.001)


def test_an_old_format_checkpoint_is_a_clear_error(stopped):
    old = {"state": {"w": torch.zeros(3)}, "ledger": {"selected": np.zeros(3)}}
    torch.save(old, stopped / "checkpoint.pt")  # numpy arrays: not plain data
    with pytest.raises(FedjouleError, match="not a checkpoint fedjoule can read as plain data"):
        resume(stopped)
    torch.save({"state": {"w": torch.zeros(3)}}, stopped / "checkpoint.pt")
    with pytest.raises(FedjouleError, match=f"not a fedjoule checkpoint of format {FORMAT}"):
        resume(stopped)


def test_a_checkpoint_of_another_version_is_refused(stopped):
    saved = read_checkpoint(stopped / "checkpoint.pt")
    saved["fedjoule_version"] = "0.0.1"
    torch.save(saved, stopped / "checkpoint.pt")
    with pytest.raises(FedjouleError, match="written by fedjoule 0.0.1"):
        resume(stopped)


def test_a_second_process_on_the_folder_is_refused(stopped):
    with FolderLock(stopped), pytest.raises(FedjouleError, match="in use by another"):
        resume(stopped)
    _, summary = resume(stopped)  # the lock is gone with its holder
    assert summary["rounds_completed"] == 4


def test_a_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
    """scenario.yaml and a row written, no checkpoint: a new run or --resume starts over."""
    _, whole = run_scenario(small(), tmp_path / "whole", device="cpu")
    for how in ("new", "resume"):
        folder = tmp_path / how
        run_scenario(small(), folder, device="cpu", stop_after=1)
        (folder / "checkpoint.pt").unlink()
        with (folder / "rounds.csv").open("a") as f:
            f.write("1,partial\n")
        if how == "new":
            _, summary = run_scenario(small(), folder, device="cpu")
        else:
            _, summary = resume(folder)
        summary.pop("wall_time_s")
        assert summary == {k: v for k, v in whole.items() if k != "wall_time_s"}
        assert rows(folder / "rounds.csv") == rows(tmp_path / "whole" / "rounds.csv")


def test_a_new_run_refuses_a_folder_with_a_run_or_foreign_files(stopped, tmp_path):
    with pytest.raises(FedjouleError, match="already holds a run"):
        run_scenario(small(), stopped, device="cpu")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "rounds.csv").write_text("my own data\n")
    with pytest.raises(FedjouleError, match="something other than a fedjoule run"):
        run_scenario(small(), foreign, device="cpu")
    assert (foreign / "rounds.csv").read_text() == "my own data\n"


def test_a_scenario_written_before_a_field_was_added_is_the_same_scenario(tmp_path):
    """A run's scenario as an older fedjoule wrote it (without fields added since) is the
    scenario resolved today when those fields are at their defaults; a field added since
    but set otherwise, or a value changed, is named."""
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.checkpoint import scenario_differences

    today = load_scenario("default").model_dump(mode="json")
    older = copy.deepcopy(today)
    del older["protocol"]
    for device_class in older["population"]["device_classes"]:
        device_class["radio"].pop("uplink_max_mbps")
    assert scenario_differences(older, today, tmp_path) == []
    changed = copy.deepcopy(today)
    changed["protocol"]["kind"] = "async"
    assert scenario_differences(older, changed, tmp_path) == ["protocol.kind"]
    older["training"]["rounds"] += 1
    assert scenario_differences(older, today, tmp_path) == ["training.rounds"]
