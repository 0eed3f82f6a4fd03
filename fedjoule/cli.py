"""The `fedjoule` command line: thin; parses, calls the packages, prints."""

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from fedjoule import __version__, arguments
from fedjoule.commands.capacity import CapacityOptions, CapacityView
from fedjoule.commands.capacity import capacity as plan_capacity
from fedjoule.commands.common import EXECUTORS, resume_message, scenario_label
from fedjoule.commands.many import RunsView
from fedjoule.commands.plan import plan as run_plan
from fedjoule.commands.report import report as compare_runs
from fedjoule.commands.run import RunOptions, RunView, run_system_only
from fedjoule.commands.run import run as train
from fedjoule.commands.sweep import plan_line as sweep_plan_line
from fedjoule.commands.sweep import sweep as run_sweep
from fedjoule.commands.validate import ValidateOptions
from fedjoule.commands.validate import validate as validate_scenario
from fedjoule.errors import FedjouleError
from fedjoule.folders import stamped_folder
from fedjoule.run_progress import RunsProgress, many_runs_progress

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fedjoule: energy-aware wireless federated-learning simulator.",
)
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


def output_folder(text: str) -> Path:
    """An --out value: a path, never the empty string (which would mean the working
    folder unasked); the folder itself is checked by folders.check_out_folder."""
    if not text.strip():
        raise typer.BadParameter("an empty path; give the output folder's path")
    return Path(text)


def grant_plugins(modules: list[str] | None, paths: list[Path] | None, run_code: bool) -> None:
    """What --allow-module-plugins, --allow-plugin-path (and validate's --import-plugins)
    allow, for the rest of the command (fedjoule/plugins.py); each command that reads a
    scenario sets it anew, and `invoke` undoes it after the command."""
    from fedjoule.plugins import grant

    names = [n.strip() for text in modules or [] for n in text.split(",") if n.strip()]
    grant(names, paths or [], run_code)


def internal_error(exc: Exception) -> int:
    """A bug, not a mistake of the user's: one message, the traceback saved to a file
    (printed instead with FEDJOULE_DEBUG=1); exit code 1."""
    import os
    import tempfile
    import time
    import traceback

    if os.environ.get("FEDJOULE_DEBUG"):
        raise exc
    detail = "".join(traceback.format_exception(exc))
    try:  # a new private file (mode 0600, O_EXCL: never a planted name or link followed)
        fd, name = tempfile.mkstemp(prefix=f"fedjoule-error-{time.strftime('%Y%m%d-%H%M%S')}-")
        with os.fdopen(fd, "w") as f:
            f.write(f"fedjoule {__version__}\n{' '.join(sys.argv)}\n\n{detail}")
        where = f"the traceback is in {name}"
    except OSError:
        where = "run again with FEDJOULE_DEBUG=1 for the traceback"
    error(
        f"internal error (a bug in fedjoule, please report it): {type(exc).__name__}: "
        f"{str(exc)[:300]}; {where}"
    )
    return 1


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


def use_plot_formats(text: str) -> None:
    """--plot-format: every plot of this command (and of the runs it starts) in these."""
    from fedjoule.report.figures import set_plot_formats

    try:
        set_plot_formats(text)
    except FedjouleError as exc:
        raise FedjouleError(f"--plot-format {text!r}: {exc}") from None


def use_plot_style(style: str | None) -> None:
    """--plot-style: every plot of this command (and of the runs it starts) in it."""
    from fedjoule.arguments import plot_style
    from fedjoule.report.figures import set_plot_style

    set_plot_style(plot_style("--plot-style", style))


def ci_method(text: str) -> str:
    """--ci: t or bootstrap, checked as the API's `ci` is (fedjoule/arguments.py)."""
    from fedjoule.arguments import ci

    return ci("--ci", text)


def print_notes(warnings: list[str]) -> None:
    """Warnings of a command's results (e.g. CIs from fewer than 3 seeds), in yellow."""
    for warning in warnings:
        errors.print(Text.assemble(("warning:", "yellow"), " ", warning), soft_wrap=True)


