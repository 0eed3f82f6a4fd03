"""`capacity`: capacity planning without training (planning/capacity.py): the scenario's
figures and the largest clients_per_round (or smallest bandwidth, or largest concurrency)
meeting a deadline and an energy budget, written to capacity.csv and capacity.json."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fedjoule.folders import check_out_folder, stamped_folder


@dataclass(frozen=True)
class CapacityOptions:
    """The search and its limits (plan_capacity checks them and says what is allowed)."""

    search: str = "clients_per_round"
    deadline_s: float | None = None
    energy_budget_j: float | None = None
    rounds: int | None = None
    quantile: float = 0.95
    over: str = "clients"
    seeds: list[int] | None = None


class CapacityView:
    """What capacity shows while it works: nothing here; the command line and the API say
    more."""

    @contextmanager
    def planning(self, scenario: Any, options: CapacityOptions) -> Iterator[Callable | None]:
        """Around the search; yields the `on_step(figures)` called per candidate, or None."""
        yield None

    def figures(self, scenario: Any, figures: dict) -> None:
        """The plan's figures, before they are written."""


@dataclass(frozen=True)
class CapacityDone:
    folder: Path
    figures: dict


def capacity(
    scenario: Any, out: Path | None, options: CapacityOptions, view: CapacityView | None = None
) -> CapacityDone:
    """Plan the capacity of a loaded Scenario into `out` (default
    runs/<name>-capacity-<time>), checked before anything is simulated."""
    # deferred: the system-only engine and its planner (numpy, SimPy)
    from fedjoule.planning.capacity import plan_capacity
    from fedjoule.planning.capacity_report import write_capacity
    from fedjoule.simulator.system_world import build_system_world

    view = view or CapacityView()
    folder = out or stamped_folder("runs", f"{scenario.name}-capacity")
    check_out_folder(folder)
    world = None if options.seeds else build_system_world(scenario)
    settings = {f.name: getattr(options, f.name) for f in fields(options)}
    with view.planning(scenario, options) as on_step:
        figures = plan_capacity(scenario, world, **settings, on_step=on_step)
    view.figures(scenario, figures)
    write_capacity(folder, figures)
    return CapacityDone(folder, figures)
