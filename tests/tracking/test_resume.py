"""A run stopped after round 2 of 3 and resumed continues the same tracked runs (the same
MLflow run id and W&B run id; the same csv and TensorBoard folders) and every round is
logged exactly once, also when the interruption fell between a round's checkpoint and the
note that its row was logged (tracking.json set back one round: the resume logs that
round again, and the csv, MLflow and TensorBoard trackers drop the repeat; W&B, as
docs/tracking.md says, receives it in both offline folders of the run)."""

import csv
import json

import numpy as np
import pytest

from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario
from tests.tracking.common import TINY, mlflow_client, numeric, rounds, same
from tests.tracking.wandb_records import offline_run

pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")
pytest.importorskip("wandb")


def test_resumed_run_logs_every_round_once(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sets = [f"{k}={v}" for k, v in TINY.items()]
    backends = 'tracking.backends=["csv","mlflow","tensorboard","wandb"]'
    scenario = load_scenario("default-theory", [*sets, backends])
    out = tmp_path / "run"
    run_scenario(scenario, out, device="cpu", stop_after=2)
    note = json.loads((out / "tracking.json").read_text())
    assert note["next_round"] == 2
    client = mlflow_client(out / "tracking" / "mlruns")
    run_id = note["trackers"]["mlflow"]["run_id"]
    assert client.get_run(run_id).info.status == "KILLED"
    assert json.loads((out / "tracking" / "csv" / "run" / "run.json").read_text())["status"] == (
        "stopped"
    )

    note["next_round"] = 1  # as if killed after round 1's checkpoint, before its note
    (out / "tracking.json").write_text(json.dumps(note))
    run_scenario(None, out, device="cpu", resume=True)

    columns = numeric(rounds(out))
    assert sorted(columns["round"].values()) == [0, 1, 2]
    (experiment,) = [e for e in client.search_experiments() if e.name == "default-theory"]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == run_id and run.info.status == "FINISHED"
    for column, by_round in columns.items():
        history = client.get_metric_history(run_id, column)
        assert sorted(m.step for m in history) == sorted(by_round), column  # once per round
        assert all(same(m.value, by_round[m.step]) for m in history), column

    with (out / "tracking" / "csv" / "run" / "metrics.csv").open(newline="") as f:
        logged = [(int(r["step"]), r["name"], r["value"]) for r in csv.DictReader(f)]
    assert len(logged) == len({(step, name) for step, name, _ in logged})
    assert {(s, n) for s, n, _ in logged} >= {(r, c) for c in columns for r in columns[c]}

    events = EventAccumulator(str(out / "tracking" / "tensorboard" / "run"), size_guidance={})
    events.Reload()
    for column, by_round in columns.items():
        scalars = events.Scalars(f"rounds/{column}")
        assert [e.step for e in scalars] == sorted(by_round), column  # the repeat purged
        assert all(same(e.value, float(np.float32(by_round[e.step]))) for e in scalars)

    first, second = [
        offline_run(f) for f in sorted((out / "tracking" / "wandb").glob("offline-run-*"))
    ]
    assert first["run"].run_id == second["run"].run_id == note["trackers"]["wandb"]["id"]
    assert sorted(first["history"]) == [0, 1] and sorted(second["history"]) == [1, 2]
    for run in (first, second):
        for step, values in run["history"].items():
            logged = {c for c in values if c in columns}
            assert logged == {c for c, by_round in columns.items() if step in by_round}
            assert all(same(float(values[c]), columns[c][step]) for c in logged)


def test_a_checkpoint_from_before_the_tracking_section_still_belongs(tmp_path):
    from fedjoule import __version__
    from fedjoule.errors import FedjouleError
    from fedjoule.scenarios.schema import Scenario
    from fedjoule.simulator.checkpoint import check_belongs, scenario_sha256

    data = Scenario().model_dump(mode="json")
    older = {k: v for k, v in data.items() if k != "tracking"}  # written before the section
    saved = {"fedjoule_version": __version__, "scenario": older}
    saved["scenario_sha256"] = scenario_sha256(older)
    check_belongs(saved, tmp_path / "checkpoint.pt", data, tmp_path / "scenario.yaml")
    tracked = Scenario(tracking={"backends": ["csv"]}).model_dump(mode="json")
    with pytest.raises(FedjouleError, match="they differ in tracking"):
        check_belongs(saved, tmp_path / "checkpoint.pt", tracked, tmp_path / "scenario.yaml")
