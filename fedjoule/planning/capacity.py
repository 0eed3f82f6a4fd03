"""Capacity planning without training (`fedjoule capacity`): rounds per hour, airtime per
cell, energy per round and per device class, battery drain per day, and the largest
clients_per_round (or smallest uplink bandwidth) meeting a round deadline and a per-device
energy budget, from the numpy system engine, or the SimPy one for what the numpy engine
does not model (engine_of; docs/system-engine.md#capacity).

Every candidate of a seed plays the same world (positions, shadowing, devices) and the
same per-round draws (availability, fading, selection keys: common random numbers), so
two candidates differ by what m or B changes, not by luck. The limits are judged at a
quantile (default 0.95) over enough rounds that 20 observations lie above it; the candidates
are scanned, not bisected on trust, and where feasibility is not monotone the plan says
so. With several seeds (other worlds), the answer per seed and its mean and 95 % CI.
"""

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from fedjoule import rng
from fedjoule.energy_kinds import DEVICE_FIELDS, ENERGY_FIELDS
from fedjoule.errors import FedjouleError
from fedjoule.planning.options import OVER, SEARCHES
from fedjoule.report.results import finite_or_none
from fedjoule.scenarios.schema import Scenario
from fedjoule.seeds import aggregate_rows, describe
from fedjoule.simulator.round_row import ClientsOfRound
from fedjoule.simulator.round_rules import selection_size
from fedjoule.simulator.system import SystemEngine, unmodelled
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import SystemWorld, build_system_world
from fedjoule.simulator.transfers import with_power_control
from fedjoule.simulator.vector_radio import RadioBatteryStop

ENERGY_KINDS = DEVICE_FIELDS  # the ledger's kinds (fedjoule/energy_kinds.py)
LARGEST = ("clients_per_round", "concurrency")  # searches for the largest value meeting
TIME_FIELD = {"clients": "client_time_s", "rounds": "round_time_s"}
DAY_S = 86_400.0
DEFAULT_QUANTILE = 0.95
TAIL_OBSERVATIONS = 20  # observations above the quantile that the default rounds provide
MIN_ROUNDS = 20  # default rounds per candidate at least (the per-round means)
FULL_SCAN_UP_TO = 48  # every m = 1..N when N is at most this; else a geometric grid
GRID_POINTS = 24  # points of the geometric grid of m from 1 to N
BANDWIDTH_POINTS_PER_DECADE = 4
GAP_SCAN_MAX = 64  # a gap of the grid holding at most this many m is scanned, else bisected
LOOKAHEAD_FACTOR = 2.0  # the scan goes on to twice the largest m meeting (half the least B)
LOOKAHEAD_FAILURES = 3  # ... and stops after this many failing candidates in a row
SELECTION_SUBKEY = 1  # capacity's selection keys: stream ("selection", r, 1)
# the figures aggregated over seeds, per candidate (capacity.csv with --seeds)
SEED_FIELDS = (
    "client_time_s", "round_time_s", "mean_round_time_s", "rounds_per_hour",
    "device_energy_j", "energy_per_round_j", "arrived_fraction", "tail_observations",
)  # fmt: skip


def default_rounds(quantile: float, over: str = "rounds", clients_per_round: int = 1) -> int:
    """Rounds per candidate so that TAIL_OBSERVATIONS of the judged time lie above its
    q-quantile: (1 - q) R >= 20 over rounds (R = 400 at q = 0.95), (1 - q) m R >= 20 over
    the m client-rounds a round (R = 400 / m), at least MIN_ROUNDS; q = 1 (the worst)
    gets the count of q = 0.95."""
    q = quantile if quantile < 1 else DEFAULT_QUANTILE
    per_round = clients_per_round if over == "clients" else 1
    # round(): 20 / 0.05 is 400.0000000001
    return max(MIN_ROUNDS, math.ceil(round(TAIL_OBSERVATIONS / ((1 - q) * per_round), 9)))