def progress_bar(quiet: bool) -> Progress:
    """The bar of long commands: description, bar, done/total, a status field, time spent
    and time left."""
    return many_runs_progress(console, quiet)


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a scenario field: dotted.key=value (repeatable)."),
]
AllowModulesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-module-plugins",
        help="Let the scenario name module plug-ins (package.module:name) of this top-level "
        "package; comma-separated or repeated. Never the standard library.",
    ),
]
AllowPathOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--allow-plugin-path",
        help="Let the scenario name plug-in files inside this folder, besides its own "
        "folder (repeatable).",
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(help="Dataset folder (default $FEDJOULE_DATA_DIR, else a user cache)."),
]
# the options of commands that run many scenarios (sweep, plan): planning.sweep.SweepOptions
BackendOption = Annotated[
    str, typer.Option(help="Where runs execute: local (a process pool on this machine) or ray.")
]
AddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster address (--backend ray); default: start a local Ray."),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_WORKERS,
        help="Runs at once (default: local, cores // threads-per-run; ray, as many as the "
        "cluster's resources allow).",
    ),
]
ThreadsPerRunOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=arguments.MAX_THREADS,
        help="Torch threads (and Ray CPUs) per run. Results are bit-identical across "
        "backends and restarts for the same value.",
    ),
]
ManyDeviceOption = Annotated[
    str,
    typer.Option(
        help="auto (CUDA if present), cpu or cuda; with ray, each run asks for one GPU "
        "when cuda (auto: when the cluster has GPUs)."
    ),
]
PlotFormatOption = Annotated[
    str,
    typer.Option(
        "--plot-format",
        help="Plot formats, comma-separated: png (always written), pdf, svg; e.g. png,pdf "
        "writes every plot also as PDF beside its PNG.",
    ),
]
PlotStyleOption = Annotated[
    str | None,
    typer.Option(
        "--plot-style",
        help="paper: no titles, 3.5 in wide (one column of a two-column paper), 8 pt axis "
        "labels and 7 pt tick labels and legends; or a matplotlib style file FILE.mplstyle "
        "(its font sizes, and its figure width where it sets figure.figsize).",
    ),
]
CiOption = Annotated[
    str,
    typer.Option(
        "--ci",
        help="The 95 % CI over seeds: t (Student t, default) or bootstrap (percentile, "
        "2000 resamples, seeded); clipped to each figure's physical range (docs/seeds.md).",
    ),
]
TrackOption = Annotated[
    str | None,
    typer.Option(
        "--track",
        help="Experiment tracking, comma-separated: tensorboard, mlflow (a local file store), "
        "wandb (offline), csv, or a plug-in 'file.py:ClassName' (sets the scenario's "
        "tracking.backends; docs/tracking.md).",
    ),
]
SeedsOption = Annotated[
    str | None,
    typer.Option(
        help="Repeat over seeds: N (seeds 0..N-1) or a list 3,7,11. One run folder per seed "
        "and aggregate.csv/json with <field>_mean, _std and _ci95 (95 % Student-t CI over "
        "seeds) of every summary figure (docs/seeds.md).",
    ),
]


