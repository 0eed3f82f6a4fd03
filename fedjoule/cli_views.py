"""What the command line shows: its two consoles (stdout and stderr), `error:` and
`warning:` lines, the message of a command stopped by Ctrl-C, each command's bars (its
view of fedjoule/commands/) and the tables of its results and listings."""

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from fedjoule.commands.capacity import CapacityOptions, CapacityView
from fedjoule.commands.common import resume_message
from fedjoule.commands.many import RunsView
from fedjoule.commands.run import RunView
from fedjoule.commands.sweep import plan_line as sweep_plan_line
from fedjoule.report.summary_tables import aggregate_table, summary_table
from fedjoule.report.table import energy_by_class
from fedjoule.report.terminal import FittedTable
from fedjoule.run_progress import RunsProgress, many_runs_progress
from fedjoule.tracking.session import where_tracked

# User text (scenario names, descriptions, paths, messages) is printed literally: no rich
# markup, no :emoji: codes, no highlighting; styles are given as Text and style= instead.
console = Console(markup=False, emoji=False, highlight=False)
errors = Console(stderr=True, markup=False, emoji=False, highlight=False)


def bold(text: object) -> Text:
    return Text(str(text), style="bold")


MESSAGE_LINES, MESSAGE_CHARS = 60, 8000  # the most of one error message printed


def error(message: str) -> None:
    """`error: message` on stderr, literally and unwrapped, capped in length."""
    lines = message.splitlines() or [""]
    if len(lines) > MESSAGE_LINES:
        more = len(lines) - MESSAGE_LINES + 1
        lines = [*lines[: MESSAGE_LINES - 1], f"... and {more} more lines"]
    text = "\n".join(lines)
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + f" ... ({len(text) - MESSAGE_CHARS} more characters)"
    errors.print(Text.assemble(("error:", "bold red"), " ", text), soft_wrap=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that a command unwinds as on Ctrl-C."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


@contextmanager
def stop_message(message: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C (exit 130) or SIGTERM (exit 143) inside: print `message()`, no traceback."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except KeyboardInterrupt as exc:
        errors.print(message(), soft_wrap=True)
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def plugin_label(section, spec_field: str) -> str:
    """A section's name, with the plug-in it names (`custom my_algo.py:MyAlgo`)."""
    spec = getattr(section, spec_field, None)
    return f"{section.name} {spec}" if spec else section.name


def print_notes(warnings: list[str]) -> None:
    """Warnings of a command's results (e.g. CIs from fewer than 3 seeds), in yellow."""
    for warning in warnings:
        errors.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)


def progress_bar(quiet: bool) -> Progress:
    """The bar of long commands: description, bar, done/total, a status field, time spent
    and time left."""
    return many_runs_progress(console, quiet)


def print_run(out_dir: Path, summary: dict) -> None:
    """A finished run: its summary, energy per participation, folder and tracking."""
    print_summary(summary)
    print_energy_per_participation(out_dir)
    console.print(Text.assemble("results in ", bold(out_dir)), soft_wrap=True)
    print_tracked(out_dir)


class RunBar(RunView):
    """A run on the terminal: what it runs, a bar over its rounds; Ctrl-C says how to go
    on."""

    def __init__(self, quiet: bool, resume: bool = False):
        self.progress = progress_bar(quiet)
        self.resume, self.task, self.folder = resume, None, Path()
        self.finished: int | None = None  # the last round whose results are on disk

    @contextmanager
    def running(self, folder: Path) -> Iterator[None]:
        self.folder = folder
        with stop_message(self.stopped), self.progress:
            yield

    def warnings(self, warnings: list[str]) -> None:
        print_notes(warnings)

    def on_start(self, world, first_round: int) -> None:
        scenario = world.scenario
        console.print(
            Text.assemble(
                bold(scenario.name),
                f": {scenario.population.size} clients, "
                f"{plugin_label(scenario.algorithm, 'class_')}, "
                f"model {plugin_label(scenario.model, 'factory')} "
                f"({world.model.n_params:,} parameters) on {world.device}",
            ),
            soft_wrap=True,
        )
        total = scenario.training.rounds
        if self.resume:
            console.print(resume_message(self.folder, first_round, total))
        self.task = self.progress.add_task(
            scenario.name, total=total, completed=first_round, status=""
        )
        self.finished = first_round - 1 if first_round else None

    def on_round(self, row: dict) -> None:
        self.finished = row["round"]
        status = f"sim {row['sim_time_end_s']:.1f} s  {row['cumulative_energy_j']:.3g} J"
        if row.get("accuracy") is not None:
            status += f"  acc {row['accuracy']:.3f}"
        self.progress.update(self.task, advance=1, status=status)

    def stopped(self) -> str:
        out = self.folder
        if not (out / "scenario.yaml").exists():
            return "interrupted before the run started; nothing was written"
        if self.finished is not None:
            when = f" after round {self.finished}"
        else:
            when = "" if self.resume else " before the first round finished"
        return f"interrupted{when}; continue with: fedjoule run --resume --out {out}"


class SystemBar(RunBar):
    """A --no-train run on the terminal: what it runs and on which engine, a bar."""

    def on_system_start(self, world, chosen: str, notices: list[str]) -> None:
        for notice in notices:
            errors.print(Text.assemble(("notice:", "yellow"), " ", notice), soft_wrap=True)
        scenario = world.scenario
        console.print(
            Text.assemble(
                bold(scenario.name),
                f": {scenario.population.size:,} clients, no training, {chosen} engine, "
                f"model {scenario.model.name} ({world.n_params:,} parameters)",
            ),
            soft_wrap=True,
        )
        total = scenario.training.rounds
        self.task = self.progress.add_task(scenario.name, total=total, status="")

    def on_round(self, row: dict) -> None:
        status = f"sim {row['sim_time_end_s']:.1f} s  {row['cumulative_energy_j']:.3g} J"
        self.progress.update(self.task, advance=1, status=status)

    def stopped(self) -> str:
        out = self.folder
        return f"interrupted; a --no-train run cannot be continued (rounds so far in {out})"


def print_energy_per_participation(out_dir: Path) -> None:
    """One line: each device class's energy per participation (clients.csv, the right
    panel of energy_by_class.png), e.g. `phone-lte-midrange 12.6 J`."""
    classes = energy_by_class(out_dir / "clients.csv")
    parts = [
        f"{name} {sum(c['energy'].values()) / c['selected']:.3g} J"
        for name, c in classes.items()
        if c["selected"]
    ]
    if parts:
        console.print("energy per participation: " + ", ".join(parts), soft_wrap=True)


def print_summary(summary: dict) -> None:
    """The summary table, then its `notes` (the energy model) and its `warnings` (failed
    rounds, dropped clients) in yellow."""
    table = Table(title="summary", show_header=False)
    for key, value in summary.items():
        if key not in ("notes", "warnings"):
            table.add_row(key, summary_value(key, value))
    console.print(table)
    for note in summary.get("notes") or []:
        errors.print(Text.assemble(("note:", "cyan"), " ", note), soft_wrap=True)
    for warning in summary.get("warnings") or []:
        errors.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)