def variant(
    scenario: Scenario, clients_per_round=None, bandwidth_hz=None, concurrency=None
) -> Scenario:
    """The scenario with another m, B or protocol.concurrency, and no round deadline
    (rounds run to the end, so their full duration is measured)."""
    training, channel = scenario.training, scenario.channel
    if concurrency is not None:
        protocol = scenario.protocol.model_copy(update={"concurrency": int(concurrency)})
        scenario = scenario.model_copy(update={"protocol": protocol})
    if clients_per_round is not None:
        training = training.model_copy(update={"clients_per_round": int(clients_per_round)})
    if bandwidth_hz is not None:
        channel = channel.model_copy(update={"uplink_bandwidth_hz": float(bandwidth_hz)})
    rounds = scenario.round.model_copy(update={"deadline_s": None})
    return scenario.model_copy(update={"training": training, "channel": channel, "round": rounds})


class CommonDrawsEngine(SystemEngine):
    """The system engine with selection nested in m: each round draws one uniform key per
    client (stream ("selection", r, 1)) and takes the ceil(f m) online candidates with the
    smallest keys. The m smallest of i.i.d. uniform keys are a uniform m-subset, the law of
    engine.select_clients (other draws), and for the same candidates a larger m's clients
    include a smaller m's. Fading, per-attempt fades, outages and Bernoulli availability
    are already keyed by round (and client), the same for every m and B."""

    def select(self, candidates: np.ndarray, r: int) -> np.ndarray:
        return common_select(self, candidates, r, super().select)


def common_select(engine, candidates: np.ndarray, r: int, fallback) -> np.ndarray:
    """CommonDrawsEngine's selection, for either engine (`fallback`: its own select)."""
    scenario = engine.world.scenario
    if len(candidates) == 0 or scenario.training.participation == "bernoulli":
        return fallback(candidates, r)  # Bernoulli: m plays no part
    if scenario.policy.select != "random":
        return fallback(candidates, r)  # the policy's selector (its draws keyed by round)
    m = selection_size(
        scenario.training.clients_per_round, scenario.round.overcommit, len(candidates)
    )
    gen = rng.stream(scenario.seed, "selection", r, SELECTION_SUBKEY)
    keys = gen.random(engine.world.population.size)[candidates]
    if m >= len(candidates):
        return candidates
    return np.sort(candidates[np.argpartition(keys, m - 1)[:m]])


class SimpyCommonDraws(SimpySystemSimulation):
    """The SimPy system engine with CommonDrawsEngine's selection: capacity's engine for
    what the numpy engine does not model (engine_of). A client's energy in a round is
    what the round's row charged it (the ledger's change: its radio tails settled at the
    round's end and between rounds included), so the figures add up to the rows."""

    def __init__(self, world: SystemWorld) -> None:
        super().__init__(world)
        self.last_clients = None
        self.sim_time_s = 0.0

    def select(self, candidates: np.ndarray, r: int) -> np.ndarray:
        return common_select(self, candidates, r, super().select)

    def run_rounds(self, rounds: int, collect) -> None:
        before = self.spent_j()

        def on_round(row: dict) -> None:
            nonlocal before
            self.sim_time_s = row["sim_time_end_s"]
            now = self.spent_j()
            # the round's records as the numpy engine's arrays, with every client's energy
            # charged in the round (outside clients' radio tails too)
            self.last_clients = ClientsOfRound.from_records(self.last_records)
            self.last_clients.spent_j = now - before
            before = now
            collect(row)

        self.run(rounds, on_round)

    def spent_j(self) -> np.ndarray:
        """Each client's energy in the rows so far (every kind of the rows' totals)."""
        return sum(self.ledger[name] for name in ENERGY_FIELDS)