ScenarioArgument = Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")]
RunOutOption = Annotated[
    Path | None,
    typer.Option(parser=output_folder, help="Output folder (default runs/<name>-<time>)."),
]
RunDeviceOption = Annotated[str, typer.Option(help="auto (CUDA if present), cpu or cuda.")]
ExecutorOption = Annotated[
    str,
    typer.Option(
        help="vectorised (all clients at once; hand-batched for dense models), vmap "
        "(plain torch.func vmap, for comparison), compiled (vmap through "
        "torch.compile: slow to start, for GPUs) or sequential (the reference)."
    ),
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue the interrupted run in --out.")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_THREADS,
        help="CPU threads for torch (default: one when a local step of the round's "
        "clients is under 1e7 forward FLOPs, else all cores; waiting threads sleep "
        "after 300 spins, GOMP_SPINCOUNT). Results are bit-identical for the same count.",
    ),
]
StateMemoryOption = Annotated[
    float,
    typer.Option(
        min=0,
        max=arguments.MAX_MEMORY_MB,
        help="Client state (SCAFFOLD c_i, FedDyn g_i, ...) kept in memory; beyond it rows "
        "spill to client_state.bin in the run folder.",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
NoTrainOption = Annotated[
    bool,
    typer.Option(
        "--no-train",
        help="System only: availability, selection, channel, time and energy without "
        "data or training (numpy engine, millions of devices; docs/system-engine.md).",
    ),
]
EngineOption = Annotated[
    str,
    typer.Option(
        help="With --no-train: auto (numpy, or SimPy where numpy cannot), numpy, or simpy "
        "(the SimPy engine with training skipped)."
    ),
]


@app.command()
def run(
    scenario: ScenarioArgument = "default",
    out: RunOutOption = None,
    set_: SetOption = None,
    device: RunDeviceOption = "auto",
    data_dir: DataDirOption = None,
    executor: ExecutorOption = "vectorised",
    resume: ResumeOption = False,
    threads: ThreadsOption = None,
    state_memory_mb: StateMemoryOption = 2048,
    seeds: SeedsOption = None,
    track: TrackOption = None,
    plot_format: PlotFormatOption = "png",
    plot_style: PlotStyleOption = None,
    ci: CiOption = "t",
    quiet: QuietOption = False,
    no_train: NoTrainOption = False,
    engine: EngineOption = "auto",
    allow_module_plugins: AllowModulesOption = None,
    allow_plugin_path: AllowPathOption = None,
) -> None:
    """Run a scenario: rounds.csv, clients.csv, summary.json and plots in the output folder."""
    grant_plugins(allow_module_plugins, allow_plugin_path, True)
    use_plot_formats(plot_format)
    use_plot_style(plot_style)
    ci_method(ci)
    backends = arguments.tracking("--track", track)
    if backends and (resume or no_train):
        raise FedjouleError(
            "--track: a resumed run keeps the tracking it started with (its scenario.yaml), "
            "and a --no-train run is not tracked"
        )
    set_ = [*(set_ or []), *arguments.tracking_override(backends)] or None
    if seeds is not None:
        if no_train or resume or executor != "vectorised":
            raise FedjouleError(
                "--seeds runs the seeds as a sweep (one folder each, restartable by running "
                "the same command again); it cannot be combined with --no-train, --resume or "
                "--executor"
            )
        return sweep(
            scenario=scenario,
            grid=None,
            set_=set_,
            backend="local",
            address=None,
            workers=None,
            out=out or stamped_folder("runs", f"{scenario_label(scenario)}-seeds"),
            threads_per_run=threads or 1,
            device=device,
            data_dir=data_dir,
            pareto_accuracy="final_accuracy",
            pareto_to_target=False,
            seeds=seeds,
            plot_format=plot_format,
            plot_style=plot_style,
            ci=ci,
            quiet=quiet,
            track=None,  # (in set_)
        )
    if no_train:
        return run_no_train(scenario, out, set_ or [], engine, resume, quiet)
    from fedjoule.scenarios.loading import load_scenario

    # everything is checked before anything is created
    if executor not in EXECUTORS:
        raise FedjouleError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if resume and set_:
        raise FedjouleError("--resume continues a run as it was; --set cannot change it")
    if resume and out is None:
        raise FedjouleError("--resume needs the run folder to continue: --out DIR")
    loaded = None if resume else load_scenario(scenario, set_ or [])
    options = RunOptions(data_dir, device, executor, resume, threads, state_memory_mb)
    print_run(*train(loaded, out, options, RunBar(quiet, resume)))


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
    panel of energy_by_class.png), e.g. `phone-5g 12.5 J`."""
    from fedjoule.report.plots import energy_by_class

    classes = energy_by_class(out_dir / "clients.csv")
    parts = [
        f"{name} {sum(c['energy'].values()) / c['selected']:.3g} J"
        for name, c in classes.items()
        if c["selected"]
    ]
    if parts:
        console.print("energy per participation: " + ", ".join(parts), soft_wrap=True)


def run_no_train(scenario: str, out, set_: list[str], engine: str, resume: bool, quiet: bool):
    """`fedjoule run --no-train`: the system-only engine (fedjoule/simulator/system_run.py)."""
    from fedjoule.scenarios.loading import load_scenario

    if resume:
        raise FedjouleError("--resume: a --no-train run keeps no checkpoint; run it again")
    loaded = load_scenario(scenario, set_)
    print_run(*run_system_only(loaded, out, engine, SystemBar(quiet)))


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


ParetoAccuracy = Annotated[
    str,
    typer.Option(
        help="Accuracy of the Pareto fronts: final_accuracy, best_accuracy, "
        "worst_client_accuracy or client_accuracy_p10."
    ),
]
ParetoToTarget = Annotated[
    bool,
    typer.Option(
        "--pareto-to-target",
        help="Fronts over energy and time to the target (runs that never reach it are left "
        "out) instead of the totals.",
    ),
]


@app.command()
def sweep(
    scenario: Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")],
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            "-g",
            help="A scenario key and its values: dotted.key=v1,v2,... (repeatable; the sweep "
            "runs the cartesian product; optional with --seeds). Algorithms with settings: "
            "algorithm=fedavg,fedprox:mu=0.1,scaffold (each name[:key=value[:key=value]]); "
            "algorithm.mu=0.01,0.1 multiplies only the grid's algorithms that have mu.",
        ),
    ] = None,
    set_: SetOption = None,
    backend: BackendOption = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            parser=output_folder,
            help="Sweep folder (default sweeps/<name>-<time>); give it again to "
            "restart an interrupted sweep.",
        ),
    ] = None,
    threads_per_run: ThreadsPerRunOption = 1,
    device: ManyDeviceOption = "auto",
    data_dir: DataDirOption = None,
    pareto_accuracy: ParetoAccuracy = "final_accuracy",
    pareto_to_target: ParetoToTarget = False,
    seeds: SeedsOption = None,
    plot_format: PlotFormatOption = "png",
    plot_style: PlotStyleOption = None,
    ci: CiOption = "t",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    allow_module_plugins: AllowModulesOption = None,
    allow_plugin_path: AllowPathOption = None,
    track: TrackOption = None,
) -> None:
    """Run a scenario over a grid of values: one run folder per point, sweep.csv, sweep.json
    and Pareto plots. Finished runs are skipped and partial ones resumed on a restart.
    With --seeds, every point once per seed, and aggregate.csv/json, band plots and
    Pareto fronts over the means."""
    grant_plugins(allow_module_plugins, allow_plugin_path, True)
    if not grid and not seeds:  # checked before the imports: a usage mistake is quick
        raise FedjouleError(
            "Missing option '--grid' (or --seeds): e.g. --grid training.local_steps=1,5"
        )
    use_plot_formats(plot_format)
    use_plot_style(plot_style)
    ci_method(ci)
    set_ = [*(set_ or []), *arguments.tracking_override(arguments.tracking("--track", track))]

    from fedjoule.planning.pareto import Objective
    from fedjoule.planning.sweep import SweepOptions

    seed_list = arguments.seeds_text(seeds)

    options = SweepOptions(
        backend=backend,
        address=address,
        workers=workers,
        threads_per_run=threads_per_run,
        device=device,
        data_dir=str(data_dir) if data_dir else None,
        objective=Objective(pareto_accuracy, pareto_to_target),
    )
    view = SweepBars(quiet, backend)
    result = run_sweep(scenario, out, grid or [], set_ or [], options, seed_list, ci, view)
    print_sweep(result, options.objective, seed_list, ci)


def print_sweep(result, objective, seeds: list[int] | None, ci: str) -> None:
    """A sweep's table (and its means over seeds), its warnings and where it is."""
    from fedjoule.planning.grid import table_columns
    from fedjoule.report.compare import aggregate_table, summary_table

    keys = result.grid_keys if result.rows else []
    shown_keys, shown_rows = table_columns(keys, result.rows)  # (`fedprox mu=0.1`)
    console.print(summary_table(shown_rows, shown_keys, sweep_title(objective), objective))
    if seeds:
        title = f"mean ± 95 % CI over seeds ({ci})"
        shown_keys, means = table_columns(keys, result.aggregate)
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

    def on_plan(self, points, states, folders) -> None:
        from fedjoule.planning.sweep import state_lines

        for line in state_lines(points, states, folders):  # (a restarted plan's runs)
            self.say(line)
        self.watch.on_plan(points, states, folders)


class SweepBars(RunsBars):
    """A sweep's runs on the terminal: what it is about to do, then the bars."""

    AGAIN = "finish the sweep"

    def __init__(self, quiet: bool, backend: str):
        super().__init__(quiet, "rounds")
        self.on_replays = self.on_replay = None
        self.backend = backend

    def on_plan(self, points, states, folders) -> None:
        line = sweep_plan_line(points, states, self.backend, self.folder)
        self.watch.progress.console.print(Text.assemble(bold("sweep"), " ", line), soft_wrap=True)
        super().on_plan(points, states, folders)


def print_tracked(out: Path) -> None:
    """Where a run, sweep or plan was tracked (--track), and how to open it."""
    from fedjoule.tracking.session import where_tracked

    for line in where_tracked(out):
        console.print(Text.assemble("tracked: ", line), soft_wrap=True)


def sweep_title(objective) -> str:
    """The sweep table's title: what its cost columns are (the front's quantities)."""
    if objective.to_target:
        return "sweep (energy and time to the target: the fronts' costs)"
    return "sweep"


@app.command()
def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders (from run or sweep), or sweep folders for all their runs."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(parser=output_folder, help="Output folder (default reports/<time>)."),
    ] = None,
    pareto_accuracy: ParetoAccuracy = "final_accuracy",
    pareto_to_target: ParetoToTarget = False,
    plot_format: PlotFormatOption = "png",
    plot_style: PlotStyleOption = None,
    ci: CiOption = "t",
) -> None:
    """Compare runs: accuracy against round, simulated time and energy (one line per run),
    a table of their summaries (report.csv, with a sweep's grid values) and the Pareto
    fronts. Runs of one scenario that differ only in their seed are taken as repetitions:
    aggregate.csv/json (mean, std, 95 % CI), band plots and fronts over the means."""
    use_plot_formats(plot_format)
    use_plot_style(plot_style)
    ci_method(ci)
    from fedjoule.planning.pareto import Objective
    from fedjoule.report.compare import aggregate_table, summary_table

    objective = Objective(pareto_accuracy, pareto_to_target)
    result = compare_runs(run_dirs, out, objective, ci)
    console.print(summary_table(result.rows, title="runs", objective=objective))
    if result.aggregate:
        title = f"runs repeated over seeds: mean ± 95 % CI ({ci})"
        console.print(aggregate_table(result.aggregate, [], title, objective))
    print_notes(result.warnings)
    files = ", ".join(f.name for f in result.files)
    console.print(Text.assemble("report in ", bold(result.out), f": {files}"), soft_wrap=True)


