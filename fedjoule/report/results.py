"""The files of a run: rounds.csv appended as rounds finish, clients.csv, summary.json."""

import csv
import json
import math
import os
from pathlib import Path

ROUND_COLUMNS = [
    "round",
    "sim_time_start_s",
    "sim_time_end_s",
    "online",
    "selected",
    "arrived",
    "dropped",
    "dropped_deadline",
    "dropped_offline",
    "dropped_outage",
    "dropped_battery",
    "dropped_overcommit",
    "failed",
    "energy_compute_j",
    "energy_tx_j",
    "energy_rx_j",
    "energy_total_j",
    "cumulative_energy_j",
    "uplink_bits",
    "uplink_airtime_s",
    "downlink_airtime_s",
    "compute_time_s",
    "uplink_attempts",
    "selected_per_cell",
    "arrived_per_cell",
    "lr",
    "accuracy",
    "loss",
    "worst_client_accuracy",
    "client_accuracy_p10",
    "client_accuracy_std",
    "probed",
    "detection_tpr",
    "detection_fpr",
    "wall_time_s",
]

CLIENT_COLUMNS = [
    "client",
    "device_class",
    "train_samples",
    "cell",
    "distance_m",
    "mean_uplink_snr_db",
    "cpu_freq_hz",
    "tx_power_w",
    "selected",
    "arrived",
    "energy_compute_j",
    "energy_tx_j",
    "energy_rx_j",
    "energy_total_j",
    "battery_initial_j",
    "battery_left_j",
    "freeloader",
    "flagged",
]


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class RoundsFile:
    """rounds.csv: one row per round, flushed to disk as soon as the round ends."""

    def __init__(self, path: Path):
        self.path = path

    def truncate_to(self, rounds_done: int) -> None:
        """Keep the rows of rounds < rounds_done (resuming after an interruption)."""
        if not self.path.exists():
            return
        with self.path.open() as f:
            rows = [r for r in csv.DictReader(f) if int(r["round"]) < rounds_done]
        with self.path.open("w", newline="") as f:
            writer = csv.DictWriter(f, ROUND_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    def append(self, row: dict) -> None:
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(ROUND_COLUMNS)
            writer.writerow([_cell(row.get(c)) for c in ROUND_COLUMNS])
            f.flush()
            os.fsync(f.fileno())


def _number(text: str):
    """A rounds.csv cell as a float (empty: NaN); text such as '3;1;0' stays text."""
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


def read_rounds(path: Path) -> list[dict]:
    """rounds.csv as dicts of floats (empty cells become NaN; per-cell lists stay text)."""
    with Path(path).open() as f:
        return [{k: _number(v) for k, v in r.items()} for r in csv.DictReader(f)]


def write_clients(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CLIENT_COLUMNS)
        for row in rows:
            writer.writerow([_cell(row[c]) for c in CLIENT_COLUMNS])
    os.replace(tmp, path)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")
    os.replace(tmp, path)
