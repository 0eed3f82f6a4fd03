"""The results of the API's commands, read back from their folders: a CSV cell as the
value it was written for, a table as rows, and a run's, sweep's, plan's and capacity
plan's folder as Python values (fedjoule.api returns them; docs/api.md)."""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from fedjoule import arguments
from fedjoule.errors import FedjouleError
from fedjoule.report.table import ROUND_COLUMNS, cell
from fedjoule.simulator import checkpoint

if TYPE_CHECKING:
    import pandas


# columns that hold text even when a cell looks like a number ("3" cells in a one-cell run)
TEXT_COLUMNS = frozenset(
    {"selected_per_cell", "arrived_per_cell", "device_class", "run", "priced_by"}
)
_INT = re.compile(r"-?[0-9]+")


def cell_value(text: str | None, column: str = "") -> Any:
    """A CSV cell of a fedjoule file as the value it was written for (the inverse of
    fedjoule.report.table.cell): "" -> None (no value: a round not evaluated, a column that
    does not apply); "nan" -> math.nan (that very object, so that rows holding it still
    compare equal), "inf" / "-inf" -> the infinities; "True" / "False" -> bool; an integer
    -> int; another number -> float; anything else, and every cell of a text column
    (TEXT_COLUMNS: the per-cell counts "3;1;0", device classes, run names), stays text."""
    if not isinstance(text, str | None) or not isinstance(column, str):  # (per cell: cheap)
        arguments.text("text", text, optional=True, empty=True)
        arguments.text("column", column, empty=True)
    if text is None or text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    if text == "nan":
        return math.nan
    if text == "inf":
        return math.inf
    if text == "-inf":
        return -math.inf
    if text in ("True", "False"):
        return text == "True"
    if _INT.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A CSV file written by fedjoule (rounds.csv, clients.csv, sweep.csv, plan.csv,
    capacity.csv, report.csv) as a list of rows, each cell converted by `cell_value`."""
    path = arguments.path("path", path, optional=False)
    if not path.is_file():
        raise arguments.ArgumentError(f"path={arguments.shown(str(path))}: no such file")
    with path.open(newline="") as f:
        return [{k: cell_value(v, k) for k, v in row.items()} for row in csv.DictReader(f)]


def round_row(row: dict) -> dict[str, Any]:
    """A round's row as rounds.csv holds it, read back: what `on_round` callbacks see."""
    return {c: cell_value(cell(row.get(c)), c) for c in ROUND_COLUMNS}


def _frame(rows: list[dict], what: str) -> pandas.DataFrame:
    try:  # deferred: pandas (optional: fedjoule[pandas])
        import pandas
    except ImportError:
        raise ImportError(
            f"{what}.to_pandas() needs pandas, which is not installed: pip install "
            "'fedjoule[pandas]' (the rows are also plain lists of dicts)"
        ) from None
    return pandas.DataFrame.from_records(rows)


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _folder(folder: Any) -> Path:
    return arguments.path("folder", folder, optional=False)


def _need(folder: Path, names: Sequence[str], what: str) -> None:
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise FedjouleError(f"{folder}: no {' or '.join(missing)}, so not a finished {what}")


@dataclass
class RunResult:
    """A run's folder and its results.

    folder: the run folder. summary: summary.json. rounds: rounds.csv, one dict per round
    (the same dicts `on_round` received). clients: clients.csv, one dict per client.
    stopped_early: the run ended before its last round (its `on_round` returned False);
    `run(None, result.folder, resume=True)` plays the rest.
    """

    folder: Path
    summary: dict[str, Any]
    rounds: list[dict[str, Any]]
    clients: list[dict[str, Any]]
    stopped_early: bool = False

    @property
    def diverged(self) -> bool:
        """The model or loss became NaN/inf (summary diverged_at_round, diverged_reason)."""
        return self.summary.get("diverged_at_round") is not None

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str]) -> RunResult:
        """The results of a run folder written by `run`, `fedjoule run` or a sweep."""
        folder = _folder(folder)
        _need(folder, ("summary.json", "rounds.csv"), "run folder")
        stopped_early = False
        if (folder / checkpoint.NAME).exists():  # (--no-train runs keep none)
            saved = checkpoint.read_checkpoint(folder / checkpoint.NAME, mmap=True)
            stopped_early = not checkpoint.finished(saved)
        clients = folder / "clients.csv"
        return cls(
            folder,
            _read_json(folder / "summary.json"),
            read_table(folder / "rounds.csv"),
            read_table(clients) if clients.is_file() else [],
            stopped_early,
        )

    def to_pandas(self) -> dict[str, pandas.DataFrame]:
        """{"rounds": DataFrame, "clients": DataFrame} (needs pandas)."""
        return {
            "rounds": _frame(self.rounds, "RunResult"),
            "clients": _frame(self.clients, "RunResult"),
        }