@app.command()
def capacity(
    scenario: Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")],
    set_: SetOption = None,
    search: Annotated[
        str,
        typer.Option(
            help="clients_per_round: the largest m meeting the limits; uplink_bandwidth_hz: "
            "the smallest B (to 0.1 %); concurrency: the largest protocol.concurrency "
            "(protocol.kind async or buffered); none: only the scenario's own figures."
        ),
    ] = "clients_per_round",
    deadline_s: Annotated[
        float | None,
        typer.Option(min=0, help="Round time limit (s); default the scenario's round.deadline_s."),
    ] = None,
    energy_budget_j: Annotated[
        float | None, typer.Option(min=0, help="Per-device energy limit per round (J).")
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=arguments.MAX_ROUNDS,
            help="System-only rounds simulated per candidate (default: enough that 20 "
            "observations lie above the quantile: ceil(20 / (1 - q)) over rounds, 400 at "
            "q = 0.95; ceil(20 / ((1 - q) m)) over clients, at least 20).",
        ),
    ] = None,
    quantile: Annotated[
        float,
        typer.Option(
            help="Judge the time and the device energy at this quantile (1: the worst): "
            "the energy over client-rounds, the time as --over says."
        ),
    ] = 0.95,
    over: Annotated[
        str,
        typer.Option(
            help="clients: the time quantile is over the client-rounds that arrive (time "
            "from the round's start to the arrival: at most 1 - q of the uploads miss the "
            "deadline); rounds: over rounds (the round's duration, its last arrival)."
        ),
    ] = "clients",
    seeds: Annotated[
        str | None,
        typer.Option(
            help="Plan over seeds: N (seeds 0..N-1) or a list 3,7,11, each its own world; "
            "the answer per seed, its mean, std and 95 % CI, and per candidate the seed "
            "mean and ci95 of every figure in capacity.csv.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            parser=output_folder, help="Output folder (default runs/<name>-capacity-<time>)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    allow_module_plugins: AllowModulesOption = None,
    allow_plugin_path: AllowPathOption = None,
) -> None:
    """Capacity planning without training: rounds per hour, airtime per cell, energy per round
    and per device class, battery drain per day, and the largest clients_per_round (or the
    smallest uplink bandwidth) meeting a round deadline and a per-device energy budget.
    Every candidate sees the same world and random draws; the candidates are scanned and
    non-monotone feasibility is reported. Writes capacity.csv (every candidate) and
    capacity.json (docs/system-engine.md#capacity)."""
    grant_plugins(allow_module_plugins, allow_plugin_path, True)
    from fedjoule.scenarios.loading import load_scenario

    options = CapacityOptions(
        search, deadline_s, energy_budget_j, rounds, quantile, over, arguments.seeds_text(seeds)
    )
    loaded = load_scenario(scenario, set_ or [])
    done = plan_capacity(loaded, out, options, CapacityBar(quiet))
    console.print(Text.assemble("results in ", bold(done.folder)), soft_wrap=True)


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
        from fedjoule.planning.capacity_report import print_capacity

        if figures["engine_notice"]:
            errors.print(Text.assemble(("notice:", "yellow"), " ", figures["engine_notice"]))
        print_capacity(console, scenario, figures)


PlanScenarioArgument = Annotated[
    str, typer.Argument(help="A built-in scenario name or a YAML file (with a target).")
]
KOption = Annotated[str, typer.Option("--k", help="Local steps K to compare, comma-separated.")]
SnrOption = Annotated[
    str, typer.Option(help="SNR grid (dB), set as channel.snr_db, comma-separated.")
]
BandwidthOption = Annotated[
    str,
    typer.Option(help="Uplink bandwidth grid (Hz), channel.uplink_bandwidth_hz, comma-separated."),
]
MaxRoundsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_ROUNDS,
        help="Rounds cap of every learning run (default the scenario's training.rounds); "
        "a K that has not reached the target by then is reported as not reached.",
    ),
]
CellsOption = Annotated[
    str | None,
    typer.Option(help="Cells drawn in energy_vs_k.png: SNR:BW,... (default: the grid's corners)."),
]
PerCellOption = Annotated[
    bool,
    typer.Option(
        "--per-cell",
        help="Run every (K, cell) as its own learning run even where one run per K "
        "could price the grid (a check of the repricing; slower).",
    ),
]
PlanOutOption = Annotated[
    Path | None,
    typer.Option(
        parser=output_folder,
        help="Plan folder (default plans/<name>-<time>); give it again to resume the "
        "learning runs of an interrupted plan.",
    ),
]
BarsQuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


