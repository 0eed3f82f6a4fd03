"""The tracked runs of a fedjoule run, sweep or plan: which trackers, where they write,
and what lets a resumed run continue the same tracked runs.

A run's trackers start once its round-0 checkpoint is written and are given each round's
row right after that round's checkpoint (the run's `on_round` seam), then the summary
and the plots when the run is complete. The run folder's tracking.json keeps each
tracker's state (run ids) and the next round to log, rewritten after every round: a
resumed run reopens the same tracked runs and first logs the rows of rounds.csv from
that round on, so that no round is missing. A kill in the instant between a round's
logging and that note logs the round again on resume; the csv, TensorBoard and MLflow
trackers drop such a repeat (csv rows and TensorBoard steps from that round on are
purged, MLflow skips the (metric, step) pairs it holds), W&B receives it twice in that
case only.

A sweep's or plan's parent tracked run is started in its own folder (tracking.json
there too); its `context()` travels with each run (planning/backends.py Job) so that the
runs write into the parent's tracking folder, nested under it.
"""

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from fedjoule.errors import FedjouleError
from fedjoule.folders import check_out_folder
from fedjoule.plugins import call_plugin
from fedjoule.report.table import read_table
from fedjoule.storage import write_text_atomically
from fedjoule.tracking.registry import tracker_class
from fedjoule.tracking.values import params, row_values, summary_numbers

STATE = "tracking.json"


def tracking_folder(section, out: Path) -> Path:
    """Where a run's (or a sweep's) trackers write: tracking.folder, relative to `out`."""
    folder = Path(section.folder).expanduser()
    return (folder if folder.is_absolute() else Path(out) / folder).resolve()


def check_tracking_folder(section, out: Path | None) -> None:
    """FedjouleError when the trackers could not write in tracking.folder: a NUL byte in
    its name, or a folder that cannot be made or written (folders.check_out_folder).
    Creates nothing; a relative folder is checked under `out` (None: only an absolute
    one is checked), so that a run is refused before its own folder is made."""
    if "\x00" in section.folder:
        raise FedjouleError("tracking.folder: the name holds a NUL byte; give a folder's path")
    if not section.backends:
        return
    try:
        folder = Path(section.folder).expanduser()
        if out is None and not folder.is_absolute():
            return
        check_out_folder(tracking_folder(section, out or Path.cwd()))
    except (OSError, RuntimeError, FedjouleError) as exc:  # RuntimeError: no home (~)
        why = str(exc) if isinstance(exc, FedjouleError) else type(exc).__name__
        raise FedjouleError(f"tracking.folder {section.folder[:200]}: {why}") from None


class Tracked:
    """The trackers of one tracked run (a fedjoule run, or a sweep's or plan's parent)."""

    def __init__(self, section, folder: Path, experiment: str, out: Path) -> None:
        self.out = Path(out)
        self.backends = list(section.backends)
        self.trackers = {}
        for name in self.backends:
            recorded = section.sources.get(name)
            cls, _ = tracker_class(name, (), recorded.model_dump() if recorded else None)
            self.trackers[name] = cls(folder, experiment)
        self.folder, self.experiment = folder, experiment
        self.next_round = 0
        self.states: dict[str, dict] = {}

    def _saved(self) -> dict | None:
        path = self.out / STATE
        return json.loads(path.read_text()) if path.is_file() else None

    def _write(self) -> None:
        data = {"backends": self.backends, "next_round": self.next_round, "trackers": self.states}
        write_text_atomically(self.out / STATE, json.dumps(data, indent=1) + "\n")

    def start(self, name: str, hyper: dict, parent: dict | None, first_round: int) -> int:
        """Open (or reopen) every tracker; returns the first round still to log."""
        saved = self._saved() or {}
        resumed = saved.get("trackers", {})
        self.next_round = min(saved.get("next_round", 0), first_round) if saved else 0
        refs = (parent or {}).get("refs", {})
        for backend, tracker in self.trackers.items():
            self.states[backend] = self._call(
                backend,
                tracker.start,
                name,
                hyper,
                refs.get(backend),
                resumed.get(backend),
                self.next_round,
            )
        self._write()
        return self.next_round

    def context(self) -> dict:
        """What the runs of a sweep or plan need to be tracked under this parent."""
        refs = {backend: tracker.reference() for backend, tracker in self.trackers.items()}
        return {
            "folder": str(self.folder),
            "experiment": self.experiment,
            "root": str(self.out.resolve()),
            "refs": refs,
        }

    @staticmethod
    def _call(backend: str, method, *args):
        """A tracker's method; its failure is a PluginError naming the backend (the run's
        rounds so far are saved: it resumes like an interrupted run)."""
        return call_plugin(f"tracking backend {backend!r} ({method.__name__})", method, *args)

    def log_round(self, round_: int, metrics: dict, texts: dict) -> None:
        for backend, tracker in self.trackers.items():
            self._call(backend, tracker.log_round, round_, metrics, texts)
        self.next_round = round_ + 1
        self._write()

    def finish(self, complete: bool, summary: dict | None, files: list[Path]) -> None:
        for backend, tracker in self.trackers.items():
            if complete and summary is not None:
                self._call(backend, tracker.log_summary, summary_numbers(summary))
            if complete and files:
                self._call(backend, tracker.log_artifacts, [Path(f) for f in files])
            self._call(backend, tracker.finish, complete)


