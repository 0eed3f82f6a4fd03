"""`plan`: the energy-optimal number of local steps K* over a grid of SNR and uplink
bandwidth (planning/plan.py), into plan.csv, plan.json and its plots."""

from pathlib import Path
from typing import Any

from fedjoule.commands.many import RunsView, command_folder


def plan(
    scenario: Any, out: Path | None, overrides: list[str], options: Any, view: RunsView | None
) -> Any:
    """Plan K* for `scenario` (a built-in name, a YAML file or a Scenario) with `overrides`
    (--set texts) and `options` (planning.plan.PlanOptions, checked when made) into `out`
    (default plans/<name>-<time>; given again, an interrupted plan's runs resume).
    Returns planning.plan.PlanResult."""
    # deferred: the planner (its runs' pool, the plots with matplotlib)
    from fedjoule.planning import plan, sweep

    view = view or RunsView()

    def on_plan(points, states: dict[str, str], folders: dict[str, Path]) -> None:
        view.on_plan(points, states, folders, sweep.state_lines(points, states, folders))

    outputs = (plan.PLAN_JSON, "learning", "cells")  # (a failed plan that wrote none: undone)
    with command_folder(scenario, out, "plans", outputs) as (folder, source):
        with view.running(folder):
            return plan.run_plan(
                source,
                folder,
                overrides,
                options,
                say=view.say,
                on_plan=on_plan,
                on_run=view.on_run,
                on_replays=view.on_replays,
                on_replay=view.on_replay,
            )