@app.command()
def plan(
    scenario: PlanScenarioArgument,
    k: KOption = "1,2,5,10,20,50",
    snr_db: SnrOption = "0,10,20,30",
    bandwidth_hz: BandwidthOption = "1e5,1e6,1e7",
    set_: SetOption = None,
    max_rounds: MaxRoundsOption = None,
    cells: CellsOption = None,
    per_cell: PerCellOption = False,
    out: PlanOutOption = None,
    backend: BackendOption = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    threads_per_run: ThreadsPerRunOption = 1,
    device: ManyDeviceOption = "auto",
    data_dir: DataDirOption = None,
    seeds: SeedsOption = None,
    plot_format: PlotFormatOption = "png",
    plot_style: PlotStyleOption = None,
    quiet: BarsQuietOption = False,
    allow_module_plugins: AllowModulesOption = None,
    allow_plugin_path: AllowPathOption = None,
    track: TrackOption = None,
) -> None:
    """The energy-optimal number of local steps K* over a grid of SNR and uplink bandwidth:
    R(K) rounds to the scenario's target, E_total(K) energy to it, K* = argmin per cell.
    One learning run per K prices the whole grid when the channel cannot change who takes
    part; otherwise every (K, cell) runs. Writes plan.csv, plan.json, kstar_heatmap.png,
    energy_vs_k.png and, where repricing is valid, kstar_breakeven.png (K* against x, the
    communication energy per round over the energy per local step). With --seeds, every
    learning run once per seed: R(K) and E_total as mean ± 95 % CI, K* on the means and
    the K indistinguishable from it (plan.csv, plan.json), plan_seeds.csv per seed."""
    grant_plugins(allow_module_plugins, allow_plugin_path, True)
    use_plot_formats(plot_format)
    use_plot_style(plot_style)
    set_ = [*(set_ or []), *arguments.tracking_override(arguments.tracking("--track", track))]

    from fedjoule.planning.plan import PlanOptions, parse_cells, parse_numbers
    from fedjoule.planning.sweep import SweepOptions

    snrs = parse_numbers("--snr-db", snr_db, float)
    bandwidths = parse_numbers("--bandwidth-hz", bandwidth_hz, float, minimum=1e-300)
    options = PlanOptions(
        k_values=parse_numbers("--k", k, int, minimum=1),
        snr_db=snrs,
        bandwidth_hz=bandwidths,
        max_rounds=max_rounds,
        plot_cells=parse_cells(cells, snrs, bandwidths) if cells else None,
        per_cell=per_cell,
        seeds=arguments.seeds_text(seeds),
        sweep=SweepOptions(
            backend=backend,
            address=address,
            workers=workers,
            threads_per_run=threads_per_run,
            device=device,
            data_dir=str(data_dir) if data_dir else None,
        ),
    )
    result = run_plan(scenario, out, set_ or [], options, RunsBars(quiet))
    console.print(kstar_table(result.method, result.best, bool(options.seeds)))
    console.print(f"method: {result.method}: {result.reason}", soft_wrap=True)
    console.print(
        Text.assemble(
            "results in ",
            bold(result.out),
            " (plan.csv, plan.json, kstar_heatmap.png, energy_vs_k.png"
            + (f", {result.breakeven['figure']})" if "figure" in result.breakeven else ")"),
        ),
        soft_wrap=True,
    )
    print_tracked(result.out)


