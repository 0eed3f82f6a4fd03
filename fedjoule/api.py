"""The Python API of fedjoule: the commands `run`, `sweep`, `plan` and `capacity` as functions
returning their results as Python values (docs/api.md).

    import fedjoule

    scenario = fedjoule.load_scenario("default", {"training.rounds": 20})
    result = fedjoule.run(scenario, "runs/first")
    result.summary["final_accuracy"], result.rounds[-1]["cumulative_energy_j"]

Each function is the command line's command (fedjoule/commands/, the one layer under
both): it writes the same files into its folder and reads them back (fedjoule/results.py):
a result's tables are its folder's CSV files, row for row, with the types restored
(`cell_value`). Mistakes raise `fedjoule.errors.FedjouleError` with the message the command
line prints.

Importing this module is cheap: torch, numpy, matplotlib, the scenario schema and the
engines are imported by the functions that need them.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedjoule import arguments
from fedjoule.api_views import (
    CapacityDisplay,
    Display,
    RunDisplay,
    RunsDisplay,
    SweepDisplay,
)
from fedjoule.commands.capacity import CapacityOptions
from fedjoule.commands.capacity import capacity as plan_capacity
from fedjoule.commands.common import API_WORDS, EXECUTORS, check_resume, check_tracking
from fedjoule.commands.plan import plan as run_plan
from fedjoule.commands.run import RunOptions
from fedjoule.commands.run import run as train
from fedjoule.commands.sweep import sweep as run_sweep
from fedjoule.errors import FedjouleError, RunDiverged
from fedjoule.overrides import grid_texts, override_texts, value_text
from fedjoule.planning.options import (
    ACCURACIES,
    BACKENDS,
    OVER,
    SEARCHES,
    Objective,
    PlanOptions,
    SweepOptions,
    parse_numbers,
)
from fedjoule.plugins import PluginError, allow_plugins
from fedjoule.results import (
    CapacityResult,
    PlanResult,
    RunResult,
    SweepResult,
    cell_value,
    read_table,
)
from fedjoule.scenarios import reader
from fedjoule.simulator.checkpoint import differences

if TYPE_CHECKING:
    from fedjoule.scenarios.schema import Scenario

__all__ = [
    "CapacityResult",
    "PlanResult",
    "RunResult",
    "SweepResult",
    "capacity",
    "cell_value",
    "load_scenario",
    "plan",
    "read_table",
    "run",
    "sweep",
    "value_text",
]

PLUGIN_SECTIONS = ("model", "dataset", "algorithm", "policy")  # sections that may name a plug-in


# --------------------------------------------------------------------------- scenarios


def _plugins_allowed(function: Callable) -> Callable:
    """Calls of `function` run with the plug-ins its allow_module_plugins and
    allow_plugin_paths arguments allow (the command line's --allow-module-plugins and
    --allow-plugin-path; fedjoule/plugins.py): a scenario read from a file may name
    module plug-ins of those top-level packages (never the standard library) and plug-in
    files in those folders besides its own."""

    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:

        given = signature.bind(*args, **kwargs).arguments
        modules = given.get("allow_module_plugins", ())
        if isinstance(modules, str):
            modules = [m.strip() for m in modules.split(",") if m.strip()]
        paths = given.get("allow_plugin_paths", ())
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        allowed = {str: "package names", (str, os.PathLike): "folder paths"}
        checked = []
        for what, values, kinds in (
            ("allow_module_plugins", modules, str),
            ("allow_plugin_paths", paths, (str, os.PathLike)),
        ):
            expected = f"a list of at most {arguments.MAX_VALUES:,} {allowed[kinds]}"
            try:
                values = arguments.items(what, values, arguments.MAX_VALUES, expected)
            except arguments.ArgumentError as exc:
                raise PluginError(str(exc)) from None
            if not all(isinstance(v, kinds) for v in values):
                raise PluginError(f"{what}={arguments.shown(values)}: expected {expected}")
            checked.append(values)
        with allow_plugins(*checked):
            return function(*args, **kwargs)

    return call


@_plugins_allowed
def load_scenario(
    name_or_path: str | os.PathLike[str] = "default",
    overrides: Mapping[str, Any] | None = None,
    allow_module_plugins: str | Sequence[str] = (),
    allow_plugin_paths: Sequence[str | os.PathLike[str]] = (),
) -> Scenario:
    """A validated Scenario from a built-in name or a YAML file, with `overrides` applied:
    dotted keys to Python values, e.g. {"training.rounds": 5, "model.hidden": [64, 64]}
    (the command line's `--set training.rounds=5`). Plug-in files (`factory`, `class`) are
    looked for in the YAML file's folder, then the working folder.

    A Scenario can also be built in code, `Scenario(name="x", training={"rounds": 5})` or
    `Scenario.model_validate({...})`; its plug-in files are then looked for in the working
    folder. A mistake raises FedjouleError (from load_scenario, listing every problem) or
    pydantic's ValidationError (from Scenario)."""
    arguments.path("name_or_path", name_or_path, optional=False)
    arguments.mapping("overrides", overrides)
    return reader().load_scenario(os.fspath(name_or_path), override_texts(overrides))


def _check_scenario(scenario: Any, optional: bool = False) -> None:
    """The `scenario` argument: a Scenario, a built-in name or a YAML file's path."""
    if scenario is None and optional:
        return
    if not isinstance(scenario, reader().Scenario | str | os.PathLike):
        raise arguments.ArgumentTypeError(
            f"scenario={arguments.shown(scenario)}: expected a Scenario, a built-in name or "
            "a YAML file's path"
        )
    if not isinstance(scenario, reader().Scenario):
        arguments.path("scenario", scenario, optional=False)


def _check_common(**given: Any) -> None:
    """The arguments every command shares (fedjoule/arguments.py), by name."""
    checks = {
        "out": lambda v: arguments.path("out", v),
        "overrides": lambda v: arguments.mapping("overrides", v),
        "data_dir": lambda v: arguments.path("data_dir", v),
        "device": lambda v: arguments.device("device", v),
        "quiet": lambda v: v is None or arguments.flag("quiet", v),
        "backend": lambda v: arguments.choice("backend", v, BACKENDS),
        "address": lambda v: arguments.text("address", v, optional=True),
        "workers": lambda v: arguments.workers("workers", v),
        "threads_per_run": lambda v: arguments.threads("threads_per_run", v, optional=False),
        "seeds": lambda v: arguments.seeds("seeds", v),
    }
    for name, value in given.items():
        checks[name](value)


def _scenario(scenario: Any, overrides: Mapping[str, Any] | None) -> Scenario:
    """A Scenario from a Scenario, a built-in name or a YAML file (None: "default"), with
    overrides applied."""
    if isinstance(scenario, reader().Scenario):
        if not overrides:
            return scenario
        raw = scenario.model_dump(mode="json")
        for key in overrides:  # another plug-in: the recorded source is the old one's
            section, _, field = key.strip().partition(".")
            if section in PLUGIN_SECTIONS and field in ("", "name", "factory", "class"):
                if isinstance(raw.get(section), dict):
                    raw[section].pop("source", None)
        raw = reader().apply_overrides(raw, override_texts(overrides))
        return reader().validate(raw, f"scenario {scenario.name!r}")
    return load_scenario("default" if scenario is None else scenario, overrides)


# --------------------------------------------------------------------------- run


@_plugins_allowed
def run(
    scenario: Scenario | str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    on_round: Callable[[dict[str, Any]], bool | None] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    device: str = "auto",
    executor: str = "vectorised",
    resume: bool = False,
    threads: int | None = None,
    state_memory_mb: float | None = 2048,
    quiet: bool | None = None,
    plot_style: str | os.PathLike[str] | None = None,
    allow_module_plugins: str | Sequence[str] = (),
    allow_plugin_paths: Sequence[str | os.PathLike[str]] = (),
    track: str | Sequence[str] | None = None,
) -> RunResult:
    """Run a scenario (`fedjoule run`): rounds.csv, clients.csv, summary.json, plots and a
    checkpoint in `out` (default `runs/<name>-<time>`); returns its results.

    scenario: a Scenario, a built-in name or a YAML file (None: "default"); with
    `resume=True`, None continues the run in `out` as recorded (a scenario given must be
    the one recorded). overrides: {dotted.key: value} applied to it.
    on_round(row): called after each round with its row, the dict rounds.csv gets (read
    back: `cell_value`); returning False stops the run after that round: its files
    and checkpoint are written as for a run stopped there, the result has stopped_early
    True, and `run(None, out, resume=True)` plays the rest. An exception raised in it
    propagates, with the round already saved (the folder resumes like an interrupted run).
    data_dir: dataset folder (default $FEDJOULE_DATA_DIR, else a user cache). device:
    auto (CUDA if present), cpu or cuda. executor: vectorised, vmap, compiled or sequential.
    threads: torch CPU threads during the run (default: one for a small step, as
    `fedjoule run` chooses, else as set). state_memory_mb: client
    state kept in memory; beyond it rows spill to client_state.bin (None: never).
    quiet: None (default) shows a progress bar and the messages in a Jupyter notebook
    (rich's notebook support) or on stderr when it is a terminal, nothing when stderr is
    a file or a pipe; False shows them always (a line per round on stderr where there is
    no terminal); True shows nothing. plot_style: None (the
    default look), "paper" or a matplotlib style file (`--plot-style`).
    track: experiment tracking, e.g. "tensorboard,mlflow" or ["csv", "wandb"] (`--track`;
    the scenario's tracking.backends; docs/tracking.md).

    A run that diverges returns normally: `result.diverged`, summary diverged_reason.
    """

    # everything is checked before anything is created (as `fedjoule run` does)
    _check_scenario(scenario, optional=True)
    _check_common(out=out, overrides=overrides, data_dir=data_dir, device=device, quiet=quiet)
    arguments.function("on_round", on_round)
    arguments.choice("executor", executor, EXECUTORS)
    arguments.flag("resume", resume)
    arguments.threads("threads", threads)
    arguments.real("state_memory_mb", state_memory_mb, 0, arguments.MAX_MEMORY_MB, optional=True)
    style = arguments.plot_style("plot_style", plot_style)
    backends = arguments.tracking("track", track)
    loaded = _run_scenario(scenario, out, overrides, resume, backends)
    options = RunOptions(data_dir, device, executor, resume, threads, state_memory_mb)
    display = Display(quiet)
    view = RunDisplay(display, style, resume, on_round)
    try:
        train(loaded, _out(out), options, view)
    except RunDiverged:  # its files are written; the result says so
        pass
    result = RunResult.from_folder(view.folder)
    for note in result.summary.get("notes") or []:  # (the energy model)
        display.say(f"note: {note}")
    display.say(f"results in {view.folder}")
    return result


def _run_scenario(
    scenario: Any, out: Any, overrides: Any, resume: bool, backends: list[str] | None
) -> Scenario | None:
    """The Scenario a run plays, with the tracking asked for; None for a resumed run (the
    scenario recorded in `out`, which a scenario given must equal)."""

    check_tracking(bool(backends), resume, False, API_WORDS)
    check_resume(resume, bool(overrides), out, API_WORDS)
    overrides = _with_tracking(overrides, backends)
    if not resume:
        return _scenario(scenario, overrides)
    if scenario is not None:
        _check_recorded(_scenario(scenario, None), Path(out))
    return None


def _check_recorded(scenario: Scenario, folder: Path) -> None:
    """A scenario given with resume=True must be the one the folder's run was started with."""
    path = folder / "scenario.yaml"
    if not path.is_file():
        return  # (run_scenario says there is no run to resume)
    saved, _ = reader().read_source(path)
    differ = differences(saved, scenario.model_dump(mode="json"))
    if differ:
        raise FedjouleError(
            f"{folder} holds a run of another scenario (differs in {', '.join(differ[:5])}); "
            "pass scenario=None to continue it as recorded"
        )


# --------------------------------------------------------------------------- sweep, plan


def _sweep_options(backend, address, workers, threads_per_run, device, data_dir, objective=None):
    extra = {} if objective is None else {"objective": objective}
    return SweepOptions(
        backend=backend,
        address=address,
        workers=workers,
        threads_per_run=threads_per_run,
        device=device,
        data_dir=os.fspath(data_dir) if data_dir else None,
        **extra,
    )


@_plugins_allowed
def sweep(
    scenario: Scenario | str | os.PathLike[str],
    axes: Mapping[str, Sequence[Any]] | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    overrides: Mapping[str, Any] | None = None,
    backend: str = "local",
    address: str | None = None,
    workers: int | None = None,
    threads_per_run: int = 1,
    device: str = "auto",
    data_dir: str | os.PathLike[str] | None = None,
    pareto_accuracy: str = "final_accuracy",
    pareto_to_target: bool = False,
    seeds: int | Sequence[int] | None = None,
    ci: str = "t",
    plot_style: str | os.PathLike[str] | None = None,
    quiet: bool | None = None,
    allow_module_plugins: str | Sequence[str] = (),
    allow_plugin_paths: Sequence[str | os.PathLike[str]] = (),
    track: str | Sequence[str] | None = None,
) -> SweepResult:
    """Run a scenario over the cartesian product of `axes` (`fedjoule sweep`): one run
    folder per point in out/runs, sweep.csv, sweep.json and Pareto plots in `out` (default
    `sweeps/<name>-<time>`). Give the same `out` again to finish an interrupted sweep:
    finished runs are skipped, partial ones resumed.

    axes (or grid=, the same): {dotted.key: [values]}, e.g. {"training.local_steps": [1, 5],
    "seed": [0, 1]}. Algorithms as values: {"algorithm": ["fedavg", "fedprox:mu=0.1",
    {"name": "scaffold", "server_lr": 0.5}]} (presets, docs/sweeps.md); a setting axis
    {"algorithm.mu": [0.01, 0.1]} multiplies only the grid's algorithms that have `mu`.
    overrides: {dotted.key: value} applied to every run (not an axis key). backend: local
    (a process pool) or ray (address: a cluster; default a local Ray). workers: runs at
    once (default: local, cores // threads_per_run). threads_per_run: torch threads (and
    Ray CPUs) per run. device: auto, cpu or cuda. pareto_accuracy: final_accuracy,
    best_accuracy, worst_client_accuracy or client_accuracy_p10; pareto_to_target: fronts
    over the costs to the target. seeds: a count N (seeds 0..N-1) or a list (`--seeds`):
    every point once per seed, aggregate.csv/json with each point's mean and 95 % CI
    (`ci`: "t" Student, or "bootstrap"), sweep.csv marked with the fronts of the means.
    plot_style: None, "paper" or a matplotlib style file (`--plot-style`). quiet: as for
    `run` (None: progress bars in a notebook or on a terminal). A Scenario is
    written to out/scenario.yaml and read from there. Runs that fail raise FedjouleError
    after the others finished. track: as for `run`; the sweep is the parent of its
    runs' tracked runs.
    """
    _check_scenario(scenario)
    named, axes = _axes(axes, grid)
    _check_many(out, overrides, backend, address, workers, threads_per_run, device, data_dir, quiet)
    arguments.choice("pareto_accuracy", pareto_accuracy, ACCURACIES)
    arguments.flag("pareto_to_target", pareto_to_target)
    seed_list = arguments.seeds("seeds", seeds)
    arguments.ci("ci", ci)
    style = arguments.plot_style("plot_style", plot_style)
    if seed_list is not None and "seed" in axes:
        raise arguments.ArgumentError("seeds=...: seed is then an axis; leave it out of axes")
    backends = arguments.tracking("track", track)
    overrides = _with_tracking(overrides, backends)

    options = _sweep_options(
        backend,
        address,
        workers,
        threads_per_run,
        device,
        data_dir,
        Objective(pareto_accuracy, pareto_to_target),
    )
    texts, sets = grid_texts(axes, named, seed_list), override_texts(overrides)
    display = Display(quiet)
    view = SweepDisplay(display, style, backend)
    result = run_sweep(scenario, _out(out), texts, sets, options, seed_list, ci, view)
    for warning in result.warnings:
        display.say(f"warning: {warning}")
    display.say(f"results in {result.out}")
    return SweepResult.from_folder(result.out)


def _axes(axes: Any, grid: Any) -> tuple[str, Mapping]:
    """The grid given as axes= or as grid= (the same), and the name it was given by."""

    if axes is not None and grid is not None:
        raise arguments.ArgumentTypeError("give the grid once: axes= or grid=, not both")
    named = "axes" if grid is None else "grid"
    axes = grid if axes is None else axes
    if axes is None:
        raise arguments.ArgumentTypeError("axes=None: expected a mapping {dotted.key: [values]}")
    arguments.mapping(named, axes)
    return named, axes


def _check_many(
    out, overrides, backend, address, workers, threads_per_run, device, data_dir, quiet
) -> None:
    """The arguments of the commands that run many scenarios (sweep, plan)."""
    _check_common(
        out=out,
        overrides=overrides,
        backend=backend,
        address=address,
        workers=workers,
        threads_per_run=threads_per_run,
        device=device,
        data_dir=data_dir,
        quiet=quiet,
    )


def _with_tracking(
    overrides: Mapping[str, Any] | None, backends: list[str] | None
) -> Mapping[str, Any] | None:
    """`overrides` with track='s backends as the scenario's tracking.backends (the API's
    form of arguments.tracking_override)."""
    return {**(overrides or {}), "tracking.backends": backends} if backends else overrides


@_plugins_allowed
def plan(
    scenario: Scenario | str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    k: Sequence[int] = (1, 2, 5, 10, 20, 50),
    snr_db: Sequence[float] = (0, 10, 20, 30),
    bandwidth_hz: Sequence[float] = (1e5, 1e6, 1e7),
    overrides: Mapping[str, Any] | None = None,
    max_rounds: int | None = None,
    cells: Sequence[tuple[float, float]] | None = None,
    per_cell: bool = False,
    backend: str = "local",
    address: str | None = None,
    workers: int | None = None,
    threads_per_run: int = 1,
    device: str = "auto",
    data_dir: str | os.PathLike[str] | None = None,
    seeds: int | Sequence[int] | None = None,
    plot_style: str | os.PathLike[str] | None = None,
    quiet: bool | None = None,
    allow_module_plugins: str | Sequence[str] = (),
    allow_plugin_paths: Sequence[str | os.PathLike[str]] = (),
    track: str | Sequence[str] | None = None,
) -> PlanResult:
    """The energy-optimal number of local steps K* over a grid of SNR and uplink bandwidth
    (`fedjoule plan`): plan.csv, plan.json, kstar_heatmap.png and energy_vs_k.png in `out`
    (default `plans/<name>-<time>`; give it again to resume an interrupted plan's runs).

    The scenario needs a target (training.target_value). k: local steps to compare;
    snr_db, bandwidth_hz: the channel grid; max_rounds: rounds cap of every learning run
    (default training.rounds); cells: (snr_db, bandwidth_hz) pairs drawn in energy_vs_k.png
    (default the grid's corners); per_cell: a learning run per (K, cell) even where one
    per K prices the grid. backend, address, workers, threads_per_run, device, data_dir:
    as for `sweep`. quiet: as for `run` (None: progress bars in a notebook or on a
    terminal; False: the plan's messages on stderr everywhere).
    seeds: a count N (seeds 0..N-1) or a list (`--seeds`): every learning run repeated
    per seed; plan.csv holds means with their 95 % CI, plan_seeds.csv every seed's row.
    plot_style: None, "paper" or a matplotlib style file (`--plot-style`).
    track: as for `run`; the plan is the parent of its learning runs' tracked runs.
    """
    _check_scenario(scenario)
    _check_many(out, overrides, backend, address, workers, threads_per_run, device, data_dir, quiet)
    arguments.integer("max_rounds", max_rounds, 1, arguments.MAX_ROUNDS, optional=True)
    arguments.flag("per_cell", per_cell)
    seed_list = arguments.seeds("seeds", seeds)
    style = arguments.plot_style("plot_style", plot_style)
    backends = arguments.tracking("track", track)
    overrides = _with_tracking(overrides, backends)

    k_values, snrs, bandwidths = _plan_grid(k, snr_db, bandwidth_hz, seed_list)
    plot_cells = arguments.cells("cells", cells, snrs, bandwidths)
    options = PlanOptions(
        k_values=k_values,
        snr_db=snrs,
        bandwidth_hz=bandwidths,
        max_rounds=max_rounds,
        plot_cells=plot_cells,
        per_cell=per_cell,
        sweep=_sweep_options(backend, address, workers, threads_per_run, device, data_dir),
        seeds=seed_list,
    )
    sets = override_texts(overrides)
    result = run_plan(scenario, _out(out), sets, options, RunsDisplay(Display(quiet), style))
    return PlanResult.from_folder(result.out)


def _plan_grid(k: Any, snr_db: Any, bandwidth_hz: Any, seeds: list[int] | None) -> tuple:
    """The plan's k, snr_db and bandwidth_hz as lists, checked by the command line's rules
    (parse_numbers) on the checked values' text; the grid (times the seeds) at most
    MAX_RUNS cells."""

    def number_list(name: str, values: Any, kind: type, minimum: float | None = None) -> list:
        given = arguments.number_list(name, values, whole=kind is int)
        return parse_numbers(name, ",".join(map(repr, given)), kind, minimum)

    snrs = number_list("snr_db", snr_db, float)
    bandwidths = number_list("bandwidth_hz", bandwidth_hz, float, 1e-300)
    k_values = number_list("k", k, int, minimum=1)
    sizes = {"k": len(k_values), "snr_db": len(snrs), "bandwidth_hz": len(bandwidths)}
    arguments.grid_size(
        "k, snr_db, bandwidth_hz", {**sizes, **({"seeds": len(seeds)} if seeds else {})}
    )
    return k_values, snrs, bandwidths


# --------------------------------------------------------------------------- capacity


@_plugins_allowed
def capacity(
    scenario: Scenario | str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    search: str = "clients_per_round",
    deadline_s: float | None = None,
    energy_budget_j: float | None = None,
    rounds: int | None = None,
    quantile: float = 0.95,
    over: str = "clients",
    seeds: int | Sequence[int] | None = None,
    quiet: bool | None = None,
    allow_module_plugins: str | Sequence[str] = (),
    allow_plugin_paths: Sequence[str | os.PathLike[str]] = (),
) -> CapacityResult:
    """Capacity planning without training (`fedjoule capacity`): capacity.csv (every
    candidate evaluated) and capacity.json in `out` (default `runs/<name>-capacity-<time>`).

    search: clients_per_round (the largest m meeting the limits), uplink_bandwidth_hz (the
    smallest B, to 0.1 %), concurrency (the largest protocol.concurrency, for protocol.kind
    async or buffered; docs/protocols.md) or none (the scenario's own figures). deadline_s:
    round time limit (default the scenario's round.deadline_s); energy_budget_j: per-device
    energy limit per round; rounds: system-only rounds simulated per candidate (None: enough
    for 20 observations above the quantile); quantile: judge the time and device energy at
    this quantile (1: the worst); over: clients (the time from a round's start to each
    client's arrival, over client-rounds) or rounds (each round's whole duration); seeds: a
    count N (seeds 0..N-1) or a list: the answer per seed and its mean and 95 % CI.
    quiet: as for `run` (None: what it does and the figures table on a terminal or in a
    notebook, nothing in a script whose stderr is not a terminal; False: always; True:
    never).
    """
    _check_scenario(scenario, optional=True)
    _check_common(out=out, overrides=overrides, quiet=quiet)
    arguments.choice("search", search, SEARCHES)
    for name, value in (("deadline_s", deadline_s), ("energy_budget_j", energy_budget_j)):
        arguments.real(name, value, 0, low_open=True, optional=True)
    arguments.integer("rounds", rounds, 1, arguments.MAX_ROUNDS, optional=True)
    arguments.real("quantile", quantile, 0, 1, low_open=True)
    arguments.choice("over", over, OVER)
    seeds = arguments.seeds("seeds", seeds)
    options = CapacityOptions(search, deadline_s, energy_budget_j, rounds, quantile, over, seeds)
    display = Display(quiet)
    done = plan_capacity(
        _scenario(scenario, overrides), _out(out), options, CapacityDisplay(display)
    )
    display.say(f"results in {done.folder}")
    return CapacityResult.from_folder(done.folder)


def _out(out: str | os.PathLike[str] | None) -> Path | None:
    return None if out is None else Path(out)
