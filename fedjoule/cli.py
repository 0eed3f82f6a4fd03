"""The `fedjoule` command line: thin; parses, calls the packages, prints."""

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fedjoule import __version__
from fedjoule.errors import FedjouleError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fedjoule: energy-aware wireless federated-learning simulator.",
)
console = Console()
errors = Console(stderr=True)

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a scenario field: dotted.key=value (repeatable)."),
]


@app.command()
def run(
    scenario: Annotated[
        str, typer.Argument(help="A built-in scenario name or a YAML file.")
    ] = "default",
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default runs/<name>-<time>).")
    ] = None,
    set_: SetOption = None,
    device: Annotated[str, typer.Option(help="auto (CUDA if present), cpu or cuda.")] = "auto",
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Dataset folder (default $FEDJOULE_DATA_DIR, else a user cache)."),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="vectorised (all clients at once) or sequential (reference).")
    ] = "vectorised",
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the interrupted run in --out.")
    ] = False,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="CPU threads for torch (default: all cores). Use 1 when several runs share "
            "the machine: competing threads can slow small models tenfold.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    no_train: Annotated[
        bool,
        typer.Option(
            "--no-train",
            help="System only: availability, selection, channel, time and energy without "
            "data or training (numpy engine, millions of devices; docs/system-engine.md).",
        ),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            help="With --no-train: auto (numpy, or SimPy where numpy cannot), numpy, or simpy "
            "(the SimPy engine with training skipped)."
        ),
    ] = "auto",
) -> None:
    """Run a scenario: rounds.csv, clients.csv, summary.json and plots in the output folder."""
    if no_train:
        return run_no_train(scenario, out, set_ or [], engine, resume, quiet)
    import torch

    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.run import run_scenario

    if threads:
        torch.set_num_threads(threads)

    if executor not in ("vectorised", "sequential"):
        raise FedjouleError(f"--executor {executor!r}: expected vectorised or sequential")
    loaded = None if resume else load_scenario(scenario, set_ or [])
    if resume and set_:
        raise FedjouleError("--resume continues a run as it was; --set cannot change it")
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )
    task = None

    def on_start(world, first_round: int) -> None:
        nonlocal task
        name = world.scenario.name
        console.print(
            f"[bold]{name}[/]: {world.scenario.population.size} clients, "
            f"{world.scenario.algorithm.name}, model {world.scenario.model.name} "
            f"({world.model.n_params:,} parameters) on {world.device}"
        )
        task = progress.add_task(
            name, total=world.scenario.training.rounds, completed=first_round, status=""
        )

    def on_round(row: dict) -> None:
        status = f"sim {row['sim_time_end_s']:.1f} s  {row['cumulative_energy_j']:.3g} J"
        if row.get("accuracy") is not None:
            status += f"  acc {row['accuracy']:.3f}"
        progress.update(task, advance=1, status=status)

    with progress:
        out_dir, summary = run_scenario(
            loaded,
            out,
            data_dir=data_dir,
            device=device,
            executor=executor,
            resume=resume,
            on_start=on_start,
            on_round=on_round,
        )
    print_summary(summary)
    console.print(f"results in [bold]{out_dir}[/]")


def run_no_train(scenario: str, out, set_: list[str], engine: str, resume: bool, quiet: bool):
    """`fedjoule run --no-train`: the system-only engine (fedjoule/simulator/system_run.py)."""
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system_run import run_system

    if resume:
        raise FedjouleError("--resume: a --no-train run keeps no checkpoint; run it again")
    loaded = load_scenario(scenario, set_)
    progress = _progress(quiet)
    task = None

    def on_start(world, chosen: str, notices: list[str]) -> None:
        nonlocal task
        for notice in notices:
            errors.print(f"[yellow]notice:[/] {escape(notice)}", highlight=False)
        console.print(
            f"[bold]{loaded.name}[/]: {loaded.population.size:,} clients, no training, "
            f"{chosen} engine, model {loaded.model.name} ({world.n_params:,} parameters)"
        )
        task = progress.add_task(loaded.name, total=loaded.training.rounds, status="")

    def on_round(row: dict) -> None:
        status = f"sim {row['sim_time_end_s']:.1f} s  {row['cumulative_energy_j']:.3g} J"
        progress.update(task, advance=1, status=status)

    with progress:
        out_dir, summary = run_system(
            loaded, out, engine=engine, on_start=on_start, on_round=on_round
        )
    print_summary(summary)
    console.print(f"results in [bold]{out_dir}[/]")


