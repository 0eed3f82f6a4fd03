"""The run: a SimPy server process plays the rounds (DESIGN.md, "How one run flows").

Each round: who is online -> selection -> all selected clients train in one vectorised
call -> per-client SimPy processes (downlink, compute, uplink on the shared medium)
until all arrived or were dropped -> aggregation of the arrivals -> ledger, evaluation,
and a row appended to rounds.csv. After every round a checkpoint is written, so an
interrupted run resumes where it stopped and produces the same files.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import simpy
import torch

from fedjoule import rng
from fedjoule.algorithms.executor import LocalWork, minibatch_indices
from fedjoule.algorithms.learning import aggregate_arrived, train_clients
from fedjoule.devices.battery import charge, eligible_mask
from fedjoule.simulator.client import DROP_CAUSES, ClientRecord
from fedjoule.simulator.transfers import overcommit_count, play_clients
from fedjoule.simulator.world import World

LEDGER_FIELDS = ("selected", "arrived", "energy_compute_j", "energy_tx_j", "energy_rx_j")
SUMMED = ("energy_compute_j", "energy_tx_j", "energy_rx_j", "uplink_bits", "uplink_airtime_s")


@dataclass
class Progress:
    """What a run has accumulated; saved in every checkpoint."""

    next_round: int = 0
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    cumulative_energy_j: float = 0.0
    metrics: dict = field(default_factory=dict)  # last evaluation
    best_accuracy: float = math.nan
    rounds_to_target: int | None = None
    energy_to_target_j: float | None = None
    time_to_target_s: float | None = None


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


class Simulation:
    """The state of one run between rounds: server/algorithm state, ledger, batteries."""

    def __init__(self, world: World):
        self.world = world
        n = world.population.size
        self.state = world.algorithm.init_state(world.w0)
        self.ledger = {name: np.zeros(n) for name in LEDGER_FIELDS}
        self.battery_j = world.population.battery_initial_j.copy()
        self.progress = Progress()
        self.last_records: list[ClientRecord] = []

    # ------------------------------------------------------------------ the story of a round
    def play_round(self, env: simpy.Environment, r: int):
        """One round in simulated time (a SimPy process body); returns its rounds.csv row."""
        world, scenario = self.world, self.world.scenario
        training, seed = scenario.training, scenario.seed
        if scenario.round.interval_s:  # rounds on a schedule: wait for this round's slot
            yield env.timeout(max(0.0, r * scenario.round.interval_s - env.now))
        start_s = env.now
        row = {"round": r, "sim_time_start_s": start_s, "lr": training.lr * training.lr_decay**r}

        # 1. availability: online now and battery above its threshold
        online = world.availability.online_mask(start_s, r)
        online &= eligible_mask(self.battery_j, world.population, world.availability, start_s)
        candidates = np.flatnonzero(online)
        # 2. selection: m clients uniformly among those online
        m = min(
            overcommit_count(training.clients_per_round, scenario.round.overcommit), len(candidates)
        )
        selection = rng.stream(seed, "selection", r)
        selected = np.sort(selection.choice(candidates, m, replace=False)) if m else candidates
        row.update(online=len(candidates), selected=m)
        if m == 0:  # nobody to train: the server waits and tries again
            yield env.timeout(scenario.round.idle_wait_s)
            return self._close_row(row, env.now, [], failed=True)

        # 3. learning: every selected client's K local steps in one executor call
        work = LocalWork(
            batch_idx=minibatch_indices(
                seed,
                r,
                selected,
                world.data.client_train,
                training.local_steps,
                training.batch_size,
            ),
            steps=torch.full((m,), training.local_steps),
            lr=row["lr"],
            weight_decay=training.weight_decay,
            clip_grad_norm=training.clip_grad_norm,
        )
        ids = torch.as_tensor(selected)
        result = train_clients(world.algorithm, world.executor, self.state, ids, work)

        # 4. the clients' processes: downlink, compute, uplink on the shared medium
        records = yield from play_clients(
            env, self, r, start_s, selected, training.clients_per_round
        )

        # 5. aggregation of the uploads that arrived; too few arrivals: a failed round
        arrived = torch.tensor([rec.outcome == "arrived" for rec in records])
        failed = int(arrived.sum()) < scenario.round.min_clients
        if not failed:
            self.state = aggregate_arrived(world.algorithm, self.state, result, arrived)
        if scenario.round.server_time_s:
            yield env.timeout(scenario.round.server_time_s)
        return self._close_row(row, env.now, records, failed)

    # ------------------------------------------------------------------ bookkeeping
    def _close_row(self, row: dict, end_s: float, records: list[ClientRecord], failed: bool):
        """6. ledger: per-client energy into the ledger and batteries; round totals."""
        self.last_records = records  # for events.jsonl and the round timeline
        for rec in records:
            k = rec.client
            self.ledger["selected"][k] += 1
            self.ledger["arrived"][k] += rec.outcome == "arrived"
            for name in ("energy_compute_j", "energy_tx_j", "energy_rx_j"):
                self.ledger[name][k] += getattr(rec, name)
            self.battery_j[k] = max(0.0, self.battery_j[k] - rec.energy_total_j)
            if rec.outcome == "battery":  # it stopped exactly at its threshold (no round-off)
                self.battery_j[k] = min(
                    self.battery_j[k], self.world.population.battery_threshold_j[k]
                )
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
            downlink_airtime_s=sum(rec.downlink_airtime_s for rec in records),
            compute_time_s=sum(rec.compute_time_s for rec in records),
        )
        for name in SUMMED:
            row[name] = float(sum(getattr(rec, name) for rec in records))
        row["energy_total_j"] = row["energy_compute_j"] + row["energy_tx_j"] + row["energy_rx_j"]
        return row

    def finish_round(self, row: dict, wall_s: float) -> dict:
        """Evaluation and the running summary after a round."""
        r, training, p = row["round"], self.world.scenario.training, self.progress
        p.cumulative_energy_j += row["energy_total_j"]
        row["cumulative_energy_j"] = p.cumulative_energy_j
        if (r + 1) % training.eval_every == 0 or r + 1 == training.rounds:
            p.metrics = self.world.evaluator(self.state["w"])
            row.update(p.metrics)
            p.best_accuracy = np.nanmax([p.best_accuracy, p.metrics["accuracy"]])
            reached = training.target_value is not None and (
                p.metrics[training.target_metric] >= training.target_value
            )
            if reached and p.rounds_to_target is None:
                p.rounds_to_target = r + 1
                p.energy_to_target_j = p.cumulative_energy_j
                p.time_to_target_s = row["sim_time_end_s"]
        p.next_round = r + 1
        p.sim_time_s = row["sim_time_end_s"]
        p.wall_time_s += wall_s
        row["wall_time_s"] = wall_s
        return row

    def run(self, last_round: int, on_round: Callable[[dict], None]) -> None:
        """Play rounds next_round .. last_round-1 in one SimPy environment."""
        env = simpy.Environment(initial_time=self.progress.sim_time_s)

        def server():
            for r in range(self.progress.next_round, last_round):
                tic = time.perf_counter()
                row = yield env.process(self.play_round(env, r))
                on_round(self.finish_round(row, time.perf_counter() - tic))

        # run until the server is done (stale medium timers may lie beyond it)
        env.run(until=env.process(server()))

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict:
        return {
            "state": {k: v.cpu() if torch.is_tensor(v) else v for k, v in self.state.items()},
            "ledger": self.ledger,
            "battery_j": self.battery_j,
            "progress": self.progress.__dict__,
        }

    def load_state_dict(self, saved: dict) -> None:
        device = self.world.device
        self.state = {
            k: v.to(device) if torch.is_tensor(v) else v for k, v in saved["state"].items()
        }
        self.ledger = saved["ledger"]
        self.battery_j = saved["battery_j"]
        self.progress = Progress(**saved["progress"])

    def summary(self) -> dict:
        p = self.progress
        return {
            "final_accuracy": p.metrics.get("accuracy"),
            "best_accuracy": None if math.isnan(p.best_accuracy) else float(p.best_accuracy),
            "worst_client_accuracy": p.metrics.get("worst_client_accuracy"),
            "client_accuracy_p10": p.metrics.get("client_accuracy_p10"),
            "client_accuracy_std": p.metrics.get("client_accuracy_std"),
            "final_loss": p.metrics.get("loss"),
            "energy_total_j": p.cumulative_energy_j,
            "energy_compute_j": float(self.ledger["energy_compute_j"].sum()),
            "energy_tx_j": float(self.ledger["energy_tx_j"].sum()),
            "energy_rx_j": float(self.ledger["energy_rx_j"].sum()),
            "sim_time_s": p.sim_time_s,
            "rounds_completed": p.next_round,
            "target_metric": self.world.scenario.training.target_metric,
            "target_value": self.world.scenario.training.target_value,
            "rounds_to_target": p.rounds_to_target,
            "energy_to_target_j": p.energy_to_target_j,
            "time_to_target_s": p.time_to_target_s,
            "wall_time_s": p.wall_time_s,
        }