def summary_value(key: str, value) -> str:
    """A summary value as printed: thousands separated, floats to 4 digits, and times in
    seconds (`..._s`) of a minute or more also in min, h or d ('25,000 (6.9 h)')."""
    if value is None:
        return "—"
    if isinstance(value, dict):  # e.g. the policy: select=random, bandwidth=equal, ...
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        text = f"{value:,}"
    else:
        text = f"{value:,.0f}" if 1000 <= abs(value) < 1e12 else f"{value:.4g}"
    if key.endswith("_s") and 60 <= value < float("inf"):
        for unit, seconds in (("d", 86400), ("h", 3600), ("min", 60)):
            if value >= (2 * seconds if unit == "d" else seconds):
                return f"{text} ({value / seconds:.1f} {unit})"
    return text


def print_sweep(result, objective, seeds: list[int] | None, ci: str) -> None:
    """A sweep's table (and its means over seeds), its warnings and where it is."""
    shown_keys, shown_rows = result.shown(result.rows)  # (`fedprox mu=0.1`)
    console.print(summary_table(shown_rows, shown_keys, sweep_title(objective), objective))
    if seeds:
        title = f"mean ± 95 % CI over seeds ({ci})"
        shown_keys, means = result.shown(result.aggregate)
        console.print(aggregate_table(means, shown_keys, title, objective))
    print_notes(result.warnings)
    files = "aggregate.csv/json, *_mean.png" if seeds else "pareto_*.png"
    console.print(
        Text.assemble("results in ", bold(result.out), f" (sweep.csv, sweep.json, {files})"),
        soft_wrap=True,
    )
    print_tracked(result.out)