def _progress(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )


def print_summary(summary: dict) -> None:
    table = Table(title="summary", show_header=False)
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        table.add_row(key, "—" if value is None else str(value))
    console.print(table)


@app.command()
def capacity(
    scenario: Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")],
    set_: SetOption = None,
    search: Annotated[
        str,
        typer.Option(
            help="clients_per_round: the largest m meeting the limits; uplink_bandwidth_hz: "
            "the smallest B (to 0.1 %); none: only the scenario's own figures."
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
        int, typer.Option(min=1, help="System-only rounds simulated per candidate.")
    ] = 10,
    quantile: Annotated[
        float,
        typer.Option(
            help="Judge the round time and device energy at this quantile over rounds and "
            "participations (1: the worst)."
        ),
    ] = 1.0,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default runs/<name>-capacity-<time>).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Capacity planning without training: rounds per hour, airtime per cell, energy per round
    and per device class, battery drain per day, and the largest clients_per_round (or the
    smallest uplink bandwidth) meeting a round deadline and a per-device energy budget.
    Writes capacity.csv (every candidate) and capacity.json."""
    import time

    from fedjoule.planning.capacity import plan_capacity
    from fedjoule.planning.capacity_report import print_capacity, write_capacity
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system_world import build_system_world

    loaded = load_scenario(scenario, set_ or [])
    folder = out or Path("runs") / f"{loaded.name}-capacity-{time.strftime('%Y%m%d-%H%M%S')}"
    world = build_system_world(loaded)
    progress = _progress(quiet)
    with progress:
        task = progress.add_task("candidates", total=None, status="")

        def on_step(figures: dict) -> None:
            status = (
                f"m={figures['clients_per_round']}, B={figures['uplink_bandwidth_hz']:.4g} Hz: "
                f"round {figures['round_time_s']:.4g} s, device {figures['device_energy_j']:.4g} J"
            )
            progress.update(task, advance=1, status=status)

        plan = plan_capacity(
            loaded,
            world,
            search=search,
            deadline_s=deadline_s,
            energy_budget_j=energy_budget_j,
            rounds=rounds,
            quantile=quantile,
            on_step=on_step,
        )
    print_capacity(console, loaded, plan)
    write_capacity(folder, plan)
    console.print(f"results in [bold]{folder}[/]")


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
def validate(
    file: Annotated[str, typer.Argument(help="A scenario YAML file or built-in name.")],
    set_: SetOption = None,
    show: Annotated[bool, typer.Option("--show", help="Print the resolved scenario.")] = False,
) -> None:
    """Check a scenario file; print what is wrong, or the resolved scenario with --show."""
    from fedjoule.scenarios.loading import load_scenario, scenario_yaml

    scenario = load_scenario(file, set_ or [])
    if show:
        console.print(scenario_yaml(scenario), markup=False, highlight=False)
    console.print(f"{file}: valid")


@app.command()
def reference() -> None:
    """Print the scenario reference (every field, its default and meaning) as Markdown."""
    from fedjoule.scenarios.reference import reference_markdown

    sys.stdout.write(reference_markdown())


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


def main() -> None:
    try:
        app(standalone_mode=False)
    except FedjouleError as exc:
        errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        errors.print("interrupted; resume with `fedjoule run --resume --out DIR`")
        sys.exit(130)
    except (typer.Abort, typer.Exit) as exc:
        sys.exit(getattr(exc, "exit_code", 1))
    except Exception as exc:  # click usage errors carry their own exit codes
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
