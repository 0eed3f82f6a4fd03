"""The mlflow tracker: a local MLflow file store (a `file:` URI), never a server.

The store is <tracking folder>/mlruns (a sweep's or plan's: its own, with each run nested
under the parent run: the tag mlflow.parentRunId). Each tracked run holds the scenario as
params (dotted keys), every numeric rounds.csv column as a metric with one value per
round (step = round), summary.json's numbers as summary/<field> metrics (step = the last
round) and the plots as artifacts under plots/. MLflow 3 keeps its file store only when
MLFLOW_ALLOW_FILE_STORE is true; this tracker sets it for its own process.
"""

import os
import time

from fedjoule.tracking.base import Params, Tracker

BATCH = 100  # params per log_batch call (MLflow's limit)


def _mlflow():
    """The mlflow package with its entities (Param, Metric), its file store allowed."""
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    import mlflow.entities  # deferred: MLflow (optional tracker, 0.7 s)

    return mlflow


class MlflowTracker(Tracker):
    """An MLflow run per tracked run, in a local file store."""

    requires = ("mlflow",)
    extra = "mlflow"

    def _client(self):
        self.uri = (self.folder / "mlruns").resolve().as_uri()
        return _mlflow().MlflowClient(tracking_uri=self.uri)

    def start(self, name, params: Params, parent, resumed, first_round) -> dict:
        self.client = self._client()
        self.logged: set[tuple[str, int]] = set()  # (metric, step) the store holds
        if resumed:
            self.run_id, self.experiment_id = resumed["run_id"], resumed["experiment_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            for key in self.client.get_run(self.run_id).data.metrics:
                history = self.client.get_metric_history(self.run_id, key)
                self.logged.update((key, m.step) for m in history if m.step >= first_round)
        else:
            if parent:
                self.experiment_id = parent["experiment_id"]
            else:
                found = self.client.get_experiment_by_name(self.experiment)
                self.experiment_id = (
                    found.experiment_id if found else self.client.create_experiment(self.experiment)
                )
            tags = {"fedjoule.run": name}
            if parent:
                tags["mlflow.parentRunId"] = parent["run_id"]
            run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
            self.run_id = run.info.run_id
            texts = {k: ("null" if v is None else str(v))[:6000] for k, v in params.items()}
            param = _mlflow().entities.Param
            items = [param(k, v) for k, v in texts.items()]  # (6000: MLflow's limit)
            for i in range(0, len(items), BATCH):
                self.client.log_batch(self.run_id, params=items[i : i + BATCH])
        self.last_step = max(first_round - 1, 0)
        return {"run_id": self.run_id, "experiment_id": self.experiment_id, "uri": self.uri}

    def reference(self) -> dict:
        return {"run_id": self.run_id, "experiment_id": self.experiment_id}

    def _metrics(self, values: dict, step: int) -> None:
        metric = _mlflow().entities.Metric
        now = int(time.time() * 1000)
        items = [metric(k, float(v), now, step) for k, v in values.items()]
        for i in range(0, len(items), 1000):  # MLflow's limit of metrics per batch
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def log_round(self, round_, metrics, texts) -> None:
        self.last_step = round_
        # (a round logged, wholly or partly, before an interruption's last note: the rest)
        self._metrics({k: v for k, v in metrics.items() if (k, round_) not in self.logged}, round_)

    def log_summary(self, values) -> None:
        self._metrics({f"summary/{k}": v for k, v in values.items()}, self.last_step)

    def log_artifacts(self, files) -> None:
        for file in files:
            self.client.log_artifact(self.run_id, str(file), "plots")

    def finish(self, complete) -> None:
        self.client.set_terminated(self.run_id, "FINISHED" if complete else "KILLED")
