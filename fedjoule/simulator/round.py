"""The round kernel: one round's steps and their sequence, written once (docs/round.md).

A round is these named steps, each a method of `RoundSteps` (shared by both engines) or
of the engine (`RoundKernel` on SimPy, system.SystemEngine on numpy arrays):

1. online    - who is online now and above its battery threshold (`online_clients`)
2. select    - the round's clients among them (`select`: a uniform draw, or the scenario's
               policy.select; `who_takes_part` does 1 and 2)
3. allocate  - what each selected client is given: the scenario's band share, transmit
               power, CPU frequency and local steps, or what its policy decides
               (`allocate`, an `Allocation`; policy_step.py, docs/policies.md)
4. train     - the selected clients' local steps, in one executor call (`train`; none
               without learning)
5. transfer  - their downlink, compute, uplink on the shared media, until every one
               arrived or was stopped (`transfer`: SimPy processes, or numpy arrays)
6. aggregate - the uploads that arrived into the model (`aggregate`; fewer than
               round.min_clients: a failed round), then the algorithm's probe (`probe_step`)
7. close the row - ledger, batteries, radio tails, charging, the rounds.csv row (`close_row`)
8. evaluate  - the model on the test set when due; divergence (the learning engine's
               `finish_round`, simulator/engine.py)
9. finish    - the running totals, the tails up to the next round (`finish_round`)

`RoundSteps.sync_round` is steps 1-7 for a synchronous round, written once for both
engines over a clock: SimPy's environment (`RoundKernel.play_round`) or, for the numpy
system engine (system.py), a `Clock` whose timeouts move time on at once. Both engines
call the same open_round, select (round_rules.select_clients), allocate (Allocation) and
client_round; each plays step 1 over its availability model, step 5 (`transfer`: SimPy
processes, or the clients' timelines solved in arrays) and step 7 (`close_row`: the
ledger, batteries and the row's counts and totals from per-client arrays, round_row.py;
the radio tails and charging each its own way). `run` is the loop over rounds. Steps
3-5 with the kept client state make `client_round`, which a hierarchical edge server
plays with its own model (protocols/hierarchical_server.py); the async and buffered
server dispatches with steps 1-4 and the clients' processes, and closes each
version's row with step 7 (protocols/asynchronous_server.py). The learning engine
(simulator/engine.py) fills steps 4, 6 and 8; the SimPy system engine (system_simpy.py)
and the replay of recorded sets (planning/replay.py) run the kernel as it is, the replay
with its recorded sets as step 2.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from fedjoule.algorithms.work import local_work
from fedjoule.devices.battery import charge, eligible_mask
from fedjoule.devices.frequency import clients_step_at
from fedjoule.energy_kinds import END_OF_RUN_TAIL, with_total
from fedjoule.simulator import decisions
from fedjoule.simulator.checkpoint import Progress
from fedjoule.simulator.client import ClientRecord, _span
from fedjoule.simulator.policy_step import make_policy_step
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.round_row import ClientsOfRound, book_clients, row_columns
from fedjoule.simulator.round_rules import (
    LEDGER_FIELDS,
    PROBE_LOSS_BITS,
    arrivals_kept,
    round_lr,
    select_clients,
)
from fedjoule.simulator.transfers import play_clients


@dataclass
class Allocation:
    """Step 3: what the round gives its selected clients. Today the scenario's fixed values:
    each client's local steps (world.client_steps), its band share on the cell's shared
    medium, its transmit power and CPU frequency (the population's); `keep`: the arrivals
    the server waits for (over-commit stops the rest)."""

    clients: np.ndarray
    local_steps: np.ndarray
    keep: int
    # a policy's decisions (issue 29; None: the scenario's value, as today): each client's
    # fixed share of its cell's uplink band (FDMA; sum over a cell <= 1) and its CPU
    # frequency in Hz (within its class's DVFS range)
    band_share: np.ndarray | None = None
    cpu_freq_hz: np.ndarray | None = None


@dataclass
class Played:
    """Steps 3-5 of a round: the clients' records, whether too few arrived (a failed round)
    and what they trained (engine.Trained; None without learning)."""

    records: list[ClientRecord]
    failed: bool
    trained: object = None
    allocation: Allocation | None = None  # step 3's (its decisions: simulator/decisions.py)


class Clock:
    """The numpy engine's clock for the round's sequence (RoundSteps.sync_round): a
    timeout moves `now` on at once, with SimPy's arithmetic (now + delay); the clients'
    timelines are solved in arrays, so no event waits."""

    def __init__(self, now: float) -> None:
        self.now = now

    def timeout(self, delay_s: float) -> None:
        self.now += delay_s


def run_on_clock(process):
    """Drive a round's process body on a Clock to its end; returns its value."""
    while True:
        try:
            next(process)
        except StopIteration as end:
            return end.value


class RoundSteps:
    """The steps of a round that both engines share, and the synchronous round's sequence
    (module docstring); `clock` is SimPy's environment or a Clock. An engine adds `world`,
    who is online (`online_clients`, 1), the clients' transfers (`transfer`, 5; with
    `arrivals`, the count that arrived, and `nobody`, a round without clients) and the
    row's closing (`close_row`, 7). `policy_step`: the scenario's policy (policy_step.py;
    None without one), which steps 2 and 3 follow and step 7 informs."""

    policy_step = None

    def open_round(self, clock, r: int):
        """Wait for the round's slot when rounds run on a schedule (round.interval_s), then
        start its rounds.csv row (a process body, used with `yield from`)."""
        scenario = self.world.scenario
        if scenario.round.interval_s:
            yield clock.timeout(max(0.0, r * scenario.round.interval_s - clock.now))
        return {"round": r, "sim_time_start_s": clock.now, "lr": round_lr(scenario.training, r)}

    def selection_weights(self) -> np.ndarray | None:
        """Each client's selection weight (None: uniform); the learning engine's algorithm
        may have its own (DRFA's lambda, TACO's expelled)."""
        return None

    def select(self, candidates: np.ndarray, r: int, key=(), members=None) -> np.ndarray:
        """2. This round's clients among the candidates (stream index r, more keys `key`):
        select=random's draw (round_rules.select_clients), or the policy's selector
        (`members`: an edge server's clients, its selector's population)."""
        weights = self.selection_weights()
        policy = self.policy_step
        if policy is None or policy.policy.select == "random":
            return select_clients(candidates, self.world.scenario, r, weights, key)
        return policy.select(candidates, r, weights, key, members)

    def who_takes_part(self, time_s: float, r: int) -> tuple[np.ndarray, np.ndarray]:
        """1 and 2: the online clients and the selected ones."""
        online = self.online_clients(time_s, r)
        return online, self.select(online, r)

    def allocate(self, selected: np.ndarray, r: int) -> Allocation:
        """3. The scenario's fixed allocation (Allocation), with what the policy decides."""
        steps = self.world.client_steps[selected]
        allocation = Allocation(selected, steps, arrivals_kept(self.world.scenario, len(selected)))
        if self.policy_step is not None:
            self.policy_step.allocate(allocation, r)
        return allocation

    def step_costs(self, allocation: Allocation) -> tuple[np.ndarray, np.ndarray]:
        """Time (s) and energy (J) of one local step of each allocated client: at its
        allocated CPU frequency (devices/frequency.py, which refuses one outside its
        class's DVFS range), else the world's (the scenario's frequency)."""
        world, clients = self.world, allocation.clients
        if allocation.cpu_freq_hz is None:
            return world.step_time_s[clients], world.step_energy_j[clients]
        scenario = world.scenario
        return clients_step_at(
            scenario.population, world.population, world.forward_flops,
            scenario.training.batch_size, clients, allocation.cpu_freq_hz,
        )  # fmt: skip

    def train(self, model, allocation: Allocation, r: int, lr: float):
        """4. Local training from `model` (None here: nothing is trained)."""
        return None

    def keep(self, trained, records) -> None:
        """After 5: the clients' own state of what they trained (none here)."""

    def client_round(self, clock, r: int, selected, lr: float, model=None, backhaul=True):
        """Steps 3-5 for the selected clients from `model`, and the kept client state;
        returns Played (a process body)."""
        allocation = self.allocate(selected, r)
        trained = self.train(model, allocation, r, lr)
        start_s = clock.now
        records = yield from self.transfer(clock, r, allocation, backhaul)
        self.record_decisions(allocation, records, start_s)
        arrived = self.arrivals(records)
        self.keep(trained, records)
        failed = arrived < self.world.scenario.round.min_clients
        return Played(records, failed, trained, allocation)

    def record_decisions(self, allocation: Allocation, records, start_s: float) -> dict:
        """After 5: what a policy decided in `allocation` (decisions.decided) into the
        ledger's per-client sums, for clients.csv's means; returns the decided values."""
        world = self.world
        steps_policy = decisions.steps_policy(world.scenario)
        values = decisions.decided(allocation, world.client_steps, steps_policy)
        if values:
            decisions.book(self.ledger, allocation.clients, values)
        return values

    def model(self):
        """What the round trains from (None: nothing)."""
        return None

    def aggregate(self, played: Played, row: dict) -> None:
        """6. The arrived uploads into the model (nothing here)."""

    def probe_step(self, clock, r: int, played: Played, row: dict):
        """6, after the aggregation: the algorithm's second set of clients (none here);
        returns their records (a process body)."""
        return []
        yield  # a generator

    def server_compute_time_s(self, arrived: int, failed: bool) -> float:
        """The server's aggregation of `arrived` uploads: its FLOPs (the algorithm's
        aggregation_flops) at round.server_flops_per_s; 0 in a failed round (none)."""
        if failed:
            return 0.0
        flops = self.world.algorithm_cls.aggregation_flops(self.world.n_params, arrived)
        return flops / self.world.scenario.round.server_flops_per_s

    def finish_row(self, row, end_s, failed, taking_part, spent, tails_j, measure=True):
        """The end of step 7 on both engines: the row's counts and totals (round_row.py),
        the server's aggregation time, the radio tails charged, what a policy's server
        learnt (`measure` False: a protocol measured its clients as they ended)."""
        row.update(
            sim_time_end_s=end_s,
            failed=int(failed),
            **row_columns(taking_part, spent, self.world.topology.n_cells),
        )
        row["server_compute_time_s"] = self.server_compute_time_s(row["arrived"], failed)
        row["energy_radio_tail_j"] += tails_j
        if self.policy_step is not None:
            self.policy_step.record(row, taking_part, self.battery_j, measure)
        return with_total(row)

    def sync_round(self, clock, r: int):
        """Steps 1-7 of a synchronous round from clock.now (a process body); returns its
        rounds.csv row."""
        scenario = self.world.scenario
        row = yield from self.open_round(clock, r)
        online, selected = self.who_takes_part(row["sim_time_start_s"], r)
        row.update(online=len(online), selected=len(selected))
        if len(selected) == 0:  # nobody to train: the server waits and tries again
            yield clock.timeout(scenario.round.idle_wait_s)
            return self.close_row(row, clock.now, self.nobody(), failed=True)
        played = yield from self.client_round(clock, r, selected, row["lr"], self.model())
        if not played.failed:
            self.aggregate(played, row)
        probe_records = yield from self.probe_step(clock, r, played, row)
        if scenario.round.server_time_s:
            yield clock.timeout(scenario.round.server_time_s)
        return self.close_row(row, clock.now, played.records, played.failed, probe_records)


class RoundKernel(RoundSteps):
    """A run between rounds on the SimPy clock, without learning: ledger, batteries,
    radios, progress; the clients' SimPy processes and the row's closing (steps 1, 5, 7).
    The learning engine adds the model."""

    learns = False  # True: a model is trained (engine.Simulation)
    divergence_cause: str | None = None  # what a round marked diverged found NaN/inf
    protocol = None  # protocols/: None for sync rounds

    def __init__(self, world) -> None:
        self.world = world
        n = world.population.size
        self.ledger = {name: np.zeros(n) for name in LEDGER_FIELDS}
        self.battery_j = world.population.battery_initial_j.copy()
        self.radios = RadioBank.for_world(world)  # each client's radio tail, across rounds
        self.progress = Progress()
        self.last_records: list[ClientRecord] = []
        self.outside_records: list[ClientRecord] = []
        # channel.interference=cochannel: each client's upload SINRs (dB), for clients.csv
        self.sinr_db: dict[int, list[float]] = {}
        self.policy_step = make_policy_step(self)  # None without a policy

    # ------------------------------------------------------------------ the steps
    def online_clients(self, time_s: float, r: int) -> np.ndarray:
        """1. Clients online now, with battery above their threshold (or charging)."""
        world = self.world
        online = world.availability.online_mask(time_s, r)
        online &= eligible_mask(self.battery_j, world.population, world.availability, time_s)
        return np.flatnonzero(online)

    def transfer(self, env: simpy.Environment, r: int, allocation: Allocation, backhaul=True):
        """5. The clients' processes from now on, each computing its allocated local steps
        at its allocated CPU frequency and sending on its allocated band share (none: the
        cell's shared medium); returns their records (process body)."""
        records = yield from play_clients(
            env, self, r, env.now, allocation.clients, allocation.keep,
            self.allocated_costs(allocation), backhaul=backhaul,
            band_share=allocation.band_share,
        )  # fmt: skip
        return records

    def allocated_costs(self, allocation: Allocation) -> Callable[[int], dict]:
        """costs(k): allocated client k's training_costs at its allocated local steps and
        step costs (step_costs: at its allocated CPU frequency)."""
        clients = allocation.clients.tolist()
        steps = dict(zip(clients, allocation.local_steps.tolist(), strict=True))
        step = dict(zip(clients, zip(*self.step_costs(allocation), strict=True), strict=True))
        return lambda k: self.training_costs(k, steps[k], step[k])

    def arrivals(self, records: list[ClientRecord]) -> int:
        """After 5: how many uploads arrived."""
        return sum(rec.outcome == "arrived" for rec in records)

    def record_decisions(self, allocation: Allocation, records, start_s: float) -> dict:
        """RoundSteps.record_decisions, and each decided client's values on its record,
        for its `decision` line in events.jsonl (at start_s, the allocation's instant)."""
        values = super().record_decisions(allocation, records, start_s)
        if values:
            index = {int(k): i for i, k in enumerate(allocation.clients)}
            for rec in records:
                decided = decisions.line_values(values, index[rec.client])
                rec.decision = {"start_s": start_s, **decided}
        return values

    def nobody(self) -> list[ClientRecord]:
        """The records of a round nobody takes part in."""
        return []

    def probe_transfer(self, env: simpy.Environment, r: int, clients: np.ndarray):
        """5 for the algorithm's loss probe: the probe model down, one forward pass, the
        loss up (probe_costs), every client awaited; returns their records (process body)."""
        records = yield from play_clients(
            env, self, r, env.now, clients, len(clients), self.probe_costs
        )
        return records

    def play_round(self, env: simpy.Environment, r: int):
        """One round in simulated time (a SimPy process body); returns its rounds.csv row."""
        if self.protocol is not None:  # hierarchical: a cloud round
            return (yield from self.protocol.play_round(env, r))
        return (yield from self.sync_round(env, r))

    # ------------------------------------------------------------------ the clients' costs
    def probe_costs(self, k: int) -> dict:
        """Client k's bits and computation in the loss probe: the probe model down, one
        forward pass (about a third of a training step), the loss up."""
        world, channel = self.world, self.world.scenario.channel
        return {
            "down_bits": world.n_params * channel.bits_per_param + channel.header_bits,  # raw
            "compute_s": float(world.step_time_s[k]) / 3,
            "compute_energy_j": float(world.step_energy_j[k]) / 3,
            "up_bits": channel.header_bits + PROBE_LOSS_BITS,
        }

    def training_costs(self, k: int, steps: int | None = None, step=None) -> dict:
        """Client k's bits and computation in a training round of `steps` local steps (None:
        its scenario's, world.client_steps), each costing `step` (time s, energy J; None:
        the world's, step_costs); freeloaders compute nothing."""
        world = self.world
        work = 0 if world.freeloader[k] else self.local_work(k, steps)
        step_s, step_j = (world.step_time_s[k], world.step_energy_j[k]) if step is None else step
        return {
            "down_bits": world.downlink_bits,
            "compute_s": work * float(step_s),
            "compute_energy_j": work * float(step_j),
            "up_bits": world.uplink_bits,
        }

    def local_work(self, k: int, steps: int | None = None) -> float:
        """Client k's computation this round in plain SGD steps: its `steps` (None: its
        scenario's) counted gradient evaluations plus their vector FLOPs
        (algorithms/work.py; FedAvg: its steps)."""
        steps = int(self.world.client_steps[k] if steps is None else steps)
        return float(local_work(self.step_gradients, steps, self.world.vector_work))

    # ------------------------------------------------------------------ bookkeeping
    def close_row(
        self,
        row: dict,
        end_s: float,
        records: list[ClientRecord],
        failed: bool,
        probe_records: list[ClientRecord] = (),
    ):
        """Close the row: per-client energy into the ledger and batteries; round totals.
        Participation counts come from the training set; energy and airtime from the
        training and the probe set."""
        self.last_records = [*records, *probe_records]  # for events.jsonl and the timeline
        self.outside_records = []  # clients outside the round whose radio tails it charges
        world = self.world
        taking_part = ClientsOfRound.from_records(records)
        threshold_j = world.population.battery_threshold_j
        book_clients(self.ledger, self.battery_j, threshold_j, taking_part)
        spent = taking_part
        if probe_records:  # after the training set's, as the probe came after it
            probed = ClientsOfRound.from_records(probe_records)
            book_clients(self.ledger, self.battery_j, threshold_j, probed, count=False)
            spent = ClientsOfRound.from_records([*records, *probe_records])
        for rec in self.last_records:
            if rec.uplink_sinr:  # time-mean SINR of each transmission, in dB
                self.sinr_db.setdefault(rec.client, []).extend(
                    10 * math.log10(s) for s in rec.uplink_sinr
                )
        # radio tails running outside the clients' processes, up to the round's end
        tails_j = self.charge_tails(self.radios.settle(end_s))
        self.radios.ranges.add_records(self.last_records, self.radios.class_index)
        # charging since the previous round ended (the wait between rounds included)
        charge(
            self.battery_j, world.population, world.availability, self.progress.sim_time_s, end_s
        )
        # a protocol's server measures its clients as they end (PolicyStep.measure)
        measure = self.protocol is None
        return self.finish_row(row, end_s, failed, taking_part, spent, tails_j, measure)

    def charge_tails(self, tails, field: str = "energy_radio_tail_j", kind: str = "tail") -> float:
        """Charge radio-tail stretches (client, start_s, end_s, energy_j), from
        RadioBank.settle, to the ledger's `field` and the batteries, each as a `kind` span
        (events.jsonl) of the client's record in this round, or of an "outside" record for
        a client not in it. Returns their energy."""
        records = {rec.client: rec for rec in [*self.last_records, *self.outside_records]}
        total = 0.0
        for k, start_s, end_s, energy_j in tails:
            self.ledger[field][k] += energy_j
            self.battery_j[k] = max(0.0, self.battery_j[k] - energy_j)
            total += energy_j
            if k not in records:
                serving = self.world.cell.serving_cell
                cell = 0 if serving is None else int(serving[k])
                records[k] = ClientRecord(k, outcome="outside", cell=cell)
                self.outside_records.append(records[k])
            _span(records[k], kind, start_s, end_s, energy_j)
        return total

    def settle_between_rounds(self, row: dict) -> None:
        """The radio tails after a round's end (radio_states.py): up to the next round's
        start, r+1 x round.interval_s, charged to this row (a tail ending in the gap is
        charged whole to the round it started in, whether or not its client is selected
        again); after the last round, the tails still running, by energy.end_of_run_tail."""
        if self.finished():
            self.settle_end_of_run(row)
            return
        interval_s = self.world.scenario.round.interval_s
        if not interval_s:
            return
        next_start_s = max((row["round"] + 1) * interval_s, row["sim_time_end_s"])
        gap_j = self.charge_tails(self.radios.settle(next_start_s))
        if gap_j:
            row["energy_radio_tail_j"] += gap_j
            with_total(row)

    def settle_end_of_run(self, row: dict) -> None:
        """The tails still running when the run ends, whole: charged to the last row's
        energy_radio_tail_j (charge), reported in energy_end_of_run_tail_j outside the
        rows' totals (separate), or not charged (drop); their energy is always recorded."""
        policy = self.world.scenario.energy.end_of_run_tail
        tails = self.radios.settle(math.inf)
        self.progress.end_of_run_tail_energy_j = float(sum(e for *_, e in tails))
        row[END_OF_RUN_TAIL] = 0.0
        if policy == "charge":
            row["energy_radio_tail_j"] += self.charge_tails(tails)
            with_total(row)
        elif policy == "separate":
            row[END_OF_RUN_TAIL] = self.charge_tails(tails, END_OF_RUN_TAIL, "end_of_run_tail")

    @property
    def event_records(self) -> list[ClientRecord]:
        """The records whose spans make the round's events.jsonl lines."""
        return [*self.last_records, *self.outside_records]

    def finish_round(self, row: dict, wall_s: float, evaluate: bool = False) -> dict:
        """9. The running summary after a round (no evaluation without a model)."""
        return self.book_row(row, wall_s)

    def book_row(self, row: dict, wall_s: float, reached: bool = False) -> dict:
        """9. The round counted: next round, the tails up to it, cumulative energy (to the
        target when `reached`), simulated and wall time; the protocol's counts."""
        p = self.progress
        p.next_round = row["round"] + 1
        self.settle_between_rounds(row)
        p.cumulative_energy_j += row["energy_total_j"]
        row["cumulative_energy_j"] = p.cumulative_energy_j
        if reached:
            p.energy_to_target_j = p.cumulative_energy_j
            p.time_to_target_s = row["sim_time_end_s"]
        p.sim_time_s = row["sim_time_end_s"]
        p.wall_time_s += wall_s
        row["wall_time_s"] = wall_s
        if self.protocol is not None:
            self.protocol.after_row(row)
        return row

    def run(self, last_round: int, on_round: Callable[[dict], bool | None]) -> None:
        """Play rounds next_round .. last_round-1 in one SimPy environment; `on_round`
        returning False ends the run after that round."""
        if self.protocol is not None and hasattr(self.protocol, "run"):  # async, buffered
            self.protocol.run(last_round, on_round)
            return
        env = simpy.Environment(initial_time=self.progress.sim_time_s)
        # run until the server is done (stale medium timers may lie beyond it)
        env.run(until=env.process(self.server(env, last_round, on_round)))

    def server(self, env: simpy.Environment, last_round: int, on_round):
        """The synchronous server: round after round until the last, the target
        (training.stop_at_target), a divergence or `on_round` returning False."""
        stop_at_target = self.world.scenario.training.stop_at_target
        for r in range(self.progress.next_round, last_round):
            if stop_at_target and self.progress.rounds_to_target is not None:
                break
            if self.progress.diverged_at_round is not None:
                break
            tic = time.perf_counter()
            row = yield env.process(self.play_round(env, r))
            if on_round(self.finish_round(row, time.perf_counter() - tic)) is False:
                break

    def add_ledger_columns(self, names) -> None:
        """Per-client counts a protocol adds to the ledger (clients.csv columns), from 0."""
        for name in names:
            self.ledger.setdefault(name, np.zeros(self.world.population.size))

    def count(self, name: str, client: int, amount: float = 1) -> None:
        """Add `amount` to client's count `name` in the ledger (add_ledger_columns)."""
        self.ledger[name][client] += amount

    def reset_system(self) -> None:
        """The system state at time 0 (ledger, batteries, radios, progress, what the policy
        knew): a protocol's replay of its timeline on resume (asynchronous_server.py)."""
        for values in self.ledger.values():
            values[:] = 0
        self.battery_j = self.world.population.battery_initial_j.copy()
        self.radios = RadioBank.for_world(self.world)
        self.progress = Progress()
        if self.policy_step is not None:
            self.policy_step.reset()

    def finished(self) -> bool:
        """All rounds played, the target reached with stop_at_target, or diverged."""
        training = self.world.scenario.training
        reached = training.stop_at_target and self.progress.rounds_to_target is not None
        diverged = self.progress.diverged_at_round is not None
        return reached or diverged or self.progress.next_round >= training.rounds
