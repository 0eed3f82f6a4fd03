"""HierFAVG's servers as a SimPy story (protocols/hierarchical.py declares the protocol): a
cloud round starts one process per edge server; each plays `edge_rounds` rounds of the
round kernel (simulator/round.py, steps 1-6) with its own clients and model between two
backhaul crossings, a policy's selection among its clients and allocation within its cell
(docs/policies.md); the cloud then takes the data-weighted mean of the edge models."""

from dataclasses import dataclass, field

import numpy as np
import simpy

from fedjoule.algorithms.state import ServerState
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.protocols.counts import Counts, count_updates, stale_columns
from fedjoule.simulator.transfers import serving_cells


@dataclass
class EdgeResult:
    """An edge server's part of a cloud round: its model, running statistics, clients'
    records, rounds aggregated, and its clients' training samples (the cloud's weight)."""

    state: ServerState
    buffers: object
    records: list[ClientRecord] = field(default_factory=list)
    aggregated: int = 0
    samples: float = 0.0


class Hierarchical(Counts):
    """HierFAVG: a cloud round is `edge_rounds` synchronous rounds at every edge server
    (one per cell, its own clients, no backhaul between them and the edge), then the
    edge models cross the backhaul to the cloud, which takes their data-weighted mean.
    The algorithm's server state lives at the edges during a cloud round (each starts
    from the cloud's) and the cloud takes the same weighted mean of every tensor of it;
    client state (SCAFFOLD's c_i, FedDyn's gradients) stays at the clients as in sync."""

    def __init__(self, sim) -> None:
        super().__init__(sim)
        section = sim.world.scenario.protocol
        self.edge_rounds = section.value("edge_rounds")
        self.j_per_bit = section.value("backhaul_energy_j_per_bit")

    def state_dict(self) -> dict:
        return {"counts": self.counts_dict()}

    def load_state_dict(self, saved: dict) -> None:
        self.load_counts(saved["counts"])

    def play_round(self, env: simpy.Environment, r: int):
        """One cloud round (a SimPy process body); returns its rounds.csv row."""
        sim, world = self.sim, self.sim.world
        row = yield from sim.open_round(env, r)
        cells = np.unique(serving_cells(world))
        row.update(online=len(sim.online_clients(env.now, r * self.edge_rounds)))
        edges = [env.process(self.edge(env, r, int(c), row["lr"])) for c in cells]
        yield env.all_of(edges)
        results = [edge.value for edge in edges]
        records = [rec for result in results for rec in result.records]
        failed = not any(result.aggregated for result in results)
        if not failed and sim.learns:
            self.cloud_mean(results, row)
        bits = world.downlink_bits + world.uplink_bits
        energy_j = self.j_per_bit * bits * len(cells)  # E = bits x J/bit, down and up
        row["selected"] = len(records)
        count_updates(sim, records, {})
        row = sim.close_row(row, env.now, records, failed)
        row.update(
            stale_columns(row["arrived"], [0] * row["arrived"]),
            energy_backhaul_j=energy_j,
        )
        return row

    def cloud_mean(self, results: list[EdgeResult], row: dict) -> None:
        """The cloud's model: the edges' data-weighted mean (and of the running statistics),
        by the learning engine (engine.Simulation.edges_mean)."""
        sim = self.sim
        states = [result.state for result in results]
        buffers = [result.buffers for result in results]
        sim.adopt(*sim.edges_mean(states, buffers, [r.samples for r in results]), row)

    def edge(self, env: simpy.Environment, r: int, c: int, lr: float):
        """Edge server c's part of cloud round r: the model down the backhaul, edge_rounds
        synchronous rounds with its clients, the model up the backhaul (a process body;
        returns EdgeResult)."""
        sim, world = self.sim, self.sim.world
        scenario = world.scenario
        serving = serving_cells(world)
        members = np.flatnonzero(serving == c)
        anchor = int(members[0])  # backhaul_delay_s goes by a client of the cell
        down_s = world.topology.backhaul_delay_s(anchor, world.downlink_bits)
        if down_s > 0:
            yield env.timeout(down_s)
        out = EdgeResult(sim.model(), sim.buffers if sim.learns else None)
        key = (c,) if world.topology.n_cells > 1 else ()
        for j in range(self.edge_rounds):
            q = r * self.edge_rounds + j
            start_s, online = env.now, sim.online_clients(env.now, q)
            selected = sim.select(online[serving[online] == c], q, key, members)
            if len(selected) == 0:
                yield env.timeout(scenario.round.idle_wait_s)
                continue
            played = yield from sim.client_round(env, q, selected, lr, out.state, False)
            if sim.policy_step is not None:  # what the edge measured, for the policy
                sim.policy_step.measure(q, start_s, played.records)
            out.records += played.records
            out.aggregated += not played.failed
            if sim.learns and not played.failed:
                out.state, out.buffers = sim.aggregated(out.state, out.buffers, played)
            if scenario.round.server_time_s:
                yield env.timeout(scenario.round.server_time_s)
        up_s = world.topology.backhaul_delay_s(anchor, world.uplink_bits)
        if up_s > 0:
            yield env.timeout(up_s)
        if sim.learns:
            out.samples = sim.samples_of(members)
        return out
