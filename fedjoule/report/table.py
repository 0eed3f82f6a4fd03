"""Tables as CSV: rounds.csv's columns, run summaries (a sweep's sweep.csv, a report's
report.csv) written and read, and a run's clients.csv totalled per device class."""

import csv
import io
import math
import sys
from collections import defaultdict
from pathlib import Path

from fedjoule.energy_kinds import END_OF_RUN_TAIL, ENERGY_FIELDS, Derived
from fedjoule.storage import write_text_atomically

# rounds.csv's columns (report/results.py writes it; a protocol's own columns follow them)
# (Derived: a registered energy kind joins ENERGY_FIELDS; fedjoule/energy_kinds.py)
ROUND_COLUMNS = Derived(
    lambda: [
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
        END_OF_RUN_TAIL,
        "uplink_bits",
        "uplink_airtime_s",
        "downlink_airtime_s",
        "compute_time_s",
        "max_compute_time_s",
        "server_compute_time_s",
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
        "expelled",
        "expelled_benign",
        "detection_tpr",
        "detection_fpr",
        "wall_time_s",
    ]
)


def cell(value) -> str:
    """A CSV cell: "" for None (no value), nan / inf / -inf for a float that is not
    finite, repr for other floats (round-trips exactly), a list's items joined by "; "
    (summary.json's warnings), a dict's as key=value joined by "; " (its policy), str for
    the rest."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return "; ".join(map(str, value))
    if isinstance(value, dict):
        return "; ".join(f"{k}={v}" for k, v in value.items())
    numpy = sys.modules.get("numpy")  # (a numpy float exists only once numpy is loaded)
    if isinstance(value, float) or (numpy is not None and isinstance(value, numpy.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        return repr(value)  # 'inf' and '-inf' for the infinities
    return str(value)


def write_table(path: Path, rows: list[dict]) -> None:
    """Rows as CSV; the columns are the union of the rows' keys in order of appearance."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(row.get(c)) for c in columns])
    write_text_atomically(Path(path), text.getvalue())


def read_table(path: Path) -> list[dict[str, str]]:
    """A table written by write_table, as text cells."""
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def energy_by_class(clients_csv: Path) -> dict[str, dict]:
    """Per device class: its devices, selections (participations), arrivals and the
    total of each energy column of clients.csv."""
    classes: dict[str, dict] = {}
    with Path(clients_csv).open() as f:
        for row in csv.DictReader(f):
            c = classes.setdefault(
                row["device_class"],
                {"devices": 0, "selected": 0, "arrived": 0, "energy": defaultdict(float)},
            )
            c["devices"] += 1
            c["selected"] += int(float(row.get("selected") or 0))
            c["arrived"] += int(float(row.get("arrived") or 0))
            for field in ENERGY_FIELDS:
                if row.get(field):
                    c["energy"][field] += float(row[field])
    return classes
