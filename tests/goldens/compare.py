"""Compare a run's output folder with its golden: the same files, the same CSV columns in
the same order and the same rows, the same JSON keys in the same order; numbers equal to
1e-9 relative (integers, strings, booleans and nulls exactly), wall-clock fields aside."""

import csv
import json
import math
import re
from pathlib import Path

REL = 1e-9
COMPARED = (".csv", ".json", ".jsonl")
# the fields that differ between two runs of the same command, by name wherever they
# appear: wall-clock times (and their statistics over seeds) and dates; every other field
# of every file is compared. Paths are compared with the run's folder written as OUT.
IGNORED = frozenset(
    {
        "wall_time_s",
        "wall_time_s_mean",
        "wall_time_s_std",
        "wall_time_s_ci95",
        "wall_time_s_ci95_lo",
        "wall_time_s_ci95_hi",
        "started",  # sweep.json: dates
        "finished",
    }
)
OUT = "<out>"
# summary.json keys added since the goldens were recorded, with their type: a new run's
# summary.json must hold each, of that type; they are not compared with the recording,
# and elsewhere (sweep.csv, aggregate.csv/json) their columns and statistics
# (`<key>_mean`, ...) are left out of the comparison. Every recorded key still compares.
ADDED = {"policy": dict, "jain_participation": float, "jain_energy": float}  # issue 29


def added(name: str) -> bool:
    """A key or column of ADDED, or one of its statistics over seeds."""
    return any(name == key or name.startswith(f"{key}_") for key in ADDED)


# the figures that depend on training numerics (compared only on the torch and numpy
# versions that recorded the goldens)
TRAINING = re.compile(r"accuracy|loss|target|diverged|flagged|expelled|detection|pareto")


class Differences:
    """What differs, one line each, naming the case, file, row and column."""

    def __init__(self, case: str, out: Path, skip=lambda name: False, limit: int = 20):
        """`out`: the new run's folder (written as OUT in the goldens); `skip(name)`: a
        field not to compare besides IGNORED."""
        self.case, self.out, self.skip, self.limit, self.lines = case, str(out), skip, limit, []

    def add(self, where: str, what: str) -> None:
        if len(self.lines) < self.limit:
            self.lines.append(f"{self.case}: {where}: {what}")

    def ignored(self, name: str) -> bool:
        return name in IGNORED or self.skip(name)

    def text(self, new: str) -> str:
        """A new run's text as the goldens write it (its folder as OUT)."""
        return new.replace(self.out, OUT)


def number(text: str):
    """The number a CSV cell holds (int or float), or None for any other text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def same_number(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b or math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def same_cell(stored: str, new: str) -> bool:
    if stored == new:
        return True
    a, b = number(stored), number(new)
    if a is None or b is None or isinstance(a, int) or isinstance(b, int):
        return False  # text and integers exactly; a float may be written differently
    return same_number(a, b)


def compare_csv(stored: Path, new: Path, name: str, diff: Differences) -> None:
    with stored.open(newline="") as f:
        old_rows = list(csv.reader(f))
    with new.open(newline="") as f:
        new_rows = list(csv.reader(f))
    if old_rows and new_rows:  # the columns of ADDED keys the goldens do not hold
        kept = [i for i, c in enumerate(new_rows[0]) if c in old_rows[0] or not added(c)]
        new_rows = [[row[i] for i in kept if i < len(row)] for row in new_rows]
    if not old_rows or not new_rows or old_rows[0] != new_rows[0]:
        head = (old_rows or [[]])[0], (new_rows or [[]])[0]
        diff.add(name, f"columns differ: stored {head[0]}, new {head[1]}")
        return
    if len(old_rows) != len(new_rows):
        diff.add(name, f"{len(old_rows) - 1} rows stored, {len(new_rows) - 1} new")
    header = old_rows[0]
    for i, (a, b) in enumerate(zip(old_rows[1:], new_rows[1:], strict=False)):
        for column, x, y in zip(header, a, b, strict=True):
            if not diff.ignored(column) and not same_cell(x, diff.text(y)):
                diff.add(f"{name} row {i} column {column}", f"stored {x!r}, new {y!r}")


def kind(value) -> str:
    return "number" if type(value) is float else type(value).__name__


def compare_json(stored, new, where: str, diff: Differences) -> None:
    if isinstance(stored, dict) and isinstance(new, dict):
        keys = [k for k in new if k in stored or not added(k)]  # ADDED's not recorded
        if list(stored) != keys:
            diff.add(where, f"keys differ: stored {list(stored)}, new {keys}")
        for key in stored:
            if key in new and not diff.ignored(key):
                compare_json(stored[key], new[key], f"{where} {key}", diff)
    elif isinstance(stored, list) and isinstance(new, list):
        if len(stored) != len(new):
            diff.add(where, f"{len(stored)} items stored, {len(new)} new")
        for i, (a, b) in enumerate(zip(stored, new, strict=False)):
            compare_json(a, b, f"{where}[{i}]", diff)
    elif type(stored) is not type(new):
        diff.add(where, f"stored {stored!r} ({kind(stored)}), new {new!r} ({kind(new)})")
    elif isinstance(stored, float):
        if not same_number(stored, new):
            diff.add(where, f"stored {stored!r}, new {new!r}")
    elif stored != (diff.text(new) if isinstance(new, str) else new):
        diff.add(where, f"stored {stored!r}, new {new!r}")


def compare_file(stored: Path, new: Path, name: str, diff: Differences) -> None:
    if stored.suffix == ".csv":
        compare_csv(stored, new, name, diff)
    elif stored.suffix == ".json":
        data = json.loads(new.read_text())
        if stored.name == "summary.json":
            for key, kind_of in ADDED.items():
                if not isinstance(data.get(key), kind_of):
                    diff.add(f"{name} {key}", f"added key missing or not {kind_of.__name__}")
        compare_json(json.loads(stored.read_text()), data, name, diff)
    else:  # .jsonl: one JSON document a line
        old_lines, new_lines = stored.read_text().splitlines(), new.read_text().splitlines()
        if len(old_lines) != len(new_lines):
            diff.add(name, f"{len(old_lines)} lines stored, {len(new_lines)} new")
        for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=False)):
            compare_json(json.loads(a), json.loads(b), f"{name} line {i}", diff)


def compared_files(folder: Path) -> list[str]:
    files = [p for p in folder.rglob("*") if p.is_file() and p.suffix in COMPARED]
    return sorted(str(p.relative_to(folder)) for p in files)


def compare_folders(stored: Path, new: Path, diff: Differences) -> list[str]:
    """Every compared file of `stored` against `new`'s; the differences found."""
    old_files, new_files = compared_files(stored), compared_files(new)
    if old_files != new_files:
        missing = sorted(set(old_files) - set(new_files))
        extra = sorted(set(new_files) - set(old_files))
        diff.add("files", f"missing {missing}, not in the goldens {extra}")
    for name in old_files:
        if name in new_files:
            compare_file(stored / name, new / name, name, diff)
    return diff.lines