@dataclass
class FolderResult:
    """A command's folder, its table (the CSV, one row per line, types restored) and its
    description (the JSON). Subclasses name the two files."""

    TABLE: ClassVar[str]
    INFO: ClassVar[str]

    folder: Path
    table: list[dict[str, Any]]
    info: dict[str, Any]

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str]) -> Self:
        folder = _folder(folder)
        kind = cls.TABLE.split(".")[0]
        _need(folder, (cls.TABLE, cls.INFO), f"{kind} folder")
        return cls(folder, read_table(folder / cls.TABLE), _read_json(folder / cls.INFO))

    def to_pandas(self) -> pandas.DataFrame:
        """The table as a DataFrame (needs pandas)."""
        return _frame(self.table, type(self).__name__)


@dataclass
class SweepResult(FolderResult):
    """A sweep's folder, its table (sweep.csv: one row per finished run, its grid values,
    summary and Pareto marks) and its description (sweep.json: grid, options, every run's
    folder and status)."""

    TABLE: ClassVar[str] = "sweep.csv"
    INFO: ClassVar[str] = "sweep.json"

    @property
    def status(self) -> dict[str, str]:
        """Run name -> ran, resumed, skipped, diverged or failed."""
        return {r["name"]: r.get("status") for r in self.info["runs"]}

    @property
    def run_folders(self) -> dict[str, Path]:
        """Run name -> its run folder (inside the sweep folder)."""
        return {r["name"]: self.folder / r["folder"] for r in self.info["runs"]}

    def run(self, name: str) -> RunResult:
        """The results of one of the sweep's runs (a name of `run_folders`)."""
        folders = self.run_folders
        if not isinstance(name, str) or name not in folders:
            some = ", ".join(list(folders)[:5]) + (", ..." if len(folders) > 5 else "")
            raise arguments.ArgumentError(
                f"name={arguments.shown(name)}: not a run of {self.folder}; its runs: {some}"
            )
        return RunResult.from_folder(folders[name])


@dataclass
class PlanResult(FolderResult):
    """A plan's folder, its table (plan.csv: one row per K and channel cell) and its
    description (plan.json: grid, method, K* per cell in `best`)."""

    TABLE: ClassVar[str] = "plan.csv"
    INFO: ClassVar[str] = "plan.json"

    @property
    def best(self) -> list[dict[str, Any]]:
        """One entry per cell: snr_db, bandwidth_hz, K_star (None: no K reaches the
        target), E_total_j and rounds_to_target."""
        return self.info["best"]

    @property
    def method(self) -> str:
        """reprice (one learning run per K) or per-cell; `info["reason"]` says why."""
        return self.info["method"]


@dataclass
class CapacityResult(FolderResult):
    """A capacity plan's folder, its table (capacity.csv: one row per candidate evaluated)
    and everything else (capacity.json: the scenario's figures, the answer and its
    figures, the limits)."""

    TABLE: ClassVar[str] = "capacity.csv"
    INFO: ClassVar[str] = "capacity.json"

    @property
    def answer(self) -> float | int | None:
        """The largest clients_per_round or smallest uplink_bandwidth_hz meeting the limits
        (None: none does, or search "none")."""
        return self.info["answer"]
