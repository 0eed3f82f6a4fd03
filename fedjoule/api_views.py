"""What the API shows while its commands work (its views of fedjoule/commands/): rich's
live progress in a notebook or on a terminal, lines on stderr, or nothing; and the plots'
style for the length of a call."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rich
from rich.console import Console
from rich.text import Text

from fedjoule.commands.capacity import CapacityView
from fedjoule.commands.common import resume_message
from fedjoule.commands.many import RunsView
from fedjoule.commands.run import RunView
from fedjoule.commands.sweep import plan_line as sweep_plan_line
from fedjoule.report.plot_settings import plot_style
from fedjoule.results import round_row
from fedjoule.run_progress import RunsProgress, many_runs_progress

if TYPE_CHECKING:
    from fedjoule.scenarios.schema import Scenario


def styled(style: str | None):
    """The plots of an API call in `style` (None: as they are), the setting undone after."""
    return nullcontext() if style is None else plot_style(style)


class Display:
    """What run, sweep, plan and capacity show while they work. quiet=None (the default):
    rich's live progress in a Jupyter notebook (rich's console `is_jupyter`; live bars there
    need ipywidgets, `fedjoule[jupyter]`) and on stderr when it is a terminal, nothing when
    stderr goes to a file or a pipe; quiet=False: the same, or lines on stderr; quiet=True:
    nothing. `console`: rich's console (default rich.get_console() in a notebook, else a
    console on stderr)."""

    def __init__(self, quiet: bool | None, console=None):
        if console is None:
            console = rich.get_console()
            console = console if console.is_jupyter else Console(stderr=True)
        self.console = console
        live = self.console.is_jupyter or self.console.is_terminal
        self.shown = live if quiet is None else not quiet
        self.live = self.shown and live
        self.progress = many_runs_progress(self.console, quiet=not self.live)
        self.task = None

    def say(self, text: str) -> None:
        if self.live:
            self.progress.console.print(Text(text), soft_wrap=True)
        elif self.shown:
            print(text, file=sys.stderr, flush=True)

    def start_run(self, name: str, total: int, first_round: int) -> None:
        """A run's bar over its rounds (a notebook), from `first_round` done."""
        if self.live:
            self.task = self.progress.add_task(name, total=total, completed=first_round, status="")

    def round_done(self, row: dict, total: int) -> None:
        status = f"sim {row['sim_time_end_s']:.1f} s  {row['cumulative_energy_j']:.3g} J"
        if row.get("accuracy") is not None:
            status += f"  acc {row['accuracy']:.3f}"
        if self.live and self.task is not None:
            self.progress.update(self.task, advance=1, status=status)
        elif self.shown:
            self.say(f"round {row['round'] + 1}/{total}: {status}")


class RunDisplay(RunView):
    """A run in a script or a notebook: what it runs and a bar (live), else a line per
    round; each round's row, read back, goes to the caller's `on_round`."""

    def __init__(self, display: Display, style: str | None, resume: bool, on_round):
        self.display, self.style, self.resume, self.callback = display, style, resume, on_round
        self.total, self.folder = 0, Path()

    @contextmanager
    def running(self, folder: Path) -> Iterator[None]:
        self.folder = folder
        with styled(self.style), self.display.progress:
            yield

    def warnings(self, warnings: list[str]) -> None:
        for warning in warnings:
            self.display.say(f"warning: {warning}")

    def on_start(self, world, first_round: int) -> None:
        scenario, say = world.scenario, self.display.say
        self.total = total = scenario.training.rounds
        say(
            f"{scenario.name}: {scenario.population.size} clients, {world.model.n_params:,} "
            f"parameters on {world.device}, from round {first_round + 1} of {total}"
        )
        if self.resume:
            say(resume_message(self.folder, first_round, total))
        self.display.start_run(scenario.name, total, first_round)

    def on_round(self, row: dict) -> bool | None:
        self.display.round_done(row, self.total)
        return None if self.callback is None else self.callback(round_row(row))


class RunsDisplay(RunsView):
    """A plan's runs in a script or a notebook: a bar per run and one over all rounds
    (live), else lines."""

    def __init__(self, display: Display, style: str | None, label: str = "learning rounds"):
        self.style, self.say = style, display.say
        self.watch = RunsProgress(display.progress, label=label)
        self.folder = Path()

    @contextmanager
    def running(self, folder: Path) -> Iterator[None]:
        self.folder = folder
        with styled(self.style), self.watch:
            yield

    def on_plan(self, points, states, folders, restart: list[str]) -> None:
        for line in restart:  # (a restarted plan's runs)
            self.say(line)
        self.watch.on_plan(points, states, folders)

    def on_run(self, name: str, status: str) -> None:
        self.watch.on_run(name, status)


class SweepDisplay(RunsDisplay):
    """A sweep's runs: what it is about to do, then a line per finished run besides."""

    def __init__(self, display: Display, style: str | None, backend: str):
        super().__init__(display, style, "rounds")
        self.backend = backend

    def on_plan(self, points, states, folders, restart: list[str]) -> None:
        self.say(f"sweep {sweep_plan_line(points, states, self.backend, self.folder)}")
        super().on_plan(points, states, folders, restart)

    def on_run(self, name: str, status: str) -> None:
        self.say(f"{name}: {status}")
        super().on_run(name, status)


class CapacityDisplay(CapacityView):
    """capacity in a script or a notebook: what it does, then the figures' table."""

    def __init__(self, display: Display):
        self.display = display

    @contextmanager
    def planning(self, scenario: Scenario, options: Any) -> Iterator[None]:
        search = options.search
        self.display.say(
            f"capacity: {scenario.name}, search {search}, simulating the system only ..."
        )
        yield None

    def figures(self, scenario: Scenario, figures: dict) -> None:
        if not self.display.shown:
            return
        # deferred: scipy (seeds.py; `import fedjoule.api` loads none)
        from fedjoule.planning.capacity_report import print_capacity, selection_notice

        console = self.display.console if self.display.console.is_jupyter else None
        console = console or Console(stderr=True, markup=False, emoji=False)
        # the SimPy engine plays the candidates: why; --search none's own selection keys
        for notice in (figures["engine_notice"], selection_notice(scenario, figures)):
            if notice:
                console.print(f"notice: {notice}")
        print_capacity(console, scenario, figures)
