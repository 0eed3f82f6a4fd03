"""The run with learning: the round kernel's steps (simulator/round.py, docs/round.md) with
a model: training, aggregation, the loss probe and evaluation.

Each round: who is online -> selection -> allocation -> all selected clients train in one
vectorised call -> per-client SimPy processes (downlink, compute, uplink on the shared
medium) until all arrived or were dropped -> aggregation of the arrivals -> ledger,
evaluation, and a row appended to rounds.csv. After every round a checkpoint is written,
so an interrupted run resumes where it stopped and produces the same files.

Divergence: when the global model holds a NaN or inf after aggregation, or an
evaluation's loss is NaN or inf, the round's row gets `diverged` = 1 (and is evaluated
whatever eval_every says), no further round is played, and the summary names the round
and the likely cause (`diverged_at_round`, `diverged_reason`).
"""

import math
from typing import NamedTuple

import numpy as np
import simpy
import torch

from fedjoule import rng
from fedjoule.algorithms.base import RoundSetup, weighted_mean
from fedjoule.algorithms.client_store import ClientStore
from fedjoule.algorithms.executor import minibatch_indices
from fedjoule.algorithms.learning import (
    aggregate_arrived,
    aggregate_buffers,
    fabricate,
    keep_client_state,
    mean_state,
    model_is_finite,
    train_clients,
)
from fedjoule.algorithms.state import ServerState, restored
from fedjoule.energy_kinds import (  # noqa: F401 - engine's names, kept public
    DEVICE_FIELDS,
    END_OF_RUN_TAIL,
    ENERGY_FIELDS,
    with_total,
)
from fedjoule.errors import FedjouleError
from fedjoule.report.results import finite_or_none
from fedjoule.simulator.protocols.server import make_protocol
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.round import Allocation, Played, Progress, RoundKernel
from fedjoule.simulator.round_rules import (  # noqa: F401 - engine's names, kept public
    BERNOULLI_DRAWS,
    BERNOULLI_REDRAWS,
    LEDGER_FIELDS,
    PROBE_LOSS_BITS,
    SUMMED,
    arrivals_kept,
    bernoulli_participants,
    cell_columns,
    round_lr,
    select_clients,
    selection_size,
)
from fedjoule.simulator.world import World


class Trained(NamedTuple):
    """Step 4 of a round (simulator/round.py): the selected clients' ids, the round's setup,
    the freeloader mask, the running statistics they started from and the LocalResult."""

    ids: torch.Tensor
    setup: RoundSetup
    freeloaders: torch.Tensor
    start_buffers: torch.Tensor | None
    result: object


