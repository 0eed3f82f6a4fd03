"""`sweep`: a scenario over the cartesian product of a grid, one run folder per point
(planning/sweep.py), into sweep.csv, sweep.json and the Pareto plots."""

from pathlib import Path
from typing import Any

from fedjoule.commands.many import RunsView, command_folder


def sweep(
    scenario: Any,
    out: Path | None,
    grid: list[str],
    overrides: list[str],
    options: Any,
    seeds: list[int] | None = None,
    ci: str = "t",
    view: RunsView | None = None,
) -> Any:
    """Run `scenario` (a built-in name, a YAML file or a Scenario) over `grid` (--grid
    texts) with `overrides` (--set texts) and `options` (planning.sweep.SweepOptions,
    checked when made), each point once per seed of `seeds`, into `out` (default
    sweeps/<name>-<time>; given again, finished runs are skipped and partial ones resumed).
    Returns planning.sweep.SweepResult."""
    # deferred: the sweep (its runs' pool or Ray, the plots with matplotlib)
    from fedjoule.planning.sweep import SWEEP_JSON, run_sweep, state_lines

    view = view or RunsView()

    def on_plan(points, states: dict[str, str], folders: dict[str, Path]) -> None:
        view.on_plan(points, states, folders, state_lines(points, states, folders))

    with command_folder(scenario, out, "sweeps", (SWEEP_JSON,)) as (folder, source):
        with view.running(folder):
            return run_sweep(
                source,
                grid,
                folder,
                overrides,
                options,
                on_plan=on_plan,
                on_run=view.on_run,
                seeds=seeds,
                ci=ci,
            )


def plan_line(points: list, states: dict[str, str], backend: str, folder: Path) -> str:
    """What a sweep is about to do, after the word `sweep`: its runs, those finished
    (skipped), to resume and to start, and its folder."""
    done = sum(s == "done" for s in states.values())
    partial = sum(s == "partial" for s in states.values())
    return (
        f"{len(points)} runs on {backend}: {done} finished (skipped), {partial} to resume, "
        f"{len(points) - done - partial} to start; folder {folder}"
    )
