"""The `fedjoule` command line: a thin typer shell. Each command parses its flags, builds
the options of its function in fedjoule/commands/, calls it with its view (cli_views.py)
and prints the results; mistakes become one `error:` line and an exit code (`invoke`)."""

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer
import typer.core
from rich.text import Text

from fedjoule import __version__, arguments
from fedjoule.cli_options import (
    AddressOption,
    AllowModulesOption,
    AllowPathOption,
    BackendOption,
    BandwidthOption,
    BarsQuietOption,
    CellsOption,
    CiOption,
    DataDirOption,
    EngineOption,
    ExecutorOption,
    KOption,
    ManyDeviceOption,
    MaxRoundsOption,
    NoTrainOption,
    ParetoAccuracy,
    ParetoToTarget,
    PerCellOption,
    PlanOutOption,
    PlanScenarioArgument,
    PlotFormatOption,
    PlotStyleOption,
    QuietOption,
    ResumeOption,
    RunDeviceOption,
    RunOutOption,
    ScenarioArgument,
    SeedsOption,
    SetOption,
    SnrOption,
    StateMemoryOption,
    ThreadsOption,
    ThreadsPerRunOption,
    TrackOption,
    WorkersOption,
    output_folder,
)
from fedjoule.cli_views import (
    CapacityBar,
    RunBar,
    RunsBars,
    SweepBars,
    SystemBar,
    bold,
    console,
    error,
    errors,
    kstar_table,
    print_notes,
    print_run,
    print_sweep,
    print_tracked,
)
from fedjoule.commands.capacity import CapacityOptions
from fedjoule.commands.capacity import capacity as plan_capacity
from fedjoule.commands.common import (
    CLI_WORDS,
    EXECUTORS,
    check_resume,
    check_tracking,
    scenario_label,
)
from fedjoule.commands.plan import plan as run_plan
from fedjoule.commands.report import report as compare_runs
from fedjoule.commands.run import RunOptions, run_system_only
from fedjoule.commands.run import run as train
from fedjoule.commands.sweep import sweep as run_sweep
from fedjoule.commands.validate import ValidateOptions
from fedjoule.commands.validate import validate as validate_scenario
from fedjoule.errors import FedjouleError
from fedjoule.folders import stamped_folder
from fedjoule.planning.options import (
    Objective,
    PlanOptions,
    SweepOptions,
    parse_cells,
    parse_numbers,
)
from fedjoule.plugins import grant, revoke
from fedjoule.report.plot_settings import set_plot_formats, set_plot_style
from fedjoule.report.summary_tables import aggregate_table, summary_table
from fedjoule.scenarios import reader
from fedjoule.storage import write_text_atomically

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fedjoule: energy-aware wireless federated-learning simulator.",
)


def grant_plugins(modules: list[str] | None, paths: list[Path] | None, run_code: bool) -> None:
    """What --allow-module-plugins, --allow-plugin-path (and validate's --import-plugins)
    allow, for the rest of the command (fedjoule/plugins.py); each command that reads a
    scenario sets it anew, and `invoke` undoes it after the command."""
    names = [n.strip() for text in modules or [] for n in text.split(",") if n.strip()]
    grant(names, paths or [], run_code)


def internal_error(exc: Exception) -> int:
    """A bug, not a mistake of the user's: one message, the traceback saved to a file
    (printed instead with FEDJOULE_DEBUG=1); exit code 1."""
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


def use_plots(formats: str, style: str | None) -> None:
    """--plot-format and --plot-style: every plot of this command (and of the runs it
    starts) in these formats and that style."""
    try:
        set_plot_formats(formats)
    except FedjouleError as exc:
        raise FedjouleError(f"--plot-format {formats!r}: {exc}") from None
    set_plot_style(arguments.plot_style("--plot-style", style))


def listings() -> ModuleType:
    """fedjoule/listings.py: the scenarios, profiles and traces the catalogue commands show."""
    # deferred: the scenario schema and the device models (`fedjoule --help` needs neither)
    from fedjoule import listings

    return listings


def options_listing() -> ModuleType:
    """fedjoule/options_listing.py: the algorithms' options and the scenario reference."""
    # deferred: torch (the algorithm classes) and the scenario schema
    from fedjoule import options_listing

    return options_listing