def kstar_table(method: str, best: list[dict], seeds: bool):
    """K* per cell as a table that never cuts a value; with seeds, means and their CI."""
    from fedjoule.report.terminal import FittedTable

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


@app.command()
def scenarios() -> None:
    """List the built-in scenarios."""
    from fedjoule.scenarios.loading import builtin_names, load_scenario

    table = Table(show_header=True)
    table.add_column("name")
    table.add_column("description")
    for name in builtin_names():
        table.add_row(name, load_scenario(name).description)
    console.print(table)


@app.command()
def profiles(
    name: Annotated[
        str | None, typer.Argument(help="One profile: every field, its value and source.")
    ] = None,
) -> None:
    """List the device profiles a device class can name (`profile: NAME`): measured device
    classes, each value with its source. Exit code 2 for an unknown name."""
    from fedjoule.devices.library import load_profile, profile_names, unknown_profile_message
    from fedjoule.scenarios.schema import DeviceClass

    if name is None:
        table = Table(show_header=True)
        for column in ("name", "description", "compute", "radio"):
            table.add_column(column, overflow="fold")
        for entry in profile_names():
            profile = load_profile(entry)
            resolved = DeviceClass.model_validate({"profile": entry})
            table.add_row(entry, profile.description, resolved.compute, resolved.radio.model)
        console.print(table)
        return
    if name not in profile_names():
        raise FedjouleError(unknown_profile_message(name))
    profile = load_profile(name)
    console.print(Text.assemble(bold(name), f"  {profile.description}"), soft_wrap=True)
    table = Table(show_header=True, box=None, padding=(0, 1, 0, 2))
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    resolved = DeviceClass.model_validate({"profile": name})
    for field, value, source in profile_rows(profile, resolved):
        shown = f"{value:.10g}" if isinstance(value, float) else f"{value}"
        table.add_row(Text(field), Text(shown), Text(source))
    console.print(table)


# The DeviceClass fields each compute kind uses (fedjoule/devices/population.py)
COMPUTE_FIELDS = {
    "cpu": ("cpu_freq_min_hz", "cpu_freq_max_hz", "kappa", "flops_per_cycle"),
    "accelerator": ("peak_flops", "efficiency", "active_power_w", "compute_spread_sigma"),
    "efficiency": ("flops_per_s", "flops_per_joule", "compute_spread_sigma"),
    "measured": (
        "reference_seconds_per_sample",
        "reference_flops_per_sample",
        "measured_power_w",
        "compute_spread_sigma",
    ),
}


def profile_rows(profile, resolved) -> list[tuple[str, object, str]]:
    """(field, value, source) of every value a run on the profile uses, after defaults:
    the compute kind's fields, the radio's resolved parameters (fedjoule/devices/radio.py),
    the battery's; a source is the profile's, else the default's."""
    from fedjoule.devices import radio

    model = resolved.radio.model
    every = set().union(*COMPUTE_FIELDS.values())
    skipped = {"profile", "share", "radio"} | (every - set(COMPUTE_FIELDS[resolved.compute]))
    if model in radio.MEASURED:
        skipped.add("rx_power_w")  # (receiving draws base_power_w)
    rows = []
    for field, info in type(resolved).model_fields.items():
        if field in skipped:
            continue
        source = profile.sources.get(field) or (
            "the name of the profile" if field == "name" else f"default: {info.description}"
        )
        rows.append((field, getattr(resolved, field), source))
    rows.append(("radio.model", model, profile.sources.get("radio.model", "default")))
    params = radio.resolve(resolved.radio, 0.0, 0.0)
    for field in radio.PARAMETERS:
        given = getattr(resolved.radio, field) is not None
        if field in radio.parameters_used(model) or given:
            source = profile.sources.get(f"radio.{field}") if given else None
            source = source or radio.default_source(model, field)
            rows.append((f"radio.{field}", getattr(params, field), source))
    return rows


