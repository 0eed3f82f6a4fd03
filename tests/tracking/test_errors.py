"""Tracking asked for wrongly stops the command before any run starts, with a message
naming the option or field, the value and what is allowed: a backend whose library is
not installed (exit code 2, naming the extra that installs it), an unknown name, a
repeated one, --track with --resume."""

import sys

import pytest

from fedjoule import arguments
from fedjoule.cli import invoke
from fedjoule.plugins import REGISTRY
from fedjoule.tracking.base import Tracker
from tests.tracking.common import TINY

SETS = [part for key, value in TINY.items() for part in ("--set", f"{key}={value}")]


class Ghost(Tracker):
    """A backend whose library is not installed anywhere."""

    requires = ("fedjoule_no_such_tracking_library",)
    extra = "ghost"


@pytest.mark.parametrize("command", ["run", "sweep", "plan"])
def test_a_missing_library_names_the_extra(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if mlflow were not installed
    out = tmp_path / "out"
    extra = {"sweep": ["--grid", "seed=0,1"], "plan": ["--k", "1,2"]}.get(command, [])
    code = invoke(
        [command, "default-theory", "--out", str(out), "--track", "csv,mlflow", *SETS, *extra]
    )
    assert code == 2
    message = capsys.readouterr().err
    assert "--track" in message and "pip install 'fedjoule[mlflow]'" in message
    assert not out.exists()


def test_a_registered_backend_without_its_library(tmp_path, capsys):
    REGISTRY.register("tracker", "ghost", Ghost)
    try:
        scenario = tmp_path / "s.yaml"
        scenario.write_text("tracking: {backends: [csv, ghost]}\n")
        code = invoke(["run", str(scenario), "--out", str(tmp_path / "out"), *SETS])
        message = capsys.readouterr().err
        assert code == 2
        assert "tracking" in message and "backends" in message
        assert "'fedjoule_no_such_tracking_library'" in message
        assert "pip install 'fedjoule[ghost]'" in message
        assert not (tmp_path / "out").exists()
    finally:
        del REGISTRY.entries("tracker")["ghost"]


def test_unknown_and_repeated_names(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("tracking: {backends: [tensorbord]}\n")
    assert invoke(["validate", str(scenario)]) != 0
    message = capsys.readouterr().err
    assert "unknown tracking backend 'tensorbord'; available: csv, tensorboard, mlflow, wandb" in (
        message
    )
    with pytest.raises(arguments.ArgumentError, match="track='csv,csv': 'csv' is named twice"):
        arguments.tracking("track", "csv,csv")
    with pytest.raises(arguments.ArgumentError, match="unknown tracker 'tb'; expected csv"):
        arguments.tracking("track", ["tb"])
    with pytest.raises(arguments.ArgumentTypeError, match="expected tracker names"):
        arguments.tracking("track", 3)


def test_track_with_resume_is_refused(tmp_path, capsys):
    code = invoke(["run", "--resume", "--out", str(tmp_path), "--track", "csv"])
    assert code == 2
    assert "a resumed run keeps the tracking it started with" in capsys.readouterr().err
