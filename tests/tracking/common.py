"""What the tracking tests share: a tiny scenario and the files a run wrote, read back."""

import csv
import json
import math
import os
from pathlib import Path

import yaml

from fedjoule.tracking.values import flatten

# 3 rounds of 2 clients out of 6 on synthetic data: about a second a run
TINY = {
    "training.rounds": 3,
    "population.size": 6,
    "training.clients_per_round": 2,
    "round.min_clients": 1,
    "training.local_steps": 2,
    "dataset.synthetic.avg_samples": 20,
}
PLOTS = ["accuracy_vs_energy", "accuracy_vs_round", "accuracy_vs_time", "energy_by_class"]


def rounds(folder: Path) -> list[dict[str, str]]:
    """rounds.csv's rows as the text of each cell."""
    with (Path(folder) / "rounds.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def numeric(rows: list[dict[str, str]]) -> dict[str, dict[int, float]]:
    """column -> {round: value} for every numeric cell of rounds.csv (True/False as 1/0)."""
    found: dict[str, dict[int, float]] = {}
    for row in rows:
        for column, text in row.items():
            if text in ("True", "False"):
                value = float(text == "True")
            else:
                try:
                    value = float(text)
                except ValueError:
                    continue
            found.setdefault(column, {})[int(row["round"])] = value
    return found


def texts(rows: list[dict[str, str]]) -> dict[str, dict[int, str]]:
    """column -> {round: text} for the non-empty text cells of rounds.csv."""
    found: dict[str, dict[int, str]] = {}
    for row in rows:
        for column, text in row.items():
            if text and column not in numeric([row]):
                found.setdefault(column, {})[int(row["round"])] = text
    return found


def scenario_params(folder: Path) -> dict:
    """scenario.yaml as dotted keys."""
    return flatten(yaml.safe_load((Path(folder) / "scenario.yaml").read_text()))


def summary_numbers(folder: Path) -> dict[str, float]:
    """summary.json's numeric fields (bools as 0/1; nested ones dotted)."""
    data = flatten(json.loads((Path(folder) / "summary.json").read_text()))
    return {k: float(v) for k, v in data.items() if isinstance(v, bool | int | float)}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def mlflow_client(store: Path):
    """An MlflowClient on a tracking folder's file store (MLflow 3 opens a file store only
    with MLFLOW_ALLOW_FILE_STORE=true, as docs/tracking.md tells a reader to set)."""
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=Path(store).resolve().as_uri())
