"""The SimPy engine with training skipped: the reference the numpy system engine is checked
against, and its fallback for what it does not support (docs/system-engine.md)."""

import numpy as np
import simpy

from fedjoule.simulator import protocols
from fedjoule.simulator.engine import LEDGER_FIELDS, Progress, Simulation, arrivals_kept
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.system_world import SystemWorld, gradients_of_round
from fedjoule.simulator.transfers import play_clients


class SimpySystemSimulation(Simulation):
    """Steps 1, 2, 4 and 6 of a round (docs/round.md) on the SimPy
    clock: availability, uniform selection, the clients' processes on the shared media,
    the ledger. No model, no data, no aggregation, no evaluation; freeloaders skip their
    computation as in a training run."""

    def __init__(self, world: SystemWorld):  # noqa: D107 - no learning state to build
        self.world = world
        n = world.population.size
        self.state = {}
        self.ledger = {name: np.zeros(n) for name in LEDGER_FIELDS}
        self.battery_j = world.population.battery_initial_j.copy()
        self.radios = RadioBank.for_world(world)
        self.progress = Progress()
        self.last_records = []
        self.outside_records = []
        self.sinr_db = {}  # channel.interference=cochannel: each client's upload SINRs (dB)
        self.protocol = protocols.make(self)  # async, buffered, hierarchical: no training

    @property
    def step_gradients(self) -> list[int]:
        """The round's gradient evaluations per local step: the world's dry count (round 0's,
        then the last counted round's; algorithms/work.py)."""
        return gradients_of_round(self.world, self.progress.next_round)

    def play_round(self, env: simpy.Environment, r: int):
        if self.protocol is not None:  # hierarchical: a cloud round
            return (yield from self.protocol.play_round(env, r))
        scenario = self.world.scenario
        row = yield from self.open_round(env, r)
        start_s = row["sim_time_start_s"]
        online = self.online_clients(start_s, r)
        selected = self.select(online, r)
        row.update(online=len(online), selected=len(selected))
        if len(selected) == 0:
            yield env.timeout(scenario.round.idle_wait_s)
            return self._close_row(row, env.now, [], failed=True)

        keep = arrivals_kept(scenario, len(selected))
        records = yield from play_clients(
            env, self, r, start_s, selected, keep, self.training_costs
        )
        failed = sum(rec.outcome == "arrived" for rec in records) < scenario.round.min_clients
        if scenario.round.server_time_s:
            yield env.timeout(scenario.round.server_time_s)
        return self._close_row(row, env.now, records, failed)

    def finish_round(self, row: dict, wall_s: float, evaluate: bool = False) -> dict:
        p = self.progress
        p.next_round = row["round"] + 1
        self.settle_between_rounds(row)
        p.cumulative_energy_j += row["energy_total_j"]
        row["cumulative_energy_j"] = p.cumulative_energy_j
        p.sim_time_s = row["sim_time_end_s"]
        p.wall_time_s += wall_s
        row["wall_time_s"] = wall_s
        if self.protocol is not None:
            self.protocol.after_row(row)
        return row

    def finished(self) -> bool:
        return self.progress.next_round >= self.world.scenario.training.rounds
