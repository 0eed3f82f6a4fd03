"""A sweep (and a plan) is the parent of its runs' tracked runs: MLflow runs nested under
the sweep's run (tag mlflow.parentRunId) in the sweep's own file store, csv (and
TensorBoard) folders per run under the sweep's, W&B runs in the sweep's group beside its
parent run (slow: with all four backends); each child holds its own run's rounds.csv per
round."""

from pathlib import Path

import pytest

import fedjoule
from tests.tracking.common import TINY, mlflow_client, numeric, rounds, same
from tests.tracking.wandb_records import offline_run

pytest.importorskip("mlflow")


def sweep(out: Path, track: list[str]) -> Path:
    overrides = {**TINY, "training.rounds": 2}
    fedjoule.sweep(
        "default-theory",
        {"seed": [0, 1]},
        out,
        overrides=overrides,
        workers=1,
        device="cpu",
        track=track,
    )
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    return sweep(tmp_path_factory.mktemp("sweep") / "sw", ["mlflow", "csv"])


def test_mlflow_children_nest_under_the_sweep(swept):
    client = mlflow_client(swept / "tracking" / "mlruns")
    experiment = client.get_experiment_by_name("sw")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"sw", "runs/seed=0", "runs/seed=1"}
    parent = runs["sw"]
    assert parent.info.status == "FINISHED" and parent.data.params["grid.seed"] == "['0', '1']"
    assert "mlflow.parentRunId" not in parent.data.tags
    listed = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/sweep.csv" in listed
    for seed in (0, 1):
        child = runs[f"runs/seed={seed}"]
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.params["seed"] == str(seed)
        for column, by_round in numeric(rounds(swept / "runs" / f"seed={seed}")).items():
            history = client.get_metric_history(child.info.run_id, column)
            assert {m.step: m.value for m in history} == by_round, column


def test_csv_folders_nest_under_the_sweep(swept):
    parent = swept / "tracking" / "csv" / "sw"
    assert {p.name for p in (parent / "runs").iterdir()} == {"seed=0", "seed=1"}
    logged = (parent / "runs" / "seed=1" / "metrics.csv").read_text()
    assert logged.count(",round,") == 2  # one row per round


@pytest.mark.slow
def test_all_backends_nest_under_the_sweep(tmp_path):
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    swept = sweep(tmp_path / "sw", ["tensorboard", "wandb", "csv"])
    for backend in ("tensorboard", "csv"):
        parent = swept / "tracking" / backend / "sw"
        assert {p.name for p in (parent / "runs").iterdir()} == {"seed=0", "seed=1"}
    runs = [offline_run(f)["run"] for f in (swept / "tracking" / "wandb").glob("offline-run-*")]
    found = {(r.display_name, r.run_group, r.job_type) for r in runs}
    assert found == {
        ("sw", "sw", "sweep"),
        ("runs/seed=0", "sw", "run"),
        ("runs/seed=1", "sw", "run"),
    }


def test_a_plans_learning_runs_nest_under_the_plan(tmp_path):
    overrides = {**TINY, "training.target_value": 0.5, "training.rounds": 2}
    del overrides["training.local_steps"]  # (the plan's axis)
    fedjoule.plan(
        "default-theory",
        tmp_path / "pl",
        k=[1, 2],
        snr_db=[10],
        bandwidth_hz=[1e6],
        overrides=overrides,
        workers=1,
        device="cpu",
        track="mlflow",
    )
    client = mlflow_client(tmp_path / "pl" / "tracking" / "mlruns")
    experiment = client.get_experiment_by_name("pl")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    parent = runs.pop("pl")
    assert parent.data.params["k"] == "[1, 2]"
    assert {r.data.tags["mlflow.parentRunId"] for r in runs.values()} == {parent.info.run_id}
    learning = sorted((tmp_path / "pl").glob("*/runs/*")) + sorted(
        (tmp_path / "pl").glob("cells/*/runs/*")
    )
    names = {p.relative_to(tmp_path / "pl").as_posix() for p in learning}
    assert set(runs) == names and len(names) == 2
    for name, run in runs.items():
        by_round = numeric(rounds(tmp_path / "pl" / name))["energy_total_j"]
        history = client.get_metric_history(run.info.run_id, "energy_total_j")
        assert all(same(m.value, by_round[m.step]) for m in history)
        assert len(history) == len(by_round)
