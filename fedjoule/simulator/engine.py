"""The run: a SimPy server process plays the rounds (docs/round.md).

Each round: who is online -> selection -> all selected clients train in one vectorised
call -> per-client SimPy processes (downlink, compute, uplink on the shared medium)
until all arrived or were dropped -> aggregation of the arrivals -> ledger, evaluation,
and a row appended to rounds.csv. After every round a checkpoint is written, so an
interrupted run resumes where it stopped and produces the same files.

Divergence: when the global model holds a NaN or inf after aggregation, or an
evaluation's loss is NaN or inf, the round's row gets `diverged` = 1 (and is evaluated
whatever eval_every says), no further round is played, and the summary names the round
and the likely cause (`diverged_at_round`, `diverged_reason`).
"""

import math
import time
from collections.abc import Callable

import numpy as np
import simpy
import torch

from fedjoule import rng
from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.client_store import ClientStore
from fedjoule.algorithms.executor import minibatch_indices
from fedjoule.algorithms.learning import (
    aggregate_arrived,
    aggregate_buffers,
    fabricate,
    keep_client_state,
    model_is_finite,
    round_lr,
    train_clients,
)
from fedjoule.algorithms.work import local_work
from fedjoule.devices.battery import charge, eligible_mask
from fedjoule.energy_kinds import DEVICE_FIELDS, END_OF_RUN_TAIL, ENERGY_FIELDS, with_total
from fedjoule.errors import FedjouleError
from fedjoule.report.results import finite_or_none
from fedjoule.simulator import protocols
from fedjoule.simulator.checkpoint import Progress
from fedjoule.simulator.client import DROP_CAUSES, ClientRecord, _span
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.transfers import arrivals_kept, overcommit_count, play_clients
from fedjoule.simulator.world import World

PROBE_LOSS_BITS = 32  # the probe's uploaded loss, one float32
# Bernoulli participation redraws while nobody takes part (FedDyn/FedDC code), at most
# this many times and this many random numbers in all; past that it samples the same law
# (the draw conditioned on somebody taking part) directly: see bernoulli_participants.
BERNOULLI_REDRAWS = 10_000
BERNOULLI_DRAWS = 10_000_000
LEDGER_FIELDS = ("selected", "arrived", *DEVICE_FIELDS)
SUMMED = (*ENERGY_FIELDS, "uplink_bits", "uplink_airtime_s")


def cell_columns(records: list[ClientRecord], n_cells: int) -> dict:
    """Per-cell selected and arrived counts, ';'-joined (one number per cell)."""
    selected, arrived = np.zeros(n_cells, dtype=int), np.zeros(n_cells, dtype=int)
    for rec in records:
        selected[rec.cell] += 1
        arrived[rec.cell] += rec.outcome == "arrived"
    return {
        "selected_per_cell": ";".join(map(str, selected)),
        "arrived_per_cell": ";".join(map(str, arrived)),
    }


def select_clients(
    candidates: np.ndarray, scenario, r: int, weights: np.ndarray | None = None, key=()
) -> np.ndarray:
    """Step 2 of a round (both engines): ceil(overcommit m) clients among the candidates,
    uniformly or in proportion to `weights` over all N clients (DRFA's lambda; 0 excludes,
    as TACO's expelled); or, with bernoulli participation, each with probability p.
    `key`: more stream keys (an edge server's cell)."""
    training = scenario.training
    gen = rng.stream(scenario.seed, "selection", r, *key)
    if weights is not None:
        weights = weights[candidates]
        candidates, weights = candidates[weights > 0], weights[weights > 0]
    if len(candidates) == 0:
        return candidates
    if training.participation == "bernoulli":
        return bernoulli_participants(candidates, training.participation_prob, gen)
    m = selection_size(training.clients_per_round, scenario.round.overcommit, len(candidates))
    p = None if weights is None else weights / weights.sum()
    return np.sort(gen.choice(candidates, m, replace=False, p=p))