def engine_of(scenario: Scenario) -> tuple[str, list[str]]:
    """The engine capacity's candidates play on, and why not the numpy engine: the SimPy
    engine without training for a protocol other than sync, or for what the numpy engine
    does not model (system.unmodelled: co-channel interference, link and capacity
    traces). A candidate where a client with radio states could reach its battery
    threshold is played again on the SimPy engine (evaluate)."""
    reasons = unmodelled(scenario)
    if scenario.protocol.kind != "sync":
        reasons = [f"protocol.kind={scenario.protocol.kind}", *reasons]
    return ("simpy" if reasons else "numpy"), reasons


def evaluate(world: SystemWorld, scenario: Scenario, rounds: int, quantile: float) -> dict:
    """Play `rounds` system-only rounds of `scenario` on `world` with common draws; the
    capacity figures. client_time_s: the q-quantile over client-rounds that arrive of the
    time from the round's start to the arrival; round_time_s: the q-quantile over rounds of
    the round's duration; device_energy_j: the q-quantile over client-rounds (every
    selected client) of its energy in that round (numpy's linear-interpolation quantile).
    Under protocol.kind async, buffered or hierarchical the SimPy engine plays it without
    training (a round is a server version; a client's time runs from its dispatch); so it
    does with co-channel interference, link traces and FedScale capacity traces."""
    if scenario.protocol.kind != "sync":
        return {**evaluate_protocol(world, scenario, rounds, quantile), "engine": "simpy"}
    if engine_of(scenario)[0] == "numpy":
        try:
            return evaluate_on(CommonDrawsEngine, world, scenario, rounds, quantile)
        except RadioBatteryStop:  # a battery stop the numpy engine does not place
            pass
    return evaluate_on(SimpyCommonDraws, world, scenario, rounds, quantile)


def with_scenario(world: SystemWorld, scenario: Scenario) -> SystemWorld:
    """The world under a candidate scenario: its clients' uplink power follows the
    candidate's band share (radio.power_control=fractional; otherwise unchanged)."""
    population = with_power_control(scenario, world.population, world.cell)
    return dataclasses.replace(world, scenario=scenario, population=population)


def evaluate_on(engine_class, world, scenario, rounds: int, quantile: float) -> dict:
    """evaluate's figures from CommonDrawsEngine or SimpyCommonDraws."""
    engine = engine_class(with_scenario(world, scenario))
    aim_policy(engine, world.scenario.round.deadline_s)
    pop, n_cells = world.population, world.topology.n_cells
    n_classes = len(pop.class_names)
    durations, device_energy, client_times = [], [], []
    airtime = np.zeros(n_cells)
    class_energy, class_participations = np.zeros(n_classes), np.zeros(n_classes)
    energy_rounds, kinds_j = [], dict.fromkeys(ENERGY_KINDS, 0.0)
    selected = 0

    def collect(row: dict) -> None:
        nonlocal selected
        clients = engine.last_clients
        start_s = row["sim_time_start_s"]
        durations.append(row["sim_time_end_s"] - start_s)
        arrived = clients.outcome == "arrived"
        client_times.extend((clients.end_s[arrived] - start_s).tolist())
        selected += len(clients.client)
        energy_rounds.append(row["energy_total_j"])
        add_kinds(kinds_j, row)
        # with radio states: every client's energy in the row (tails settled at its end,
        # of clients outside the round too); else the selected clients' is all of it
        every = clients.spent_j
        spent = clients.energy_total_j if every is None else every[clients.client]
        device_energy.extend(spent.tolist())
        airtime[:] += np.bincount(clients.cell, clients.uplink_airtime_s, minlength=n_cells)
        classes = pop.class_index[clients.client]
        if every is not None:
            class_energy[:] += np.bincount(pop.class_index, every, minlength=n_classes)
        else:
            class_energy[:] += np.bincount(classes, spent, minlength=n_classes)
        class_participations[:] += np.bincount(classes, minlength=n_classes)

    if isinstance(engine, SimpyCommonDraws):
        engine.run_rounds(rounds, collect)
    else:
        engine.run(rounds, collect)
    lists = (durations, client_times, device_energy, energy_rounds, selected, kinds_j)
    figures = figures_of(scenario, world, rounds, quantile, engine.sim_time_s, lists, airtime, (
        class_energy, class_participations))  # fmt: skip
    return {**figures, "engine": "simpy" if isinstance(engine, SimpyCommonDraws) else "numpy"}


