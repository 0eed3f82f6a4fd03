"""kill -9 at random instants of a tracked run (and of its --resume), then finished: the
run's files equal an uninterrupted tracked run's, and the tracked run named in
tracking.json holds every round exactly once in MLflow, the csv files and TensorBoard,
with rounds.csv's values (slow: `make test-slow`)."""

import csv
import json
import random

import numpy as np
import pytest

from tests.simulator.killing import Case, reference_run, trial
from tests.tracking.common import mlflow_client, numeric, rounds, same

pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")

CASE = Case(
    "tracked",
    "default-theory",
    ("training.rounds=15", 'tracking.backends=["csv","mlflow","tensorboard"]'),
)


def check_tracked(folder) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    columns = numeric(rounds(folder))
    note = json.loads((folder / "tracking.json").read_text())
    client = mlflow_client(folder / "tracking" / "mlruns")
    run_id = note["trackers"]["mlflow"]["run_id"]
    assert client.get_run(run_id).info.status == "FINISHED"
    for column, by_round in columns.items():
        history = client.get_metric_history(run_id, column)
        assert sorted(m.step for m in history) == sorted(by_round), column
        assert all(same(m.value, by_round[m.step]) for m in history), column
    with (folder / "tracking" / "csv" / folder.name / "metrics.csv").open(newline="") as f:
        logged = [(int(r["step"]), r["name"], r["value"]) for r in csv.DictReader(f)]
    assert len(logged) == len({(s, n) for s, n, _ in logged})
    values = {(s, n): v for s, n, v in logged}
    for column, by_round in columns.items():
        assert all(same(float(values[r, column]), v) for r, v in by_round.items()), column
    events = EventAccumulator(str(folder / "tracking" / "tensorboard" / folder.name), {})
    events.Reload()
    for column, by_round in columns.items():
        scalars = events.Scalars(f"rounds/{column}")
        assert [e.step for e in scalars] == sorted(by_round), column
        assert all(same(e.value, float(np.float32(by_round[e.step]))) for e in scalars)


@pytest.mark.slow
def test_killed_tracked_runs_log_every_round_once(tmp_path):
    reference = tmp_path / "reference"
    span_s = reference_run(CASE, reference)
    check_tracked(reference)
    rng = random.Random(22)
    for i in range(4):
        folder = tmp_path / f"trial{i}"
        result = trial(CASE, reference, folder, rng, span_s, kill_resume=i % 2 == 1)
        assert result.equal, result
        check_tracked(folder)
