"""Tables of run summaries as CSV (a sweep's sweep.csv, a report's report.csv)."""

import csv
import io
import math
from pathlib import Path

import numpy as np

from fedjoule.storage import write_text_atomically


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
    if isinstance(value, float | np.floating):
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