class RunTracking:
    """A fedjoule run's tracking (None from `start_run` when the scenario tracks nothing)."""

    def __init__(self, tracked: Tracked, columns: list[str]) -> None:
        self.tracked, self.columns = tracked, columns

    def round(self, row: dict) -> None:
        metrics, texts = row_values(row, self.columns)
        self.tracked.log_round(int(row["round"]), metrics, texts)

    def chain(self, on_round: Callable[[dict], bool | None] | None):
        """The run's per-round callback: the row to the trackers, then to `on_round`."""

        def record(row: dict) -> bool | None:
            self.round(row)
            return on_round(row) if on_round else None

        return record

    def finish(self, complete: bool, summary: dict | None, files: list[Path]) -> None:
        self.tracked.finish(complete, summary, files)

    def abandon(self) -> None:
        """Close the trackers of a run that raised (it resumes like an interrupted run)."""
        for tracker in self.tracked.trackers.values():
            with contextlib.suppress(Exception):
                tracker.finish(False)


def run_name(out: Path, parent: dict | None) -> str:
    """A run's tracked name: its folder's name, or its path under the sweep's or plan's
    folder (runs/<point>, cells/<cell>/runs/<point>)."""
    out = Path(out).resolve()
    if parent and out.is_relative_to(parent["root"]):
        return out.relative_to(parent["root"]).as_posix()
    return out.name


def start_run(
    scenario, out: Path, columns: list[str], first_round: int, parent: dict | None
) -> RunTracking | None:
    """Start the trackers of the run in `out` (resumed: from `first_round`) and log the
    rows of rounds.csv they have not logged yet."""
    section = scenario.tracking
    if not section.backends:
        return None
    if parent:
        folder, experiment = Path(parent["folder"]), parent["experiment"]
    else:
        folder = tracking_folder(section, out)
        experiment = section.experiment or scenario.name
    tracked = Tracked(section, folder, experiment, out)
    name = run_name(out, parent)
    start = tracked.start(name, params(scenario.model_dump(mode="json")), parent, first_round)
    tracking = RunTracking(tracked, columns)
    if start < first_round:  # rounds saved but not logged before an interruption
        for row in read_table(out / "rounds.csv"):  # each cell as its text
            if start <= int(row["round"]) < first_round:
                tracking.round(row)  # the values the live row gave (row_values reads text)
    return tracking


def start_parent(section, out: Path, name: str, hyper: dict) -> Tracked | None:
    """The parent tracked run of a sweep or plan in `out` (None: no tracking)."""
    if not section.backends:
        return None
    experiment = section.experiment or name
    Path(out).mkdir(parents=True, exist_ok=True)
    tracked = Tracked(section, tracking_folder(section, out), experiment, out)
    tracked.start(name, hyper, None, 0)
    return tracked


def where_tracked(out: Path) -> list[str]:
    """Lines saying where the run (or sweep, or plan) in `out` was tracked and how to open
    it (docs/tracking.md), from its tracking.json; none when it was not tracked."""
    try:
        trackers = json.loads((Path(out) / STATE).read_text())["trackers"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    lines = []
    for name, state in trackers.items():
        state = state if isinstance(state, dict) else {}
        if name == "tensorboard" and "dir" in state:
            logdir = Path(state["dir"]).parent
            lines.append(f"tensorboard: {state['dir']} (tensorboard --logdir {logdir})")
        elif name == "mlflow" and "uri" in state:
            lines.append(
                f"mlflow: run {state.get('run_id')} in {state['uri']} (MLFLOW_ALLOW_FILE_STORE="
                f"true mlflow ui --backend-store-uri {state['uri']})"
            )
        elif name == "wandb" and "dir" in state:
            lines.append(f"wandb (offline): {state['dir']} (wandb sync {state['dir']})")
        elif "dir" in state:
            lines.append(f"{name}: {state['dir']}")
        else:
            lines.append(f"{name}: tracked")
    return lines