CUSTOM_USAGE = (
    'algorithm: {name: custom, class: "file.py:ClassName", options: {...}}',
    "class: a Python file (looked for next to the scenario file, then in the working "
    "folder) or an importable module, 'package.module:ClassName'; the class subclasses "
    "fedjoule.algorithms.base.Algorithm and its config_class (an AlgorithmConfig) checks "
    "options.",
    "scenario.yaml records the file's path and SHA-256; --resume refuses a file that "
    "changed since.",
    "fedjoule algorithms file.py:ClassName shows its options.",
)


@app.command()
def algorithms(
    name: Annotated[
        str | None,
        typer.Argument(
            help="One algorithm: a name, custom, or a plug-in class file.py:ClassName "
            "(default: all)."
        ),
    ] = None,
) -> None:
    """List the algorithms a scenario can name (built in, installed by packages through the
    entry-point group fedjoule.algorithms, or custom) with their options. Exit code 1 when
    the one asked for is an installed algorithm that fails to load."""
    from fedjoule.algorithms.registry import CUSTOM, names
    from fedjoule.plugins import REGISTRY, PluginError

    entries = REGISTRY.entries("algorithm")
    if name is None:
        for entry in entries.values():
            print_algorithm(entry.name, entry.origin, *algorithm_of(entry))
        print_custom()
        return
    if name == CUSTOM:
        print_custom()
    elif name in entries:
        entry = entries[name]
        cls, problem = algorithm_of(entry)
        print_algorithm(name, entry.origin, cls, problem)
        if problem:
            raise typer.Exit(1)
    elif ":" in name:  # a plug-in class, as `class:` of a custom algorithm names it
        from fedjoule.algorithms.registry import check_algorithm_class
        from fedjoule.plugins import load_spec

        try:
            cls, source = load_spec(name)
            check_algorithm_class(cls, name)
        except PluginError as exc:
            raise FedjouleError(str(exc)) from None
        where = source.get("file") or source.get("module")
        sha = f", SHA-256 {source['sha256'][:12]}..." if source.get("sha256") else ""
        print_algorithm(name, f"custom class from {where}{sha}", cls, None)
    else:
        raise FedjouleError(
            f"unknown algorithm {name!r}; available: {', '.join(names())} "
            "(or a plug-in class file.py:ClassName)"
        )


def algorithm_of(entry) -> tuple[type | None, str | None]:
    """An entry's algorithm class, or None and why it cannot be used (an installed
    package that fails to import or names no Algorithm)."""
    from fedjoule.algorithms.registry import check_algorithm_class
    from fedjoule.plugins import entry_target

    try:
        cls, _ = entry_target(entry)
        return check_algorithm_class(cls, f"{entry.name} ({entry.origin})"), None
    except Exception as exc:  # a broken package is shown as such, not as a traceback
        return None, str(exc) or type(exc).__name__


def option_rows(config) -> list[tuple[str, str, str, str, str]]:
    """(option, type, allowed, default, meaning) of each field of an options model."""
    from fedjoule.scenarios.reference import _allowed, _default, _type_name

    def plain(text: str) -> str:  # the reference's Markdown as terminal text
        return text.replace(" \\| ", " | ").replace("`", "")

    return [
        (
            info.alias or key,  # as a scenario writes it
            plain(_type_name(info.annotation)),
            plain(_allowed(info.annotation, info.metadata)),
            plain(_default(info)),
            info.description or "",
        )
        for key, info in config.model_fields.items()
        if key != "name"
    ]