class Simulation(RoundKernel):
    """The state of one run between rounds: server/algorithm state, ledger, batteries; the
    round kernel's steps with learning (train, aggregate, probe, evaluate)."""

    learns = True

    def __init__(self, world: World, state_memory_bytes: float | None = None, spill_path=None):
        """`state_memory_bytes`: client-state rows kept in memory before spilling to
        `spill_path` (None: never spill)."""
        super().__init__(world)
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
        self.step_gradients: list[int] = []  # this round's gradient evaluations per step
        self.protocol = make_protocol(self)  # None: sync rounds

    # ------------------------------------------------------------------ the learning steps
    def model(self) -> ServerState:
        """What a sync round trains from: the server's state."""
        return self.state

    def selection_weights(self) -> np.ndarray | None:
        """The algorithm's selection weights (DRFA's lambda; 0 excludes, TACO's expelled)."""
        weights = self.world.algorithm.selection_weights(self.state)
        return None if weights is None else weights.cpu().numpy().astype(float)

    def train(self, model: ServerState, allocation: Allocation, r: int, lr: float) -> Trained:
        """Step 4 from `model` (round.py)."""
        return self.train_selected(model, allocation.clients, r, lr, allocation.local_steps)

    def keep(self, trained: Trained | None, records: list | None) -> None:
        """The client state (and own running statistics) of the clients that trained: those
        whose `records` say so (None: all), freeloaders aside."""
        if trained is None:
            return
        if records is None:
            done = torch.ones(len(trained.ids), dtype=torch.bool)
        else:
            done = torch.tensor([rec.trained for rec in records])
        kept = done & ~trained.freeloaders
        keep_client_state(self.store, trained.result, kept)
        if self.client_buffers is not None:
            device = trained.start_buffers.device
            self.client_buffers[trained.ids[kept]] = trained.result.buffers[kept.to(device)]

    def aggregated(
        self, state: ServerState, buffers, played: Played
    ) -> tuple[ServerState, torch.Tensor]:
        """Step 6 over `state` and `buffers`: the arrived uploads of `played` aggregated."""
        arrived = torch.tensor([rec.outcome == "arrived" for rec in played.records])
        result, algorithm = played.trained.result, self.world.algorithm
        state = aggregate_arrived(algorithm, state, result, arrived)
        return state, aggregate_buffers(buffers, result, arrived, algorithm.client_samples)

    def aggregate(self, played: Played, row: dict) -> None:
        """Step 6 of a sync round: the server's new state (round.py)."""
        self.adopt(*self.aggregated(self.state, self.buffers, played), row)

    def edges_mean(self, states: list, buffers: list, samples: list[float]) -> tuple:
        """Hierarchical: the cloud's state and running statistics, the edges' weighted by
        their clients' samples (mean_state)."""
        weights = torch.as_tensor(samples)
        mean_buffers = self.buffers
        if mean_buffers.numel():
            mean_buffers = weighted_mean(torch.stack(buffers), weights)
        return mean_state(states, weights), mean_buffers

    def samples_of(self, clients) -> float:
        """The training samples of `clients` (an edge's members) in all."""
        ids = torch.as_tensor(clients)
        return float(self.world.algorithm.client_samples[ids].sum())

    def adopt(self, state: ServerState, buffers: torch.Tensor, row: dict) -> None:
        """The server's new state and running statistics (the update kept for freeloaders);
        a model with NaN/inf marks the row diverged."""
        previous = self.state["w"]
        self.state = state
        self.buffers = buffers
        self.last_update = self.state["w"] - previous
        if not model_is_finite(self.state):
            row["diverged"] = 1
            self.divergence_cause = "the global model"

    def probe_step(self, env: simpy.Environment, r: int, played: Played, row: dict):
        """After the aggregation, DRFA/DRDM's loss probe (probe); returns its records."""
        needs = self.world.algorithm.needs_probe
        if not needs or played.failed or row.get("diverged"):
            return []
        records = yield from self.probe(env, r, played.trained.setup, row)
        row["probed"] = sum(rec.outcome == "arrived" for rec in records)
        return records

    def count_gradients(self, per_step: list[int]) -> None:
        """The gradient evaluations per step that training_costs charges, without training
        (a protocol's replay of its timeline charges the counts the run had)."""
        self.step_gradients = per_step

    def train_selected(
        self, state: ServerState, selected: np.ndarray, r: int, lr: float, steps=None
    ):
        """Step 4: the selected clients' local steps (`steps`, None: the scenario's) from
        `state` in one executor call (stream index r); returns Trained."""
        world, training, seed = self.world, self.world.scenario.training, self.world.scenario.seed
        ids = torch.as_tensor(selected)
        steps = torch.as_tensor(world.client_steps[selected] if steps is None else steps)
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
            record_loss=self.policy_step is not None and self.policy_step.reads_loss,
        )
        self.step_gradients = result.gradients.per_step  # counted: training_costs charges them
        if result.loss is not None:  # sent with the updates (reaches the policy if they arrive)
            self.policy_step.trained(selected, result.loss, r, result.loss_rms)
        return Trained(ids, setup, freeloaders, buffers, result)

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
        records = yield from self.probe_transfer(env, r, clients)
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

    def load_learning_state(self, saved: dict) -> None:
        """A checkpoint's state (state_dict) with the radios' live state kept: a protocol's
        replay reached the saved version, its replayed radios are the run's."""
        radios = self.radios
        self.radios = RadioBank.for_world(self.world)
        self.load_state_dict(saved)
        self.radios = radios

    def finish_round(self, row: dict, wall_s: float, evaluate: bool = True) -> dict:
        """Evaluation and the running summary after a round. A diverged round (its model
        NaN/inf, or its evaluation's loss) is evaluated, counts for neither the best
        accuracy nor the target, and is the last one played. `evaluate` False: no
        evaluation (a protocol's replay of the timeline, protocols/asynchronous_server.py)."""
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
        return self.book_row(row, wall_s, reached)

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

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict:
        """The state between rounds as plain data: tensors, numbers, strings, containers
        (what `torch.load(weights_only=True)` reads back; simulator/checkpoint.py)."""
        return {
            # the server state as a plain dict of its names (algorithms/state.py)
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
            **({} if self.policy_step is None else {"policy": self.policy_step.state_dict()}),
        }

    def load_state_dict(self, saved: dict) -> None:
        device = self.world.device
        loaded = {k: v.to(device) if torch.is_tensor(v) else v for k, v in saved["state"].items()}
        self.state = restored(self.state, loaded)  # the saved dict, as the algorithm's class
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
        if self.policy_step is not None:
            self.policy_step.load_state_dict(saved["policy"])

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