def ci_method(text: str) -> str:
    """--ci: t or bootstrap, checked as the API's `ci` is (fedjoule/arguments.py)."""
    return arguments.ci("--ci", text)


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
    use_plots(plot_format, plot_style)
    ci_method(ci)
    backends = arguments.tracking("--track", track)
    check_tracking(bool(backends), resume, no_train, CLI_WORDS)
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
    # everything is checked before anything is created
    if executor not in EXECUTORS:
        raise FedjouleError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    check_resume(resume, bool(set_), out, CLI_WORDS)
    loaded = None if resume else reader().load_scenario(scenario, set_ or [])
    options = RunOptions(data_dir, device, executor, resume, threads, state_memory_mb)
    print_run(*train(loaded, out, options, RunBar(quiet, resume)))


def run_no_train(scenario: str, out, set_: list[str], engine: str, resume: bool, quiet: bool):
    """`fedjoule run --no-train`: the system-only engine (fedjoule/simulator/system_run.py)."""
    if resume:
        raise FedjouleError("--resume: a --no-train run keeps no checkpoint; run it again")
    loaded = reader().load_scenario(scenario, set_)
    print_run(*run_system_only(loaded, out, engine, SystemBar(quiet)))


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
    use_plots(plot_format, plot_style)
    ci_method(ci)
    set_ = [*(set_ or []), *arguments.tracking_override(arguments.tracking("--track", track))]
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
    use_plots(plot_format, plot_style)
    ci_method(ci)
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
    options = CapacityOptions(
        search, deadline_s, energy_budget_j, rounds, quantile, over, arguments.seeds_text(seeds)
    )
    loaded = reader().load_scenario(scenario, set_ or [])
    done = plan_capacity(loaded, out, options, CapacityBar(quiet))
    console.print(Text.assemble("results in ", bold(done.folder)), soft_wrap=True)


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
    use_plots(plot_format, plot_style)
    set_ = [*(set_ or []), *arguments.tracking_override(arguments.tracking("--track", track))]
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


@app.command()
def scenarios() -> None:
    """List the built-in scenarios."""
    listings().print_scenarios(console)


@app.command()
def profiles(
    name: Annotated[
        str | None, typer.Argument(help="One profile: every field, its value and source.")
    ] = None,
    import_file: Annotated[
        str | None,
        typer.Option(
            "--import",
            help="Read an Android power_profile.xml and print its CPU tables as a device "
            "class's dvfs field (YAML), with battery_j from battery.capacity.",
        ),
    ] = None,
    voltage_v: Annotated[
        float | None,
        typer.Option(
            help="With --import: the voltage turning its currents into power (V; default: "
            "the file's controller voltage, when it gives one)."
        ),
    ] = None,
) -> None:
    """List the device profiles a device class can name (`profile: NAME`): measured device
    classes, each value with its source. Exit code 2 for an unknown name or a file
    --import refuses."""
    if import_file is not None or voltage_v is not None:
        sys.stdout.write(listings().import_command(name, import_file, voltage_v))
        return
    listings().print_profiles(console, name)


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
    if not options_listing().print_algorithms(console, name):
        raise typer.Exit(1)


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
    options = ValidateOptions(file, set_ or [], import_plugins, no_train, data_dir)
    checked = validate_scenario(options)
    print_notes(checked.warnings)
    if show:  # stdout holds only the YAML, unwrapped
        sys.stdout.write(reader().scenario_yaml(checked.scenario))
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
    if not out.strip():
        raise FedjouleError("--out: give the JSON file to write")
    target = Path(out)
    if not target.absolute().parent.is_dir():  # checked before the trace is read
        raise FedjouleError(f"--out {out}: no folder {target.parent} to write it in; make it")
    if not os.access(target.absolute().parent, os.W_OK | os.X_OK):
        raise FedjouleError(f"--out {out}: the folder {target.parent} is not writable")
    if target.exists() and not target.is_file():  # a folder, a device: never replaced
        raise FedjouleError(f"--out {out}: not a regular file; give the JSON file to write")
    text, kind, clients = listings().to_json_text(file)
    try:
        write_text_atomically(target, text)
    except OSError as exc:
        raise FedjouleError(f"--out {out}: cannot be written ({exc.strerror or exc})") from None
    console.print(f"{file}: {kind} trace of {clients} clients -> {out}", soft_wrap=True)


@app.command()
def reference() -> None:
    """Print the scenario reference (every field, its default and meaning) as Markdown."""
    sys.stdout.write(options_listing().reference_markdown())


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
    modules = [typer, getattr(getattr(typer.core, "_click", None), "exceptions", None)]
    modules.append(sys.modules.get("click.exceptions"))  # (only a loaded click raises)
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