def aim_policy(engine, deadline_s: float | None) -> None:
    """A candidate runs without a round deadline (variant), yet the policy's deadline
    allocators (steps, frequency, min-energy) aim at the scenario's round.deadline_s."""
    step = engine.policy_step
    if step is None or deadline_s is None:
        return
    scenario = step.world.scenario
    rounds = scenario.round.model_copy(update={"deadline_s": deadline_s})
    aimed = scenario.model_copy(update={"round": rounds})
    step.world = dataclasses.replace(step.world, scenario=aimed)


def add_kinds(kinds_j: dict, row: dict) -> None:
    """Add a round's energy per kind (a kind the row lacks is 0: the end-of-run tail is
    in the last row only)."""
    for name in kinds_j:
        kinds_j[name] += row.get(name, 0.0)


def evaluate_protocol(world: SystemWorld, scenario: Scenario, rounds: int, quantile: float):
    """evaluate's figures from the SimPy engine without training, for a protocol: per
    server version its duration, per client update its time from dispatch to arrival
    and its energy (simulator/protocols/)."""
    sim = SimpySystemSimulation(with_scenario(world, scenario))
    aim_policy(sim, world.scenario.round.deadline_s)
    pop, n_cells = world.population, world.topology.n_cells
    n_classes = len(pop.class_names)
    durations, device_energy, client_times, energy_rounds = [], [], [], []
    airtime = np.zeros(n_cells)
    class_energy, class_participations = np.zeros(n_classes), np.zeros(n_classes)
    kinds_j = dict.fromkeys(ENERGY_KINDS, 0.0)
    selected = 0

    def collect(row: dict) -> None:
        nonlocal selected
        durations.append(row["sim_time_end_s"] - row["sim_time_start_s"])
        energy_rounds.append(row["energy_total_j"])
        add_kinds(kinds_j, row)
        for rec in sim.last_records:
            selected += 1
            if rec.outcome == "arrived":
                client_times.append(rec.end_s - rec.spans[0][1])  # from its dispatch
            device_energy.append(rec.energy_total_j)
            airtime[rec.cell] += rec.uplink_airtime_s
            c = pop.class_index[rec.client]
            class_energy[c] += rec.energy_total_j
            class_participations[c] += 1

    sim.run(rounds, collect)
    lists = (durations, client_times, device_energy, energy_rounds, selected, kinds_j)
    return figures_of(scenario, world, rounds, quantile, sim.progress.sim_time_s, lists, airtime, (
        class_energy, class_participations))  # fmt: skip