def print_algorithm(name: str, origin: str, cls, problem: str | None) -> None:
    console.print(Text.assemble(bold(name), f"  ({origin})"), soft_wrap=True)
    if problem is not None:
        console.print(Text.assemble("  ", ("broken:", "bold red"), " ", problem), soft_wrap=True)
        console.print()
        return
    summary = (cls.__doc__ or "").strip().splitlines()
    if summary:
        console.print(f"  {summary[0]}", soft_wrap=True)
    rows = option_rows(cls.config_class)
    if not rows:
        console.print("  no options")
    else:
        table = Table(show_header=True, box=None, padding=(0, 1, 0, 2))
        for column in ("option", "type", "allowed", "default", "meaning"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    console.print()


def print_custom() -> None:
    console.print(
        Text.assemble(bold("custom"), "  (a plug-in class from a Python file or module)"),
        soft_wrap=True,
    )
    for line in CUSTOM_USAGE:
        console.print(f"  {line}", soft_wrap=True)


@app.command()
def validate(
    file: Annotated[str, typer.Argument(help="A scenario YAML file or built-in name.")],
    set_: SetOption = None,
    show: Annotated[bool, typer.Option("--show", help="Print the resolved scenario.")] = False,
    allow_module_plugins: AllowModulesOption = None,
    allow_plugin_path: AllowPathOption = None,
    import_plugins: Annotated[
        bool,
        typer.Option(
            "--import-plugins",
            help="Import the scenario's plug-ins to check them (default: their specs only).",
        ),
    ] = False,
    no_train: Annotated[
        bool,
        typer.Option("--no-train", help="Check as `run --no-train` does (no data, no model)."),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Check a scenario file as `run` does before it makes its folder (the data, the model,
    trace files, the network), short of training; print what is wrong, or with --show the
    resolved scenario as YAML on stdout (`fedjoule validate my.yaml --show > resolved.yaml`)."""
    grant_plugins(allow_module_plugins, allow_plugin_path, import_plugins)
    from fedjoule.scenarios.loading import scenario_yaml

    options = ValidateOptions(file, set_ or [], import_plugins, no_train, data_dir)
    checked = validate_scenario(options)
    print_notes(checked.warnings)
    if show:  # stdout holds only the YAML, unwrapped
        sys.stdout.write(scenario_yaml(checked.scenario))
        sys.stdout.flush()
    note = " (plug-ins checked by name, not imported: --import-plugins checks them)"
    (errors if show else console).print(f"{file}: valid{note * checked.unchecked}", soft_wrap=True)


traces_app = typer.Typer(
    no_args_is_help=True,
    help="Device traces in FedScale's formats (docs/models.md#fedscale-traces).",
)
app.add_typer(traces_app, name="traces")


@traces_app.command("convert")
def traces_convert(
    file: Annotated[str, typer.Argument(help="A FedScale capacity or behaviour trace.")],
    out: Annotated[str, typer.Option("--out", help="The JSON file to write.")],
) -> None:
    """Write a FedScale trace (pickle, read without running code; JSON; CSV) as JSON,
    checked entry by entry. Exit code 2, naming the file and the global, for a pickle that
    names anything but dicts, lists, numbers and strings."""
    import os

    from fedjoule.devices.fedscale import to_json_text
    from fedjoule.storage import write_text_atomically

    if not out.strip():
        raise FedjouleError("--out: give the JSON file to write")
    target = Path(out)
    if not target.absolute().parent.is_dir():  # checked before the trace is read
        raise FedjouleError(f"--out {out}: no folder {target.parent} to write it in; make it")
    if not os.access(target.absolute().parent, os.W_OK | os.X_OK):
        raise FedjouleError(f"--out {out}: the folder {target.parent} is not writable")
    if target.exists() and not target.is_file():  # a folder, a device: never replaced
        raise FedjouleError(f"--out {out}: not a regular file; give the JSON file to write")
    text, kind, clients = to_json_text(file)
    try:
        write_text_atomically(target, text)
    except OSError as exc:
        raise FedjouleError(f"--out {out}: cannot be written ({exc.strerror or exc})") from None
    console.print(f"{file}: {kind} trace of {clients} clients -> {out}", soft_wrap=True)


@app.command()
def reference() -> None:
    """Print the scenario reference (every field, its default and meaning) as Markdown."""
    from fedjoule.scenarios.reference import reference_markdown

    sys.stdout.write(reference_markdown())


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


def _print_version(given: bool) -> None:
    if given:
        console.print(__version__)
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    """fedjoule: energy-aware wireless federated-learning simulator."""


def main() -> None:
    """The `fedjoule` program. Exit codes (docs/command-line.md): 0 done, 1 environment
    failure (disk full, ...) or internal error, 2 usage or input mistake, 3 the run
    diverged, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)."""
    sys.exit(invoke())


def invoke(args: list[str] | None = None) -> int:
    """Run the command line `args` (default: sys.argv[1:]) and return its exit code; a
    mistake prints one `error: ...` message on stderr, not a traceback."""
    from fedjoule.plugins import grant, revoke

    before = grant()  # the defaults; what the command's options allow is undone after it
    try:
        return _invoke(args)
    finally:
        revoke(before)


def _invoke(args: list[str] | None) -> int:
    try:
        code = app(args, standalone_mode=False)
    except click_classes("ClickException") as exc:  # usage: unknown option, bad value, ...
        return usage_error(exc)
    except click_classes("Abort") as exc:  # older click: Ctrl-C outside a command's run
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        error("interrupted" if interrupted else "aborted")
        return 130 if interrupted else 1
    except FedjouleError as exc:
        error(str(exc))
        return getattr(exc, "exit_code", 2)
    except OSError as exc:
        places = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
        error(": ".join([*places, exc.strerror or str(exc)]))
        return 1
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        error(
            "out of memory: the scenario needs more memory than this machine has; reduce the "
            "model (model.hidden, dataset.synthetic.dim x classes), population.size, "
            "training.clients_per_round or training.batch_size (files written so far are kept)"
        )
        return 1
    except Exception as exc:  # a bug: reported in one message, the traceback in a file
        return internal_error(exc)
    return code if isinstance(code, int) else 0  # typer returns the code of typer.Exit


def click_classes(name: str) -> tuple[type[BaseException], ...]:
    """The exception class `name` of the click that typer runs on (recent typer bundles its
    own, typer._click) and of click itself where installed: either may be raised."""
    import typer.core

    modules = [typer, getattr(getattr(typer.core, "_click", None), "exceptions", None)]
    try:
        import click.exceptions

        modules.append(click.exceptions)
    except ImportError:
        pass
    return tuple({getattr(m, name) for m in modules if hasattr(m, name)})


def usage_error(exc) -> int:
    """A click usage error as one line and a pointer to the help; its exit code (2)."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `fedjoule` alone: the help
        exc.show()
    else:
        error(exc.format_message())
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            errors.print(f"see: {ctx.command_path} --help", soft_wrap=True)
    return exc.exit_code


if __name__ == "__main__":
    main()