class RunsBars(RunsView):
    """A plan's runs on the terminal: a bar per run in flight and one over all rounds;
    Ctrl-C says how to go on."""

    AGAIN = "resume its runs"

    def __init__(self, quiet: bool, label: str = "learning rounds"):
        self.watch = RunsProgress(many_runs_progress(console, quiet), label=label)
        self.on_run, self.on_replays, self.on_replay = (
            self.watch.on_run,
            self.watch.replays,
            self.watch.replayed,
        )
        self.folder = Path()

    @contextmanager
    def running(self, folder: Path) -> Iterator[None]:
        def stopped() -> str:
            return f"interrupted; run the same command with --out {folder} to {self.AGAIN}"

        self.folder = folder
        with stop_message(stopped), self.watch:
            yield

    def say(self, text: str) -> None:
        self.watch.progress.console.print(text, soft_wrap=True)

    def on_plan(self, points, states, folders, restart: list[str]) -> None:
        for line in restart:  # (a restarted plan's runs)
            self.say(line)
        self.watch.on_plan(points, states, folders)


class SweepBars(RunsBars):
    """A sweep's runs on the terminal: what it is about to do, then the bars."""

    AGAIN = "finish the sweep"

    def __init__(self, quiet: bool, backend: str):
        super().__init__(quiet, "rounds")
        self.on_replays = self.on_replay = None
        self.backend = backend

    def on_plan(self, points, states, folders, restart: list[str]) -> None:
        line = sweep_plan_line(points, states, self.backend, self.folder)
        self.watch.progress.console.print(Text.assemble(bold("sweep"), " ", line), soft_wrap=True)
        super().on_plan(points, states, folders, restart)


def print_tracked(out: Path) -> None:
    """Where a run, sweep or plan was tracked (--track), and how to open it."""
    for line in where_tracked(out):
        console.print(Text.assemble("tracked: ", line), soft_wrap=True)


def sweep_title(objective) -> str:
    """The sweep table's title: what its cost columns are (the front's quantities)."""
    if objective.to_target:
        return "sweep (energy and time to the target: the fronts' costs)"
    return "sweep"


class CapacityBar(CapacityView):
    """capacity on the terminal: a bar over the candidates, then the figures' table."""

    def __init__(self, quiet: bool):
        self.progress = progress_bar(quiet)

    @contextmanager
    def planning(self, scenario, options: CapacityOptions) -> Iterator[Callable]:
        with self.progress:
            task = self.progress.add_task("candidates", total=None, status="")

            def on_step(figures: dict) -> None:
                def g(key: str) -> str:
                    return "—" if figures[key] is None else f"{figures[key]:.4g}"

                status = (
                    f"seed {figures['seed']}, m={figures['clients_per_round']}, "
                    f"B={g('uplink_bandwidth_hz')} Hz: client {g('client_time_s')} s, "
                    f"round {g('round_time_s')} s, device {g('device_energy_j')} J"
                )
                self.progress.update(task, advance=1, status=status)

            yield on_step

    def figures(self, scenario, figures: dict) -> None:
        # deferred: scipy (seeds.py; `fedjoule --help` loads neither it nor numpy)
        from fedjoule.planning.capacity_report import print_capacity, selection_notice

        for notice in (figures["engine_notice"], selection_notice(scenario, figures)):
            if notice:
                errors.print(Text.assemble(("notice:", "yellow"), " ", notice))
        print_capacity(console, scenario, figures)


def kstar_table(method: str, best: list[dict], seeds: bool):
    """K* per cell as a table that never cuts a value; with seeds, means and their CI."""
    table = FittedTable(title=f"K* per cell ({method})", keys=2)
    columns = ["SNR (dB)", "bandwidth (Hz)", "K*", "R(K*)", "E_total (J)"]
    if seeds:
        columns[3:] = ["R(K*) mean", "E_total (J) mean ± 95 % CI", "indistinguishable K"]
    for column in columns:
        table.add_column(column)
    for b in best:
        found = b["K_star"] is not None
        energy = f"{b['E_total_j']:.4g}" if found else ""
        if found and b.get("E_total_j_ci95") is not None:  # (energy >= 0: a CI cut at 0 J)
            ci = b["E_total_j_ci95"]
            energy += f" ± {ci:.2g}" if ci <= b["E_total_j"] else f" [0, {b['E_total_j'] + ci:.3g}]"
        same = ", ".join(map(str, b.get("indistinguishable", [])))
        rounds = b.get("rounds_to_target", "")
        rounds = "—" if rounds is None else rounds  # (no None printed)
        cells = [
            f"{b['snr_db']:g}",
            f"{b['bandwidth_hz']:g}",
            str(b["K_star"]) if found else "no K reaches the target",
            (f"{rounds:.4g}" if isinstance(rounds, float) else str(rounds)) if found else "",
            energy,
        ]
        table.add_row(*cells, *([same] if seeds else []))
    return table
