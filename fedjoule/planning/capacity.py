"""Capacity planning without training (`fedjoule capacity`): rounds per hour, airtime per
cell, energy per round and per device class, battery drain per day, and the largest
clients_per_round (or smallest uplink bandwidth) meeting a round deadline and a per-device
energy budget, from the numpy system engine (docs/system-engine.md)."""

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from fedjoule.errors import FedjouleError
from fedjoule.report.results import finite_or_none
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_world import SystemWorld

SEARCHES = ("clients_per_round", "uplink_bandwidth_hz", "none")
DAY_S = 86_400.0


def variant(scenario: Scenario, clients_per_round=None, bandwidth_hz=None) -> Scenario:
    """The scenario with another m or B, and no round deadline (rounds run to the end, so
    their full duration is measured)."""
    training, channel = scenario.training, scenario.channel
    if clients_per_round is not None:
        training = training.model_copy(update={"clients_per_round": int(clients_per_round)})
    if bandwidth_hz is not None:
        channel = channel.model_copy(update={"uplink_bandwidth_hz": float(bandwidth_hz)})
    rounds = scenario.round.model_copy(update={"deadline_s": None})
    return scenario.model_copy(update={"training": training, "channel": channel, "round": rounds})


def evaluate(world: SystemWorld, scenario: Scenario, rounds: int, quantile: float) -> dict:
    """Play `rounds` system-only rounds of `scenario` on `world`; the capacity figures."""
    engine = SystemEngine(dataclasses.replace(world, scenario=scenario))
    pop, n_cells = world.population, world.topology.n_cells
    n_classes = len(pop.class_names)
    durations, device_energy = [], []
    airtime = np.zeros(n_cells)
    class_energy, class_participations = np.zeros(n_classes), np.zeros(n_classes)
    energy_rounds = []

    def collect(row: dict) -> None:
        clients = engine.last_clients
        durations.append(row["sim_time_end_s"] - row["sim_time_start_s"])
        energy_rounds.append(row["energy_total_j"])
        spent = clients.energy_total_j
        device_energy.extend(spent.tolist())
        airtime[:] += np.bincount(clients.cell, clients.uplink_airtime_s, minlength=n_cells)
        classes = pop.class_index[clients.client]
        class_energy[:] += np.bincount(classes, spent, minlength=n_classes)
        class_participations[:] += np.bincount(classes, minlength=n_classes)

    engine.run(rounds, collect)
    sim_time_s = engine.sim_time_s
    class_size = np.bincount(pop.class_index, minlength=n_classes)
    capacity_j = np.bincount(pop.class_index, pop.battery_capacity_j, minlength=n_classes)
    drain_j_per_day = (
        class_energy / class_size * (DAY_S / sim_time_s) if sim_time_s else 0 * class_energy
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = {
            name: {  # None where undefined: a class that never took part
                "energy_per_participation_j": finite_or_none(
                    class_energy[c] / class_participations[c]
                ),
                "battery_drain_j_per_day": finite_or_none(drain_j_per_day[c]),
                "battery_drain_percent_per_day": finite_or_none(
                    100 * drain_j_per_day[c] / (capacity_j[c] / class_size[c])
                ),
            }
            for c, name in enumerate(pop.class_names)
        }
    return {
        "clients_per_round": scenario.training.clients_per_round,
        "uplink_bandwidth_hz": scenario.channel.uplink_bandwidth_hz,
        "round_time_s": float(np.quantile(durations, quantile)),
        "mean_round_time_s": float(np.mean(durations)),
        "rounds_per_hour": 3600.0 * rounds / sim_time_s if sim_time_s else None,
        "device_energy_j": float(np.quantile(device_energy, quantile)) if device_energy else 0.0,
        "energy_per_round_j": float(np.mean(energy_rounds)),
        "uplink_airtime_per_round_s": (airtime / rounds).tolist(),
        "per_class": per_class,
    }


def plan_capacity(
    scenario: Scenario,
    world: SystemWorld,
    *,
    search: str = "clients_per_round",
    deadline_s: float | None = None,
    energy_budget_j: float | None = None,
    rounds: int = 10,
    quantile: float = 1.0,
    bandwidth_range_hz: tuple[float, float] = (1e3, 1e10),
    on_step: Callable[[dict], None] | None = None,
) -> dict:
    """The capacity figures of the scenario, and the search's answer: the largest m (or the
    smallest B, to 0.1 %) whose `quantile` round time is within `deadline_s` and whose
    `quantile` per-device energy per round is within `energy_budget_j`."""
    if search not in SEARCHES:
        raise FedjouleError(f"--search {search!r}: allowed: {', '.join(SEARCHES)}")
    if not 0 < quantile <= 1:
        raise FedjouleError(f"--quantile {quantile}: must be in (0, 1]")
    deadline_s = scenario.round.deadline_s if deadline_s is None else deadline_s
    if search != "none" and deadline_s is None and energy_budget_j is None:
        raise FedjouleError(
            f"--search {search} needs a limit: --deadline-s (or round.deadline_s in the "
            "scenario) and/or --energy-budget-j"
        )
    trace = []

    def run(**change) -> dict:
        figures = evaluate(world, variant(scenario, **change), rounds, quantile)
        figures["meets"] = (deadline_s is None or figures["round_time_s"] <= deadline_s) and (
            energy_budget_j is None or figures["device_energy_j"] <= energy_budget_j
        )
        trace.append(figures)
        if on_step:
            on_step(figures)
        return figures

    base = run()
    answer = None
    if search == "clients_per_round":  # feasibility falls as m grows: doubling, then bisection
        lo, hi, n = 0, 1, world.population.size
        while hi <= n and run(clients_per_round=hi)["meets"]:
            lo, hi = hi, 2 * hi
        hi = min(hi, n + 1)  # lo meets (or is 0), hi does not (or is past N)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if run(clients_per_round=mid)["meets"] else (lo, mid)
        answer = lo or None
    elif search == "uplink_bandwidth_hz":  # feasibility grows with B: bisection on log B
        lo, hi = bandwidth_range_hz
        if not run(bandwidth_hz=hi)["meets"]:
            answer = None
        else:
            while hi / lo > 1.001:
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if run(bandwidth_hz=mid)["meets"] else (mid, hi)
            answer = hi
    best = None
    if answer is not None:
        change = {"clients_per_round": answer} if search == "clients_per_round" else {
            "bandwidth_hz": answer}  # fmt: skip
        best = next(
            (f for f in reversed(trace) if f["meets"] and _matches(f, change)), None
        ) or run(**change)
    return {
        "search": search,
        "deadline_s": deadline_s,
        "energy_budget_j": energy_budget_j,
        "quantile": quantile,
        "rounds": rounds,
        "answer": answer,
        "scenario": base,
        "at_answer": best,
        "evaluations": trace,
    }


def _matches(figures: dict, change: dict) -> bool:
    if "clients_per_round" in change:
        return figures["clients_per_round"] == change["clients_per_round"]
    return figures["uplink_bandwidth_hz"] == change["bandwidth_hz"]
