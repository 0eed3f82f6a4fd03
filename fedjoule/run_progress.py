"""Progress of many runs at once (sweep, plan): one bar per run in flight, its rounds read
from its rounds.csv every second, and a bar over all rounds with the time remaining.

The runs execute in other processes (a process pool or Ray), so their progress is read
from what they write: a run's folder appears when it starts, and rounds.csv gains a line
per round. A run stopped early at its target counts as complete when it ends.
"""

import re
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
from rich.table import Column, Table
from rich.text import Text

POLL_S = 1.0
STATUS_CHARS = 28  # the status column's width: the bars keep their room on 80 columns


def rounds_written(folder: Path) -> int:
    """The rounds in a run folder's rounds.csv (0 when there is none yet)."""
    try:
        with (Path(folder) / "rounds.csv").open("rb") as f:
            return max(sum(1 for _ in f) - 1, 0)
    except OSError:
        return 0


class FittedProgress(Progress):
    """A Progress whose rows fit the console's width without cutting a figure: the counts
    (720/720) and the times (elapsed, remaining) always whole, the bar narrower on a narrow
    terminal, and the texts (what runs, its status) wrapped onto more lines rather than
    cut."""

    MIN_BAR, MAX_BAR = 6, 40

    def make_tasks_table(self, tasks) -> Table:
        if not hasattr(self, "live"):  # (rich draws once while it is being made)
            return super().make_tasks_table(tasks)
        tasks = [t for t in tasks if t.visible]
        rendered = [[column(task) for task in tasks] for column in self.columns]
        flexible = [isinstance(c, TextColumn) for c in self.columns]
        widths: list[int | None] = []
        for column, cells, flex in zip(self.columns, rendered, flexible, strict=True):
            if flex or isinstance(column, BarColumn):
                widths.append(None)
            else:  # a figure: as wide as its widest cell
                widths.append(max((self.console.measure(c).maximum for c in cells), default=1))
        room = self.console.width - (len(self.columns) - 1)  # one space between columns
        left = room - sum(w for w in widths if w is not None)
        bars = [i for i, c in enumerate(self.columns) if isinstance(c, BarColumn)]
        texts = [i for i, flex in enumerate(flexible) if flex]
        longest = {i: max((_width(c) for c in rendered[i]), default=1) for i in texts}
        least = {i: max((_part_width(c) for c in rendered[i]), default=1) for i in texts}
        bar = max(min(left // 4, self.MAX_BAR), self.MIN_BAR) if bars else 0
        if bars and left - bar * len(bars) < sum(least.values()):  # the bar gives way first
            bar = max((left - sum(least.values())) // len(bars), 3)
        for i in bars:
            self.columns[i].bar_width = bar
            widths[i] = bar
        left -= bar * len(bars)
        for i in texts:  # each text its longest part, then its share of what is left
            widths[i] = least[i]
        left -= sum(least.values())
        while left < 0 and any(widths[i] > 4 for i in texts):  # too narrow: texts fold
            widest = max(texts, key=lambda i: widths[i])
            widths[widest] -= 1
            left += 1
        for n, i in enumerate(texts):
            give = max(min(longest[i] - widths[i], left // (len(texts) - n)), 0)
            widths[i] += give
            left -= give
        table = Table.grid(
            *(
                Column(width=w, no_wrap=not flex, overflow="fold")
                for w, flex in zip(widths, flexible, strict=True)
            ),
            padding=(0, 1),
            expand=False,
        )
        for i in texts:  # long texts broken where their parts join (/, __, spaces)
            rendered[i] = [broken(cell, widths[i]) for cell in rendered[i]]
        for r in range(len(tasks)):
            table.add_row(*(cells[r] for cells in rendered))
        return table


def _parts(text: str) -> list[str]:
    """A text's parts: it may be broken after '/' (not before a digit: 24/24), '__' or a
    space."""
    return re.split(r"(?<=/)(?!\d)|(?<=__)|(?<= )", text)


def _width(cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(str(cell))


def _part_width(cell) -> int:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((len(p.rstrip()) for p in _parts(text)), default=1)


def broken(cell, width: int):
    """A Text wider than `width` with new lines after '/', '__' and spaces, so that a run
    name wraps between its parts (local_steps=20 / name=scaffold), not inside a word."""
    if not isinstance(cell, Text) or cell.cell_len <= width or "\n" in cell.plain:
        return cell
    lines = [""]
    for part in _parts(cell.plain):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return Text("\n".join(line.rstrip() for line in lines), style=cell.style)


def many_runs_progress(console, quiet: bool) -> Progress:
    """Description, bar, done/total, status, elapsed and remaining time (rich's estimate
    from the recent speed; over all rounds it assumes every run goes to its rounds cap, so
    runs that stop at their target finish sooner)."""
    return FittedProgress(
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
