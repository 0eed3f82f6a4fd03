"""The files of a run: rounds.csv appended as rounds finish, clients.csv, summary.json.

CSV cells: an empty cell is a value that does not exist (a round that was not evaluated,
a column that does not apply); a number that is not finite is written as the token
`nan`, `inf` or `-inf` (rounds.csv then says why in its `diverged` column), never as an
empty cell or a number. summary.json holds no NaN or inf (JSON has none): such a value
is null there.
"""

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from fedjoule.report.table import cell
from fedjoule.storage import AppendLog, write_text_atomically

# every energy a client spends, in the order of the files' columns (energy_total_j: their
# sum); the radio states' three are 0 for a radio without states (radio_states.py)
ENERGY_FIELDS = (
    "energy_compute_j",
    "energy_tx_j",
    "energy_rx_j",
    "energy_radio_promotion_j",
    "energy_radio_tail_j",
    "energy_idle_j",
)

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
    "diverged",
    *ENERGY_FIELDS,
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
    *ENERGY_FIELDS,
    "energy_total_j",
    "battery_initial_j",
    "battery_left_j",
    "freeloader",
    "flagged",
]


class RoundsFile:
    """rounds.csv: one row per round, appended and fsynced as soon as the round ends; its
    length and CRC-32 go into every checkpoint (fedjoule.storage.AppendLog)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.log = AppendLog(self.path)

    def append(self, row: dict) -> None:
        text = io.StringIO()
        writer = csv.writer(text)
        if self.log.length == 0:
            writer.writerow(ROUND_COLUMNS)
        writer.writerow([cell(row.get(c)) for c in ROUND_COLUMNS])
        self.log.append(text.getvalue().encode())


def _number(text: str | None, missing=math.nan):
    """A rounds.csv cell as a float (nan, inf, -inf as such; empty: `missing`); text
    such as '3;1;0' stays text."""
    if text == "" or text is None:  # None: a row shorter than the header
        return missing
    try:
        return float(text)
    except ValueError:
        return text


def read_rounds(path: Path, missing=math.nan) -> list[dict]:
    """rounds.csv as dicts of floats; per-cell lists stay text. Non-finite values come
    back as float nan / inf / -inf; empty cells (no value: not evaluated, not applicable)
    as `missing`: NaN by default, so that `x == x` picks the evaluated rounds for a plot;
    pass missing=None to tell a value that does not exist from a NaN result (the
    `diverged` column says which rounds diverged)."""
    with Path(path).open() as f:
        return [{k: _number(v, missing) for k, v in r.items()} for r in csv.DictReader(f)]


def write_clients(path: Path, rows: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(CLIENT_COLUMNS)
    for row in rows:
        writer.writerow([cell(row[c]) for c in CLIENT_COLUMNS])
    write_text_atomically(path, text.getvalue())


def finite_or_none(value):
    """A number for JSON, which has no NaN or inf: such a float becomes None, other floats
    plain floats; anything else stays as it is."""
    if isinstance(value, float | np.floating):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def write_json(path: Path, data: dict) -> None:
    write_text_atomically(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")