def selection_size(clients_per_round: int, overcommit: float, n_candidates: int) -> int:
    """min(ceil(f m), candidates), also for an infinite or huge over-commit factor f."""
    if not overcommit * clients_per_round < n_candidates:  # inf, nan or at least all
        return n_candidates
    return min(overcommit_count(clients_per_round, overcommit), n_candidates)


def bernoulli_participants(
    candidates: np.ndarray, p: float, gen: np.random.Generator
) -> np.ndarray:
    """Each candidate takes part with probability p, redrawn while nobody does (the
    FedDyn/FedDC code). The redraws are bounded: after BERNOULLI_REDRAWS draws (fewer for
    large candidate sets: BERNOULLI_DRAWS random numbers in all) the same law, the draw
    conditioned on somebody taking part, is sampled directly: the first participant from a
    geometric law truncated to the candidates, the ones after it independently with p.
    The bound is far beyond what usual settings reach (p = 0.01 over 10 candidates
    needs more than 10,000 redraws with probability e^-1000), so their draws are unchanged."""
    n = len(candidates)
    for _ in range(max(1, min(BERNOULLI_REDRAWS, BERNOULLI_DRAWS // n))):
        chosen = candidates[gen.random(n) < p]
        if len(chosen):
            return chosen
    # P(first = j | somebody) = (1-p)^j p / (1 - (1-p)^n): inverse CDF, in logs for tiny p
    log_q = math.log1p(-p) if p < 1 else -math.inf
    if log_q == -math.inf:
        first = 0
    elif log_q == 0:  # p below float resolution: the limit law, uniform
        first = int(gen.integers(n))
    else:
        u = gen.random()
        first = math.floor(math.log1p(u * math.expm1(n * log_q)) / log_q)
        first = min(max(first, 0), n - 1)
    rest = first + 1 + np.flatnonzero(gen.random(n - first - 1) < p)
    return candidates[np.concatenate([[first], rest]).astype(int)]


class Simulation:
    """The state of one run between rounds: server/algorithm state, ledger, batteries."""

    divergence_cause: str | None = None  # what a round marked diverged found NaN/inf
    protocol = None  # simulator/protocols.py: None for sync rounds

    def __init__(self, world: World, state_memory_bytes: float | None = None, spill_path=None):
        """`state_memory_bytes`: client-state rows kept in memory before spilling to
        `spill_path` (None: never spill)."""
        self.world = world
        n = world.population.size
        self.state = world.algorithm.init_state(world.w0)
        compression = world.compressor.state_names(world.algorithm) if world.compressor else ()
        self.store = ClientStore(
            world.algorithm.client_state + compression,
            world.model.n_params,
            budget_bytes=state_memory_bytes,
            spill_path=spill_path,
        )
        self.last_update = torch.zeros_like(world.w0)  # the last global update (freeloaders)
        # batch norm's running statistics: the server's (B,), and with batch_norm_stats
        # local every client's own (N, B), from the initial ones
        self.buffers = world.b0.clone()
        local = world.scenario.model.batch_norm_stats == "local" and world.b0.numel()
        self.client_buffers = world.b0.expand(n, -1).clone() if local else None
        self.ledger = {name: np.zeros(n) for name in LEDGER_FIELDS}
        self.battery_j = world.population.battery_initial_j.copy()
        self.radios = RadioBank.for_world(world)  # each client's radio tail, across rounds
        self.progress = Progress()
        self.last_records: list[ClientRecord] = []
        self.outside_records: list[ClientRecord] = []
        # channel.interference=cochannel: each client's upload SINRs (dB), for clients.csv
        self.sinr_db: dict[int, list[float]] = {}
        self.step_gradients: list[int] = []  # this round's gradient evaluations per step
        self.protocol = protocols.make(self)  # None: sync rounds

    # ------------------------------------------------------------------ the story of a round
    def open_round(self, env: simpy.Environment, r: int):
        """Wait for the round's slot when rounds run on a schedule (round.interval_s), then
        start its rounds.csv row (a SimPy process body, used with `yield from`)."""
        scenario = self.world.scenario
        if scenario.round.interval_s:
            yield env.timeout(max(0.0, r * scenario.round.interval_s - env.now))
        return {"round": r, "sim_time_start_s": env.now, "lr": round_lr(scenario.training, r)}

    def play_round(self, env: simpy.Environment, r: int):
        """One round in simulated time (a SimPy process body); returns its rounds.csv row."""
        if self.protocol is not None:  # hierarchical: a cloud round
            return (yield from self.protocol.play_round(env, r))
        world, scenario = self.world, self.world.scenario
        row = yield from self.open_round(env, r)
        start_s, lr = row["sim_time_start_s"], row["lr"]

        # 1. availability and 2. selection
        online = self.online_clients(start_s, r)
        selected = self.select(online, r)
        row.update(online=len(online), selected=len(selected))
        if len(selected) == 0:  # nobody to train: the server waits and tries again
            yield env.timeout(scenario.round.idle_wait_s)
            return self._close_row(row, env.now, [], failed=True)

        # 3. learning: every selected client's local steps in one executor call
        ids, setup, freeloaders, buffers, result = self.train_selected(self.state, selected, r, lr)

        # 4. the clients' processes: downlink, compute, uplink on the shared medium
        keep = arrivals_kept(scenario, len(selected))
        records = yield from play_clients(
            env, self, r, start_s, selected, keep, self.training_costs
        )

        # 5. aggregation of the uploads that arrived; too few arrivals: a failed round
        arrived = torch.tensor([rec.outcome == "arrived" for rec in records])
        trained = torch.tensor([rec.trained for rec in records]) & ~freeloaders
        keep_client_state(self.store, result, trained)
        if self.client_buffers is not None:
            self.client_buffers[ids[trained]] = result.buffers[trained.to(buffers.device)]
        failed = int(arrived.sum()) < scenario.round.min_clients
        if not failed:
            previous = self.state["w"]
            self.state = aggregate_arrived(world.algorithm, self.state, result, arrived)
            samples = world.algorithm.client_samples
            self.buffers = aggregate_buffers(self.buffers, result, arrived, samples)
            self.last_update = self.state["w"] - previous
            if not model_is_finite(self.state):
                row["diverged"] = 1
                self.divergence_cause = "the global model"
        probe_records = []
        if world.algorithm.needs_probe and not failed and not row.get("diverged"):
            probe_records = yield from self.probe(env, r, setup, row)
            row["probed"] = sum(rec.outcome == "arrived" for rec in probe_records)
        if scenario.round.server_time_s:
            yield env.timeout(scenario.round.server_time_s)
        return self._close_row(row, env.now, records, failed, probe_records)

    def train_selected(self, state: dict, selected: np.ndarray, r: int, lr: float):
        """Step 3: the selected clients' local steps from `state` in one executor call
        (stream index r); returns their ids, the setup, the freeloader mask, the running
        statistics they started from and the LocalResult."""
        world, training, seed = self.world, self.world.scenario.training, self.world.scenario.seed
        ids = torch.as_tensor(selected)
        steps = torch.as_tensor(world.client_steps[selected])
        # an lr or weight decay past the model's float range cannot be applied (torch
        # refuses such a scalar); the largest finite one diverges alike, and the row keeps
        # the lr asked for
        largest = float(torch.finfo(world.w0.dtype).max)
        train_lr, decay = min(lr, largest), min(training.weight_decay, largest)
        setup = RoundSetup(train_lr, steps, r, decay, training.clip_grad_norm)
        batch_idx = minibatch_indices(
            seed, r, selected, world.data.client_train, int(steps.max()), training.batch_size
        )
        freeloaders = torch.as_tensor(world.freeloader[selected])
        buffers = self.start_buffers(ids)
        result = train_clients(
            world.algorithm,
            world.executor,
            state,
            ids,
            setup,
            batch_idx,
            self.store,
            freeloaders,
            self.fabricate,
            buffers,
            world.compressor,
        )
        self.step_gradients = result.gradients.per_step  # counted: training_costs charges them
        return ids, setup, freeloaders, buffers, result

    def start_buffers(self, ids: torch.Tensor) -> torch.Tensor | None:
        """The selected clients' running statistics (m, B) at the start of training: their
        own (batch_norm_stats local) or the server's; None for a model without any."""
        if not self.buffers.numel():
            return None
        if self.client_buffers is not None:
            return self.client_buffers[ids].clone()
        return self.buffers.expand(len(ids), -1).clone()

    def buffers_or_none(self) -> torch.Tensor | None:
        return self.buffers if self.buffers.numel() else None

    def online_clients(self, time_s: float, r: int) -> np.ndarray:
        """Clients online now, with battery above their threshold (or charging)."""
        world = self.world
        online = world.availability.online_mask(time_s, r)
        online &= eligible_mask(self.battery_j, world.population, world.availability, time_s)
        return np.flatnonzero(online)

    def select(self, candidates: np.ndarray, r: int, key=()) -> np.ndarray:
        """This round's clients among the candidates, with the algorithm's weights."""
        weights = self.world.algorithm.selection_weights(self.state)
        if weights is not None:
            weights = weights.cpu().numpy().astype(float)
        return select_clients(candidates, self.world.scenario, r, weights, key)

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

    def training_costs(self, k: int) -> dict:
        """Client k's bits and computation in a training round (freeloaders compute nothing)."""
        world = self.world
        work = 0 if world.freeloader[k] else self.local_work(k)
        return {
            "down_bits": world.downlink_bits,
            "compute_s": work * float(world.step_time_s[k]),
            "compute_energy_j": work * float(world.step_energy_j[k]),
            "up_bits": world.uplink_bits,
        }

    def local_work(self, k: int) -> float:
        """Client k's computation this round in plain SGD steps: its steps' counted gradient
        evaluations plus their vector FLOPs (algorithms/work.py; FedAvg: its steps)."""
        steps = int(self.world.client_steps[k])
        return float(local_work(self.step_gradients, steps, self.world.vector_work))

    def server_compute_time_s(self, arrived: int, failed: bool) -> float:
        """The server's aggregation of `arrived` uploads: its FLOPs (the algorithm's
        aggregation_flops) at round.server_flops_per_s; 0 in a failed round (none)."""
        if failed:
            return 0.0
        flops = self.world.algorithm_cls.aggregation_flops(self.world.n_params, arrived)
        return flops / self.world.scenario.round.server_flops_per_s

    def fabricate(self, start: torch.Tensor) -> torch.Tensor:
        """A freeloader's upload, from the global model it received."""
        section = self.world.scenario.population.freeloaders
        gen = rng.torch_generator(self.world.scenario.seed, "freeloader", self.progress.next_round)
        return fabricate(section.behaviour, start, self.last_update, section.noise_scale, gen)

    def probe(self, env: simpy.Environment, r: int, setup: RoundSetup, row: dict):
        """DRFA/DRDM's second set: m clients chosen uniformly receive the probe model,
        evaluate one minibatch and upload the loss (a scalar); the server's dual step uses
        the losses that arrived. A NaN/inf loss marks the round diverged (no dual step)."""
        world, scenario = self.world, self.world.scenario
        online = self.online_clients(env.now, r)
        gen = rng.stream(scenario.seed, "probe", r)
        m = min(scenario.training.clients_per_round, len(online))
        clients = np.sort(gen.choice(online, m, replace=False)) if m else online
        if m == 0:
            return []
        records = yield from play_clients(
            env, self, r, env.now, clients, len(clients), self.probe_costs
        )
        arrived = np.array([rec.outcome == "arrived" for rec in records])
        ids = clients[arrived]
        if len(ids):
            batches = minibatch_indices(
                scenario.seed,
                r,
                ids,
                world.data.client_train,
                1,
                scenario.training.batch_size,
                stream="probe",
            )[:, 0]
            probe_model = world.algorithm.probe_model(self.state)
            losses = world.executor.losses(probe_model, batches, self.buffers_or_none())
            if not bool(torch.isfinite(losses).all()):
                row["diverged"] = 1
                self.divergence_cause = "the probed clients' training loss"
                return records
            self.state = world.algorithm.dual_update(
                self.state, torch.as_tensor(ids), losses, setup
            )
        return records

    # ------------------------------------------------------------------ bookkeeping
    def _close_row(
        self,
        row: dict,
        end_s: float,
        records: list[ClientRecord],
        failed: bool,
        probe_records: list[ClientRecord] = (),
    ):
        """6. ledger: per-client energy into the ledger and batteries; round totals.
        Participation counts come from the training set; energy and airtime from the
        training and the probe set."""
        self.last_records = [*records, *probe_records]  # for events.jsonl and the timeline
        self.outside_records = []  # clients outside the round whose radio tails it charges
        for rec in records:
            self.ledger["selected"][rec.client] += 1
            self.ledger["arrived"][rec.client] += rec.outcome == "arrived"
        spent = [*records, *probe_records]
        for rec in spent:
            k = rec.client
            if rec.uplink_sinr:  # time-mean SINR of each transmission, in dB
                log = self.__dict__.setdefault("sinr_db", {})  # (subclasses without it too)
                log.setdefault(k, []).extend(10 * math.log10(s) for s in rec.uplink_sinr)
            for name in ENERGY_FIELDS:
                self.ledger[name][k] += getattr(rec, name)
            self.battery_j[k] = max(0.0, self.battery_j[k] - rec.energy_total_j)
            if rec.outcome == "battery":  # it stopped exactly at its threshold (no round-off)
                self.battery_j[k] = min(
                    self.battery_j[k], self.world.population.battery_threshold_j[k]
                )
        # radio tails running outside the clients' processes, up to the round's end
        tails_j = self.charge_tails(self.radios.settle(end_s))
        self.radios.ranges.add_records(spent, self.radios.class_index)  # summary's warnings
        world = self.world
        # charging since the previous round ended (the wait between rounds included)
        charge(
            self.battery_j, world.population, world.availability, self.progress.sim_time_s, end_s
        )
        outcomes = [rec.outcome for rec in records]
        row.update(
            sim_time_end_s=end_s,
            arrived=outcomes.count("arrived"),
            dropped=len(records) - outcomes.count("arrived"),
            **{f"dropped_{cause}": outcomes.count(cause) for cause in DROP_CAUSES},
            uplink_attempts=sum(rec.uplink_attempts for rec in records),
            **cell_columns(records, world.topology.n_cells),
            failed=int(failed),
            downlink_airtime_s=sum(rec.downlink_airtime_s for rec in spent),
            compute_time_s=sum(rec.compute_time_s for rec in spent),
            max_compute_time_s=max(
                (rec.compute_time_s for rec in records if rec.outcome == "arrived"), default=0.0
            ),
            server_compute_time_s=self.server_compute_time_s(outcomes.count("arrived"), failed),
        )
        for name in SUMMED:
            row[name] = float(sum(getattr(rec, name) for rec in spent))
        row["energy_radio_tail_j"] += tails_j
        return with_total(row)

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

    def finish_round(self, row: dict, wall_s: float, evaluate: bool = True) -> dict:
        """Evaluation and the running summary after a round. A diverged round (its model
        NaN/inf, or its evaluation's loss) is evaluated, counts for neither the best
        accuracy nor the target, and is the last one played. `evaluate` False: no
        evaluation (a protocol's replay of the timeline, simulator/protocols.py)."""
        r, training, p = row["round"], self.world.scenario.training, self.progress
        p.compute_time_s += row["max_compute_time_s"]
        diverged = row.get("diverged", 0) == 1
        reached = False
        due = (r + 1) % training.eval_every == 0 or r + 1 == training.rounds or diverged
        if due and evaluate:
            metrics = self.world.evaluator(self.state["w"], self.buffers_or_none())
            row.update(metrics)
            cause = self.divergence_cause if diverged else None
            if not math.isfinite(metrics["loss"]):
                cause = cause or "the test loss"
                diverged = True
            # the row keeps NaN/inf (written as nan/inf); the running summary only numbers
            p.metrics = {k: finite_or_none(v) for k, v in metrics.items()}
            if not diverged:
                p.best_accuracy = np.nanmax([p.best_accuracy, metrics["accuracy"]])
                reached = training.target_value is not None and (
                    metrics[training.target_metric] >= training.target_value
                )
                reached = reached and p.rounds_to_target is None
                if reached:
                    p.rounds_to_target = r + 1
                    p.compute_time_to_target_s = p.compute_time_s
            elif p.diverged_at_round is None:
                p.diverged_at_round = r
                p.diverged_reason = divergence_reason(training, r, row["lr"], cause)
        row["diverged"] = int(diverged)
        row.update(self.detection_rates())
        p.next_round = r + 1
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

    def detection_rates(self) -> dict:
        """rounds.csv's detection columns, when the algorithm detects freeloaders (TACO):
        the clients expelled so far (`expelled`) and the benign among them, whether or not
        the scenario has freeloaders; true/false positive rates when it has some."""
        detected = self.world.algorithm.detected(self.state)
        if detected is None:
            return {}
        detected = detected.cpu().numpy().astype(bool)
        truth = np.asarray(self.world.freeloader, dtype=bool)
        row = {"expelled": int(detected.sum()), "expelled_benign": int(detected[~truth].sum())}
        if truth.any():
            row["detection_tpr"] = float(detected[truth].mean())
            row["detection_fpr"] = float(detected[~truth].mean())
        return row

    def detection_summary(self) -> dict:
        """summary.json's detection fields: the clients expelled by the end (all, benign,
        freeloaders) and the rates of the last round (detection_rates)."""
        rates = self.detection_rates()
        if not rates:
            return {}
        expelled, benign = rates.pop("expelled"), rates.pop("expelled_benign")
        return {
            "expelled_clients": expelled,
            "expelled_benign": benign,
            "expelled_freeloaders": expelled - benign,
            **rates,
        }

    def run(self, last_round: int, on_round: Callable[[dict], bool | None]) -> None:
        """Play rounds next_round .. last_round-1 in one SimPy environment; `on_round`
        returning False ends the run after that round."""
        if self.protocol is not None and hasattr(self.protocol, "run"):  # async, buffered
            self.protocol.run(last_round, on_round)
            return
        env = simpy.Environment(initial_time=self.progress.sim_time_s)

        stop_at_target = self.world.scenario.training.stop_at_target

        def server():
            for r in range(self.progress.next_round, last_round):
                if stop_at_target and self.progress.rounds_to_target is not None:
                    break
                if self.progress.diverged_at_round is not None:
                    break
                tic = time.perf_counter()
                row = yield env.process(self.play_round(env, r))
                if on_round(self.finish_round(row, time.perf_counter() - tic)) is False:
                    break

        # run until the server is done (stale medium timers may lie beyond it)
        env.run(until=env.process(server()))

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict:
        """The state between rounds as plain data: tensors, numbers, strings, containers
        (what `torch.load(weights_only=True)` reads back; simulator/checkpoint.py)."""
        return {
            "state": {k: v.cpu() if torch.is_tensor(v) else v for k, v in self.state.items()},
            "ledger": {k: torch.from_numpy(v.copy()) for k, v in self.ledger.items()},
            "battery_j": torch.from_numpy(self.battery_j.copy()),
            "client_store": self.store.state_dict(),
            "last_update": self.last_update.cpu(),
            "progress": dict(self.progress.__dict__),
            "buffers": self.buffers.cpu(),
            "client_buffers": None if self.client_buffers is None else self.client_buffers.cpu(),
            "radio": self.radios.state_dict(),
            **({"sinr_db": {str(k): v for k, v in self.sinr_db.items()}} if self.sinr_db else {}),
            **({} if self.protocol is None else {"protocol": self.protocol.state_dict()}),
        }

    def load_state_dict(self, saved: dict) -> None:
        device = self.world.device
        self.state = {
            k: v.to(device) if torch.is_tensor(v) else v for k, v in saved["state"].items()
        }
        self.ledger.update({k: v.numpy().copy() for k, v in saved["ledger"].items()})
        self.battery_j = saved["battery_j"].numpy().copy()
        self.store.load_state_dict(saved["client_store"])
        self.last_update = saved["last_update"].to(device)
        self.progress = Progress(**saved["progress"])
        self.buffers = saved["buffers"].to(device)
        if saved["client_buffers"] is not None:
            self.client_buffers = saved["client_buffers"].to(device)
        self.radios.load_state_dict(saved["radio"])
        self.sinr_db = {int(k): list(v) for k, v in saved.get("sinr_db", {}).items()}
        if self.protocol is not None:
            if "protocol" not in saved:
                raise FedjouleError("the checkpoint holds no protocol state; start a new run")
            self.protocol.load_state_dict(saved["protocol"])

    def finished(self) -> bool:
        """All rounds played, the target reached with stop_at_target, or diverged."""
        training = self.world.scenario.training
        reached = training.stop_at_target and self.progress.rounds_to_target is not None
        diverged = self.progress.diverged_at_round is not None
        return reached or diverged or self.progress.next_round >= training.rounds

    def summary(self) -> dict:
        """summary.json: every number finite (NaN or inf, which JSON cannot hold, is None)."""
        p = self.progress
        summary = {
            "final_accuracy": p.metrics.get("accuracy"),
            "best_accuracy": None if math.isnan(p.best_accuracy) else float(p.best_accuracy),
            "worst_client_accuracy": p.metrics.get("worst_client_accuracy"),
            "client_accuracy_p10": p.metrics.get("client_accuracy_p10"),
            "client_accuracy_std": p.metrics.get("client_accuracy_std"),
            "final_loss": p.metrics.get("loss"),
            "energy_total_j": p.cumulative_energy_j,
            **{name: float(self.ledger[name].sum()) for name in DEVICE_FIELDS},
            "end_of_run_tail": self.world.scenario.energy.end_of_run_tail,
            "end_of_run_tail_energy_j": p.end_of_run_tail_energy_j,
            "sim_time_s": p.sim_time_s,
            "rounds_completed": p.next_round,
            "target_metric": self.world.scenario.training.target_metric,
            "target_value": self.world.scenario.training.target_value,
            "rounds_to_target": p.rounds_to_target,
            "energy_to_target_j": p.energy_to_target_j,
            "time_to_target_s": p.time_to_target_s,
            "compute_time_to_target_s": p.compute_time_to_target_s,
            "wall_time_s": p.wall_time_s,
            "diverged_at_round": p.diverged_at_round,
            "diverged_reason": p.diverged_reason,
            **self.detection_summary(),
            **({} if self.protocol is None else self.protocol.summary()),
        }
        return {k: finite_or_none(v) for k, v in summary.items()}


def divergence_reason(training, r: int, lr: float, cause: str) -> str:
    """What summary.json says about a diverged run: the round, and the likely cause."""
    rate = f"training.lr = {training.lr:g}"
    if training.lr_decay != 1:
        rate += f" (x lr_decay^{r} = {lr:g} in that round)"
    if training.weight_decay:
        rate += f" (with training.weight_decay = {training.weight_decay:g})"
    return (
        f"{cause} became NaN/inf at round {r}: {rate} may be too large; lower the learning "
        f"rate, or bound the steps with training.clip_grad_norm"
    )
