"""The scripts in examples/ run (each in seconds) from any folder and produce the numbers
they promise: custom model, custom dataset, custom algorithm (FedAdam from
examples/fedadam.py), a sweep. Each runs once from the repository root, and a plug-in
one also from an unrelated temporary folder."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedjoule.api import RunResult, SweepResult

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str, out: Path, cwd: Path = EXAMPLES.parent) -> str:
    """Run examples/<name>.py OUT from `cwd` (the repository root); its standard output."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), str(out)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"examples/{name}.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def recorded(folder: Path) -> dict:
    """The run's scenario.yaml."""
    return yaml.safe_load((folder / "scenario.yaml").read_text())


def test_custom_model(tmp_path):
    printed = example("custom_model", tmp_path / "run")
    result = RunResult.from_folder(tmp_path / "run")
    assert len(result.rounds) == 3 and not result.stopped_early
    assert all(row["accuracy"] is not None for row in result.rounds)
    model = recorded(tmp_path / "run")["model"]
    assert model["name"] == "custom"
    assert model["factory"] == f"{EXAMPLES / 'custom_model.py'}:make_net"
    assert model["source"]["file"] == str(EXAMPLES / "custom_model.py")
    assert "final accuracy" in printed


def test_custom_dataset(tmp_path):
    example("custom_dataset", tmp_path / "run")
    result = RunResult.from_folder(tmp_path / "run")
    assert len(result.rounds) == 5
    assert result.summary["final_accuracy"] > 0.5  # 4 classes: chance is 0.25
    assert sum(c["train_samples"] for c in result.clients) == 2000
    assert recorded(tmp_path / "run")["dataset"]["name"] == "custom"


def test_custom_algorithm(tmp_path):
    example("custom_algorithm", tmp_path / "run")
    result = RunResult.from_folder(tmp_path / "run")
    assert len(result.rounds) == 5
    assert result.summary["final_accuracy"] > 0.4  # 5 classes: chance is 0.2
    algorithm = recorded(tmp_path / "run")["algorithm"]
    assert algorithm["name"] == "custom"
    assert algorithm["class"] == f"{EXAMPLES / 'fedadam.py'}:FedAdam"
    assert algorithm["options"]["server_lr"] == 0.03


def test_sweep(tmp_path):
    printed = example("sweep", tmp_path / "sweep")
    result = SweepResult.from_folder(tmp_path / "sweep")
    assert len(result.table) == 4 and set(result.status.values()) == {"ran"}
    for row in result.table:
        assert row["run"] in printed and 0 < row["final_accuracy"] <= 1
    assert {(r["training.local_steps"], r["training.lr"]) for r in result.table} == {
        (1, 0.02), (1, 0.1), (10, 0.02), (10, 0.1)
    }  # fmt: skip


@pytest.mark.parametrize("name", ["custom_algorithm"])  # (the others name theirs alike)
def test_plugin_examples_run_from_an_unrelated_folder(name, tmp_path):
    """(issue 21, item 11) from a temporary folder: the same first round as from the root."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    example(name, tmp_path / "run", cwd=elsewhere)
    first = RunResult.from_folder(tmp_path / "run").rounds[0]
    assert first["accuracy"] is not None and first["energy_total_j"] > 0