def figures_of(scenario, world, rounds, quantile, sim_time_s, lists, airtime, classes) -> dict:
    """The capacity figures from what a run collected."""
    durations, client_times, device_energy, energy_rounds, selected, kinds_j = lists
    class_energy, class_participations = classes
    pop = world.population
    n_classes = len(pop.class_names)
    class_size = np.bincount(pop.class_index, minlength=n_classes)
    capacity_j = np.bincount(pop.class_index, pop.battery_capacity_j, minlength=n_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        # drain per day = energy per device x (day / simulated time)
        drain_j_per_day = class_energy / class_size * (DAY_S / sim_time_s)
        per_class = {
            name: {  # None where undefined: a class that never took part (0 / 0)
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

    def q_of(values: list) -> float | None:
        return finite_or_none(float(np.quantile(values, quantile))) if values else None

    return {
        "clients_per_round": scenario.training.clients_per_round,
        "uplink_bandwidth_hz": scenario.channel.uplink_bandwidth_hz,
        **concurrency_of(scenario),
        "client_time_s": q_of(client_times),
        "round_time_s": q_of(durations),
        "mean_round_time_s": finite_or_none(float(np.mean(durations))),
        "rounds_per_hour": finite_or_none(3600.0 * rounds / sim_time_s) if sim_time_s else None,
        "arrived_fraction": len(client_times) / selected if selected else None,
        "rounds": rounds,
        "arrivals": len(client_times),
        "device_energy_j": q_of(device_energy),
        "energy_per_round_j": finite_or_none(float(np.mean(energy_rounds))),
        # the rows' energy per kind, per round (energy_per_round_j sums all but the
        # end-of-run tail kept separate, energy.end_of_run_tail)
        "energy_per_round_by_kind_j": {k: v / rounds for k, v in kinds_j.items()},
        "uplink_airtime_per_round_s": [finite_or_none(a) for a in airtime / rounds],
        "per_class": per_class,
    }


# ---------------------------------------------------------------------------- candidates
def concurrency_of(scenario: Scenario) -> dict:
    """{"concurrency": its value} for async and buffered, else {}."""
    protocol = scenario.protocol
    if protocol.kind not in ("async", "buffered"):
        return {}
    return {"concurrency": protocol.concurrency or scenario.training.clients_per_round}


def m_grid(n_clients: int) -> list[int]:
    """Every m up to FULL_SCAN_UP_TO clients, else GRID_POINTS geometric steps 1..N."""
    if n_clients <= FULL_SCAN_UP_TO:
        return list(range(1, n_clients + 1))
    grid = np.round(np.geomspace(1, n_clients, GRID_POINTS)).astype(int)
    return sorted(set(grid.tolist()))


def bandwidth_grid(low_hz: float, high_hz: float) -> list[float]:
    """BANDWIDTH_POINTS_PER_DECADE geometric steps from low_hz to high_hz."""
    steps = max(1, math.ceil(BANDWIDTH_POINTS_PER_DECADE * math.log10(high_hz / low_hz)))
    return [float(b) for b in np.geomspace(low_hz, high_hz, steps + 1)]


@dataclasses.dataclass
class SeedPlan:
    """One seed's world and its evaluated candidates (value -> figures)."""

    seed: int
    scenario: Scenario
    world: SystemWorld
    figures: dict = dataclasses.field(default_factory=dict)
    bisected: bool = False  # a gap was bisected (monotonicity assumed inside it)


def answer_of(figures: dict, search: str):
    """The largest m (smallest B) among the candidates meeting the limits."""
    meeting = [v for v, f in figures.items() if f["meets"]]
    if not meeting:
        return None
    return max(meeting) if search in LARGEST else min(meeting)


def non_monotone(figures: dict, search: str, answer) -> list[dict]:
    """Runs of candidates failing the limits on the easy side of the answer (m below it,
    B above it), as {"from", "to"}: where 'feasibility falls as m grows' does not hold."""
    if answer is None:
        return []
    values = sorted(figures)
    if search in LARGEST:
        easy = [v for v in values if v < answer]
    else:
        easy = [v for v in values if v > answer]
    regions, run = [], []
    for v in easy:
        if not figures[v]["meets"]:
            run.append(v)
        elif run:
            regions.append({"from": run[0], "to": run[-1]})
            run = []
    if run:
        regions.append({"from": run[0], "to": run[-1]})
    return regions


# ---------------------------------------------------------------------------- the plan
def plan_capacity(
    scenario: Scenario,
    world: SystemWorld | None = None,
    *,
    search: str = "clients_per_round",
    deadline_s: float | None = None,
    energy_budget_j: float | None = None,
    rounds: int | None = None,
    quantile: float = DEFAULT_QUANTILE,
    over: str = "clients",
    seeds: list[int] | None = None,
    bandwidth_range_hz: tuple[float, float] = (1e3, 1e10),
    on_step: Callable[[dict], None] | None = None,
) -> dict:
    """The capacity figures of the scenario, and the search's answer: the largest m (or the
    smallest B, to 0.1 %) whose time statistic (`over` clients: client_time_s, rounds:
    round_time_s) is within `deadline_s` and whose device_energy_j is within
    `energy_budget_j`, both at `quantile`. `rounds` None: default_rounds per candidate.
    `seeds`: one plan per seed (the scenario with that seed, its own world); `world` is
    used for the scenario's own seed when given."""
    check_options(search, over, quantile, rounds, deadline_s, energy_budget_j)
    deadline_s = scenario.round.deadline_s if deadline_s is None else deadline_s
    if search != "none" and deadline_s is None and energy_budget_j is None:
        raise FedjouleError(
            f"--search {search} needs a limit: --deadline-s (or round.deadline_s in the "
            "scenario) and/or --energy-budget-j"
        )
    if search == "concurrency" and scenario.protocol.kind not in ("async", "buffered"):
        raise FedjouleError(
            f"--search concurrency needs protocol.kind async or buffered (the scenario has "
            f"{scenario.protocol.kind})"
        )
    plans = []
    for seed in seeds if seeds is not None else [scenario.seed]:
        seeded = scenario.model_copy(update={"seed": seed})
        own = world if world is not None and seed == world.scenario.seed else None
        plans.append(SeedPlan(seed, seeded, own or build_system_world(seeded)))
    limits = Limits(TIME_FIELD[over], deadline_s, energy_budget_j)
    run = Candidates(search, quantile, over, rounds, limits, on_step).figures
    own_value = searched_value(scenario, search)
    for plan in plans:
        run(plan, own_value)  # the scenario's own figures
        if search in LARGEST:
            scan(plan, m_grid(plan.world.population.size), run, larger_is_harder=True)
            refine_m(plan, run)
        elif search == "uplink_bandwidth_hz":
            grid = bandwidth_grid(*bandwidth_range_hz)
            scan(plan, grid[::-1], run, larger_is_harder=False)
            refine_bandwidth(plan, run)
    if search != "none":  # every candidate on every seed: per-candidate statistics
        union = sorted(set().union(*(p.figures for p in plans)))
        for plan in plans:
            for value in union:
                run(plan, value)
    meets = limits.met
    settings = plan_settings(search, deadline_s, energy_budget_j, quantile, over, rounds, seeds)
    plan = assemble(plans, search, own_value, meets, settings)
    return {**plan, **engine_notice(scenario, [f for p in plans for f in p.figures.values()])}


def check_options(search, over, quantile, rounds, deadline_s, energy_budget_j) -> None:
    """capacity's options, each refused with its allowed values."""
    if search not in SEARCHES:
        raise FedjouleError(f"--search {search!r}: allowed: {', '.join(SEARCHES)}")
    if over not in OVER:
        raise FedjouleError(f"--over {over!r}: allowed: {', '.join(OVER)}")
    if not 0 < quantile <= 1:
        raise FedjouleError(f"--quantile {quantile}: must be in (0, 1]")
    if rounds is not None and rounds < 1:
        raise FedjouleError(f"--rounds {rounds}: must be at least 1")
    for option, limit in (("--deadline-s", deadline_s), ("--energy-budget-j", energy_budget_j)):
        if limit is not None and not (math.isfinite(limit) and limit > 0):
            raise FedjouleError(
                f"{option} {limit}: a limit must be a positive finite number (leave it out "
                "for no limit)"
            )


def searched_value(scenario: Scenario, search: str):
    """The scenario's own value of the searched quantity."""
    if search == "uplink_bandwidth_hz":
        return float(scenario.channel.uplink_bandwidth_hz)
    if search == "concurrency":
        return int(concurrency_of(scenario)["concurrency"])
    return int(scenario.training.clients_per_round)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a candidate must meet: its time statistic within the deadline, its device
    energy within the budget (None: no limit)."""

    time_field: str
    deadline_s: float | None
    energy_budget_j: float | None

    def met(self, f: dict) -> bool:
        def within(value, limit) -> bool:
            return limit is None or (value is not None and value <= limit)

        return within(f[self.time_field], self.deadline_s) and within(
            f["device_energy_j"], self.energy_budget_j
        )


@dataclasses.dataclass(frozen=True)
class Candidates:
    """A candidate value's figures on a seed's plan, computed once (plan.figures)."""

    search: str
    quantile: float
    over: str
    rounds: int | None
    limits: Limits
    on_step: Callable[[dict], None] | None

    def figures(self, plan: SeedPlan, value) -> dict:
        if value not in plan.figures:
            key = {"uplink_bandwidth_hz": "bandwidth_hz", "concurrency": "concurrency"}.get(
                self.search, "clients_per_round"
            )
            candidate = variant(plan.scenario, **{key: value})
            m = candidate.training.clients_per_round
            r = default_rounds(self.quantile, self.over, m) if self.rounds is None else self.rounds
            # its run is r rounds: the radio tails still running after them follow
            # energy.end_of_run_tail (so the rows' energy is the same on both engines)
            training = candidate.training.model_copy(update={"rounds": r})
            candidate = candidate.model_copy(update={"training": training})
            figures = evaluate(plan.world, candidate, r, self.quantile)
            observations = figures["arrivals"] if self.over == "clients" else r
            figures["tail_observations"] = math.floor(
                round((1 - self.quantile) * observations, 9)
            )
            figures["meets"] = self.limits.met(figures)
            plan.figures[value] = figures
            if self.on_step:
                self.on_step({"seed": plan.seed, **figures})
        return plan.figures[value]


def engine_notice(scenario: Scenario, figures: list[dict]) -> dict:
    """capacity.json's `engine` (numpy, simpy, or numpy+simpy when some candidates were
    played again on the SimPy engine) and `engine_notice` (why the SimPy engine, printed
    by the command; None on the numpy engine alone)."""
    engine, reasons = engine_of(scenario)
    if reasons:
        notice = (
            "the candidates play on the SimPy engine without training (slower): the numpy "
            "engine does not model " + "; ".join(reasons)
        )
        return {"engine": engine, "engine_notice": notice}
    again = sum(f["engine"] == "simpy" for f in figures)
    if not again:
        return {"engine": "numpy", "engine_notice": None}
    notice = (
        f"{again} of {len(figures)} candidates played on the SimPy engine without training: "
        "a client with radio states could reach its battery threshold, a stop the numpy "
        "engine does not place"
    )
    return {"engine": "numpy+simpy", "engine_notice": notice}


def scan(plan: SeedPlan, values: list, run, larger_is_harder: bool) -> None:
    """Evaluate `values` from the easy end; past LOOKAHEAD_FACTOR times the best candidate
    so far (1 / factor for B), stop after LOOKAHEAD_FAILURES failures in a row."""
    best, failures = None, 0
    for value in values:
        if run(plan, value)["meets"]:
            best, failures = value, 0
            continue
        failures += 1
        reference = best if best is not None else values[0]
        beyond = (
            value >= LOOKAHEAD_FACTOR * reference
            if larger_is_harder
            else value <= reference / LOOKAHEAD_FACTOR
        )
        if beyond and failures >= LOOKAHEAD_FAILURES:
            return


def refine_m(plan: SeedPlan, run) -> None:
    """Between the largest m meeting and the next candidate above it (failing): every m
    when the gap holds at most GAP_SCAN_MAX, else bisection."""
    best = answer_of(plan.figures, "clients_per_round")
    above = [v for v in plan.figures if best is not None and v > best]
    if not above:
        return
    low, high = best, min(above)
    if high - low - 1 <= GAP_SCAN_MAX:
        for m in range(low + 1, high):
            run(plan, m)
        return
    plan.bisected = True
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if run(plan, mid)["meets"] else (low, mid)


def refine_bandwidth(plan: SeedPlan, run) -> None:
    """Between the smallest B meeting and the next candidate below it (failing): bisection
    on log B to 0.1 %."""
    best = answer_of(plan.figures, "uplink_bandwidth_hz")
    below = [v for v in plan.figures if best is not None and v < best]
    if not below:
        return
    low, high = max(below), best
    plan.bisected = True
    while high / low > 1.001:
        mid = math.sqrt(low * high)
        low, high = (low, mid) if run(plan, mid)["meets"] else (mid, high)


def plan_settings(search, deadline_s, energy_budget_j, quantile, over, rounds, seeds) -> dict:
    """The plan's settings as capacity.json states them."""
    return {
        "search": search,
        "deadline_s": deadline_s,
        "energy_budget_j": energy_budget_j,
        "quantile": quantile,
        "over": over,
        "time_statistic": TIME_FIELD[over],
        "rounds": rounds,  # None: default_rounds per candidate
        "seeds": seeds,
    }


def mean_figures(figures: list[dict], seed_stats: dict) -> dict:
    """The seed mean of figures dicts (per cell, per class too); `<field>_ci95` beside each
    SEED_FIELDS figure, taken from `seed_stats` (aggregate_rows of SEED_FIELDS)."""
    first = figures[0]
    out = {}
    for key, value in first.items():
        if key in ("clients_per_round", "uplink_bandwidth_hz", "concurrency", "rounds"):
            out[key] = value
        elif key == "uplink_airtime_per_round_s":
            out[key] = [describe(f[key][c] for f in figures)["mean"] for c in range(len(value))]
        elif key == "energy_per_round_by_kind_j":
            out[key] = {k: describe(f[key][k] for f in figures)["mean"] for k in value}
        elif key == "per_class":
            out[key] = {
                name: {k: describe(f[key][name][k] for f in figures)["mean"] for k in fields}
                for name, fields in value.items()
            }
        elif key in SEED_FIELDS:
            out[key], out[f"{key}_ci95"] = seed_stats[f"{key}_mean"], seed_stats[f"{key}_ci95"]
    return out


def assemble(plans: list[SeedPlan], search: str, own_value, meets, settings: dict) -> dict:
    """capacity.json: settings, the answer (of the seed, or of the seed-mean statistic), the
    answer per seed with its mean, std and 95 % CI, non-monotone regions, the scenario's
    and the answer's figures, and every evaluation."""
    per_seed = []
    for plan in plans:
        answer = answer_of(plan.figures, search) if search != "none" else None
        per_seed.append({
            "seed": plan.seed,
            "answer": answer,
            "non_monotone": non_monotone(plan.figures, search, answer),
            "bisected": plan.bisected,
        })  # fmt: skip
    summary = describe(s["answer"] for s in per_seed)
    values = sorted(plans[0].figures)
    if len(plans) == 1:
        table = plans[0].figures
        evaluations = [table[v] for v in values]
        candidates = None
    else:  # per candidate: the seed mean (meets judged on it), ci95, std, n
        table = {}
        candidates = []
        for v in values:
            rows = [p.figures[v] for p in plans]
            seed_stats = aggregate_rows(rows, SEED_FIELDS)
            figures = mean_figures(rows, seed_stats)
            figures["meets"] = meets(figures)
            figures["meets_fraction"] = sum(r["meets"] for r in rows) / len(rows)
            table[v] = figures
            candidates.append({
                "clients_per_round": figures["clients_per_round"],
                "uplink_bandwidth_hz": figures["uplink_bandwidth_hz"],
                **({"concurrency": figures["concurrency"]} if "concurrency" in figures else {}),
                "rounds": figures["rounds"],
                "seeds": len(rows),
                **seed_stats,
                "meets_fraction": figures["meets_fraction"],
                "meets": figures["meets"],
            })  # fmt: skip
        evaluations = [{"seed": p.seed, **p.figures[v]} for p in plans for v in values]
    answer = answer_of(table, search) if search != "none" else None
    return {
        **settings,
        "answer": answer,
        "non_monotone": non_monotone(table, search, answer),
        "answers": per_seed,
        **{f"answer_{k}": v for k, v in summary.items()},
        "scenario": table[own_value],
        "at_answer": table[answer] if answer is not None else None,
        "candidates": candidates,
        "evaluations": evaluations,
    }
