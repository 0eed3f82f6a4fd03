"""Progress of many runs at once (sweep, plan): one bar per run in flight, its rounds read
from its rounds.csv every second, and a bar over all rounds with the time remaining.

The runs execute in other processes (a process pool or Ray), so their progress is read
from what they write: a run's folder appears when it starts, and rounds.csv gains a line
per round. A run stopped early at its target counts as complete when it ends.
"""

import threading
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

POLL_S = 1.0
STATUS_CHARS = 28  # the status column's width: the bars keep their room on 80 columns


def rounds_written(folder: Path) -> int:
    """The rounds in a run folder's rounds.csv (0 when there is none yet)."""
    try:
        with (Path(folder) / "rounds.csv").open("rb") as f:
            return max(sum(1 for _ in f) - 1, 0)
    except OSError:
        return 0


def many_runs_progress(console, quiet: bool) -> Progress:
    """Description, bar, done/total, status, elapsed and remaining time (rich's estimate
    from the recent speed; over all rounds it assumes every run goes to its rounds cap, so
    runs that stop at their target finish sooner)."""
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", markup=False),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    )


class RunsProgress:
    """The hooks of planning.sweep.run_sweep (`on_plan`, `on_run`) drawing one bar per run
    in flight and a total over all rounds; `replays(n)` and `replayed(what)` draw plan's
    replays. Use as a context manager around the work (it starts and stops the poller)."""

    def __init__(self, progress: Progress, label: str = "rounds"):
        self.progress = progress
        self.label = label
        self.total: TaskID | None = None
        self.replay_task: TaskID | None = None
        self.runs: dict[str, tuple[Path, int]] = {}  # run folder -> (folder, rounds cap)
        self.names: dict[str, str] = {}  # the current sweep's run names -> run folder
        self.shown: dict[str, TaskID] = {}  # run folder -> its bar
        self.finished: set[str] = set()  # run folders
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "RunsProgress":
        self.progress.start()  # the total's bar from the first second (checking the grid)
        self.total = self.progress.add_task(self.label, total=None, status="checking the grid")
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.progress.stop()

    # ---------------------------------------------------------------- sweep hooks
    def on_plan(self, points, states: dict[str, str], folders: dict[str, Path]) -> None:
        """Before a sweep's runs: every point's folder and rounds cap; finished ones done."""
        with self.lock:
            self.names = {p.name: str(folders[p.name]) for p in points}
            for p in points:
                key = self.names[p.name]
                self.runs[key] = (Path(folders[p.name]), p.scenario.training.rounds)
                if states[p.name] == "done":
                    self.finished.add(key)
            cap = sum(rounds for _, rounds in self.runs.values())
            if self.total is None:
                self.total = self.progress.add_task(self.label, total=cap, status="")
            else:
                self.progress.update(self.total, total=cap, status="")
        self._refresh()

    def on_run(self, name: str, status: str) -> None:
        with self.lock:
            key = self.names.get(name, name)
            self.finished.add(key)
            task = self.shown.pop(key, None)
            if task is not None:
                self.progress.remove_task(task)
        self._refresh(f"{name} {status}")

    # ---------------------------------------------------------------- plan's replays
    def replays(self, n: int) -> None:
        self.replay_task = self.progress.add_task("replays", total=n, status="")

    def replayed(self, what: str) -> None:
        self.progress.update(self.replay_task, advance=1, status=what[:STATUS_CHARS])

    # ---------------------------------------------------------------- polling
    def _poll(self) -> None:
        while not self.stop.wait(POLL_S):
            self._refresh()

    def _refresh(self, status: str | None = None) -> None:
        with self.lock:
            if self.total is None or not self.runs:
                return
            done = 0
            for key, (folder, cap) in self.runs.items():
                if key in self.finished:
                    done += cap  # a run that stopped at its target is complete
                    continue
                written = rounds_written(folder)
                done += min(written, cap)
                if (folder / "scenario.yaml").exists() and key not in self.shown:
                    label = f"  {folder.parent.parent.name}/{folder.name}"
                    self.shown[key] = self.progress.add_task(label, total=cap, status="")
                if key in self.shown:
                    self.progress.update(self.shown[key], completed=min(written, cap))
            finished = len(self.finished)
            fields = {} if status is None else {"status": status[:STATUS_CHARS]}
            self.progress.update(self.total, completed=done, **fields)
            self.progress.update(
                self.total, description=f"{self.label} ({finished}/{len(self.runs)} runs done)"
            )
