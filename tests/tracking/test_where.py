"""A tracked run or sweep says where its trackers wrote and how to open them."""

import json

from fedjoule.cli import invoke
from tests.tracking.common import TINY

SETS = [part for key, value in TINY.items() for part in ("--set", f"{key}={value}")]


def tracked_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("tracked: ")]


def test_a_run_and_a_sweep_print_where_they_were_tracked(tmp_path, capsys):
    out = tmp_path / "run"
    assert invoke(["run", "default-theory", "--out", str(out), "--track", "csv,mlflow", *SETS]) == 0
    state = json.loads((out / "tracking.json").read_text())["trackers"]
    assert tracked_lines(capsys.readouterr().out) == [
        f"tracked: csv: {state['csv']['dir']}",
        f"tracked: mlflow: run {state['mlflow']['run_id']} in {state['mlflow']['uri']} "
        f"(MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri {state['mlflow']['uri']})",
    ]
    sweep = tmp_path / "sweep"
    grid = ["--grid", "seed=0,1", "--workers", "1"]
    assert (
        invoke(["sweep", "default-theory", "--out", str(sweep), "--track", "csv", *SETS, *grid])
        == 0
    )
    parent = json.loads((sweep / "tracking.json").read_text())["trackers"]["csv"]["dir"]
    assert tracked_lines(capsys.readouterr().out) == [f"tracked: csv: {parent}"]
    # an untracked run says nothing of tracking
    assert invoke(["run", "default-theory", "--out", str(tmp_path / "plain"), *SETS]) == 0
    assert tracked_lines(capsys.readouterr().out) == []
