"""FedAsync's and FedBuff's server as a SimPy story (protocols/asynchronous.py declares them).

The server dispatches a client to every free slot (`concurrency` in flight), each client's
process puts its key into a `simpy.Store` of finished uploads when it ends, and the server
takes what finished at one instant (after every other event of it, EndOfInstant), oldest
first: each arrival is mixed in (async) or buffered until `buffer_size` (buffered), each
aggregation a new server version and a rounds.csv row (the kernel's close_row and finish
steps, simulator/round.py); then it dispatches again.
"""

import functools
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import simpy

from fedjoule import rng
from fedjoule.algorithms.state import updated
from fedjoule.channel.medium import make_medium
from fedjoule.errors import FedjouleError
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.protocols.asynchronous import buffered_step, mixed, staleness_weight
from fedjoule.simulator.protocols.counts import Counts, UpdateCounts, count_updates, stale_columns
from fedjoule.simulator.round_rules import round_lr
from fedjoule.simulator.transfers import serving_cells, start_clients
from fedjoule.torch_import import load_torch

if TYPE_CHECKING:
    import torch

LATE = 2  # SimPy priority after URGENT (0) and NORMAL (1): the end of an instant


class EndOfInstant(simpy.Event):
    """Fires after every other event of the current simulated instant (priority LATE), so
    the server sees all the updates that arrive at one instant before it dispatches."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok, self._value = True, None
        env.schedule(self, priority=LATE)


@dataclass
class StreamingState:
    """What the FedAsync/FedBuff server keeps between versions beside the algorithm's
    ServerState (saved in every checkpoint): its version, its dispatch instants, the
    uploads of the clients in flight ("g:k" keys: dispatch instant g, client k; None
    without learning), the buffer, and each change of the gradient count per step
    ([dispatch instant, count per step]: what a replay charges, algorithms/work.py)."""

    version: int = 0  # server model versions so far (rows)
    group: int = 0  # dispatch instants so far: the stream index of the next one
    trained: dict = field(default_factory=dict)  # key -> upload (async) or delta (buffered)
    buffer: list = field(default_factory=list)  # (key, client, staleness weight)
    buffer_deltas: list = field(default_factory=list)
    gradients: list = field(default_factory=list)


class Streaming(Counts):
    """FedAsync (kind async) and FedBuff (kind buffered): settings, the state between
    versions, and the run (one StreamingServer story, after a replay when resumed)."""

    def __init__(self, sim) -> None:
        super().__init__(sim)
        section = sim.world.scenario.protocol
        self.kind = section.kind
        self.concurrency = section.concurrency or sim.world.scenario.training.clients_per_round
        self.buffer_size = section.buffer_size or sim.world.scenario.training.clients_per_round
        self.weight = (section.value("staleness"), section.value("staleness_a"))
        self.weight_b = section.value("staleness_b")
        self.mixing = section.value("mixing") if self.kind == "async" else None
        self.server_lr = section.value("server_lr") if self.kind == "buffered" else None
        self.state = StreamingState()
        self.diverged = False  # the last applied model holds NaN/inf
        self.saved: dict | None = None  # a checkpoint's state, until the replay reaches it
        if sim.policy_step is not None:  # a loss-driven selector's losses, for a replay
            sim.policy_step.keep_sent_losses()

    def s(self, t: float) -> float:
        kind, a = self.weight  # (default polynomial, a = 0.5: FedBuff's 1 / sqrt(1 + t))
        return staleness_weight(kind, t, a, self.weight_b)

    # -------------------------------------------------------------- persistence
    def state_dict(self) -> dict:
        st = self.state
        return {
            "counts": self.counts_dict(),
            "version": st.version,
            "group": st.group,
            "trained": dict(st.trained),
            "buffer": [list(entry) for entry in st.buffer],
            "buffer_deltas": list(st.buffer_deltas),
            "gradients": [[g, list(per_step)] for g, per_step in st.gradients],
        }

    def load_state_dict(self, saved: dict) -> None:
        """Keep the saved learning state for the replay (run) to take at its version; the
        counts hold at once (a finished run is not replayed)."""
        self.saved = saved
        self.load_counts(saved["counts"])

    # -------------------------------------------------------------- the run
    def run(self, last_round: int, on_round) -> None:
        """Versions progress.next_round .. last_round-1. A resumed run replays the system
        timeline from time 0 without training up to the saved version (protocols/)."""
        sim = self.sim
        if sim.finished() or sim.progress.next_round >= last_round:
            return
        replay_to = sim.progress.next_round if self.saved is not None else 0
        learning = None
        if replay_to:
            learning = {"simulation": sim.state_dict(), "protocol": self.saved}
            sim.reset_system()
            self.counts = UpdateCounts()  # recounted by the replay, then the saved ones
        self.state, self.diverged, self.saved = StreamingState(), False, None
        env = simpy.Environment()
        server = StreamingServer(self, env, last_round, on_round, replay_to, learning)
        env.run(until=env.process(server.story()))

    def restore_learning(self, learning: dict) -> None:
        """At the saved version: the checkpoint's learning state; the replayed system
        state (ledger, batteries) must equal the saved one."""
        sim, saved = self.sim, learning["simulation"]
        for name, values in saved["ledger"].items():
            if not np.allclose(sim.ledger[name], values.numpy(), rtol=1e-12, atol=1e-12):
                raise FedjouleError(
                    f"resume: the replayed timeline differs from the checkpoint's ({name}); "
                    "start a new run"
                )
        sim.load_learning_state(saved)
        protocol = learning["protocol"]
        if sorted(protocol["trained"]) != sorted(self.state.trained):
            raise FedjouleError("resume: the replayed clients in flight differ; start a new run")
        self.state.trained = dict(protocol["trained"])
        self.load_counts(protocol["counts"])
        self.state.buffer = [(key, int(k), float(s)) for key, k, s in protocol["buffer"]]
        self.state.buffer_deltas = list(protocol["buffer_deltas"])
        self.state.gradients = [[int(g), [int(n) for n in p]] for g, p in protocol["gradients"]]
        self.saved = None

    def apply(self, w: "torch.Tensor") -> None:
        """The new global model (the kernel's adopt: the update kept for freeloaders, the
        divergence check); a NaN/inf model marks the next version's row diverged."""
        marks: dict = {}
        self.sim.adopt(updated(self.sim.state, w=w), self.sim.buffers, marks)
        self.diverged = marks.get("diverged") == 1


@dataclass
class InFlight:
    """A dispatched client: its record, the server version it started from, and when."""

    record: ClientRecord
    version: int
    start_s: float = 0.0


@dataclass
class Version:
    """The server version being built: its start, the online count at the last dispatch,
    the clients ended since the last row, their staleness, drops since the last row."""

    start_s: float = 0.0
    online: int = 0
    ended: list = field(default_factory=list)  # ClientRecords
    staleness_of: dict = field(default_factory=dict)  # id(record) -> versions behind
    aggregated: list = field(default_factory=list)  # the staleness of each update in it
    dropped: int = 0
    tic_s: float = field(default_factory=time.perf_counter)


class StreamingServer:
    """One run of the async/buffered server on `env`: dispatch to the free slots, wait for
    finished uploads, take each arrival (on_arrival), close a version's row (close)."""

    def __init__(self, protocol: Streaming, env, last_round: int, on_round, replay_to, learning):
        self.protocol, self.sim, self.env = protocol, protocol.sim, env
        self.scenario = self.sim.world.scenario
        self.last_round, self.on_round = last_round, on_round
        self.replay_to, self.learning = replay_to, learning
        self.replaying = replay_to > 0  # replaying the timeline without training
        self.in_flight: dict[str, InFlight] = {}
        self.finished = simpy.Store(env)  # the keys of the clients whose process ended
        self.now = Version()
        self.media: dict = {}  # each cell's uplink medium, shared by every dispatch

    def story(self):
        """The server process: dispatch, then per instant with arrivals take them in order
        of their end (then dispatch instant, client), and dispatch again."""
        if self.stop():
            return
        channel, n_cells = self.scenario.channel, self.sim.world.topology.n_cells
        band_hz, blocks = channel.uplink_bandwidth_hz, channel.resource_blocks
        for c in range(n_cells):
            self.media[c] = make_medium(self.env, channel.access, band_hz, blocks)
        self.dispatch()
        while True:
            first = yield from self.next_finished()
            if first is None:  # nobody in flight nor dispatched: a failed row after a wait
                if not self.close(failed=True) or self.stop():
                    return
                self.dispatch()
                continue
            yield EndOfInstant(self.env)  # every upload that ends at this instant
            batch = [first, *self.finished.items]
            self.finished.items.clear()
            order = sorted(batch, key=lambda key: (self.in_flight[key].record.end_s, _order(key)))
            for key in order:
                if not self.on_arrival(key):
                    return
            self.dispatch()

    def next_finished(self):
        """The key of the next client whose process ends; None after round.idle_wait_s
        when nobody is in flight (a process body)."""
        get = self.finished.get()
        waits = [get]
        if not self.in_flight:
            waits.append(self.env.timeout(self.scenario.round.idle_wait_s))
        yield self.env.any_of(waits)
        if get.triggered:
            return get.value
        get.cancel()
        return None

    def stop(self) -> bool:
        p = self.sim.progress
        if self.protocol.state.version >= self.last_round:
            return True
        if self.scenario.training.stop_at_target and p.rounds_to_target is not None:
            return True
        return p.diverged_at_round is not None

    def dispatch(self) -> None:
        """A client to every free slot: steps 1-4 of the round kernel (online, select,
        allocate, train) for the online clients not in flight (drawn uniformly, or by the
        scenario's policy), then their processes on the cells' shared media, each with its
        allocated local steps and CPU frequency."""
        protocol, sim, env = self.protocol, self.sim, self.env
        st, free = protocol.state, protocol.concurrency - len(self.in_flight)
        if free <= 0:
            return
        g = st.group
        busy = np.array([f.record.client for f in self.in_flight.values()], dtype=int)
        online = sim.online_clients(env.now, g)
        self.now.online = len(online)
        candidates = np.setdiff1d(online, busy)
        if len(candidates) == 0:
            return
        chosen = self.select(candidates, g, free)
        st.group += 1
        allocation = sim.allocate(chosen, g)
        uploads = self.train(allocation, g)
        load = np.bincount(
            serving_cells(sim.world)[np.concatenate([busy, chosen])],
            minlength=sim.world.topology.n_cells,
        )
        deadline_s = self.scenario.round.deadline_s
        deadline_s = env.now + deadline_s if deadline_s else math.inf
        records, processes = start_clients(
            env, sim, g, env.now, chosen, self.media, load, deadline_s,
            sim.allocated_costs(allocation), True,
        )  # fmt: skip
        for i, (rec, process) in enumerate(zip(records, processes, strict=True)):
            key = f"{g}:{int(chosen[i])}"
            self.in_flight[key] = InFlight(rec, st.version, env.now)
            st.trained[key] = None if uploads is None else uploads(i)
            process.callbacks.append(functools.partial(self.ended, key))

    def select(self, candidates: np.ndarray, g: int, free: int) -> np.ndarray:
        """Step 2 at dispatch instant g: `free` of the candidates drawn uniformly from the
        dispatch's selection stream, or by the scenario's policy.select."""
        policy = self.sim.policy_step
        if policy is None or policy.policy.select == "random":
            gen = rng.stream(self.scenario.seed, "selection", g)
            return np.sort(gen.choice(candidates, min(free, len(candidates)), replace=False))
        return policy.select(candidates, g, None, m=min(free, len(candidates)))

    def ended(self, key: str, _event) -> None:
        """A client's process ended: its key into the store of finished uploads."""
        self.finished.put(key)

    def train(self, allocation, g: int):
        """Step 4 at dispatch instant g from the current model; returns upload(i), client
        i's model (async) or delta (buffered); None without training (also in a replay,
        which charges the gradient count the run had then)."""
        protocol, sim = self.protocol, self.sim
        if self.replaying:  # the count the run had at this dispatch (training_costs)
            counted = [entry for entry in self.learning["protocol"]["gradients"] if entry[0] <= g]
            sim.count_gradients(list(counted[-1][1]) if counted else [])
            if sim.policy_step is not None:  # and the losses its clients sent
                sim.policy_step.resend(g)
            return None
        lr = round_lr(self.scenario.training, protocol.state.version)
        trained = sim.train(sim.model(), allocation, g, lr)
        if trained is None:
            return None
        per_step = [int(n) for n in sim.step_gradients]
        gradients = protocol.state.gradients
        if not gradients or gradients[-1][1] != per_step:
            gradients.append([g, per_step])
        sim.keep(trained, None)
        models, w = trained.result.uploads["model"], sim.state["w"]
        if protocol.kind == "async":
            return lambda i: models[i].detach().clone()
        return lambda i: (models[i] - w).detach().clone()

    def on_arrival(self, key: str) -> bool:
        """A finished client: a drop (a full set of slots lost closes a failed row), or an
        update t versions stale, mixed in (async) or buffered (buffered, applied when
        full); each aggregation closes a row. False: the run ends."""
        protocol, now = self.protocol, self.now
        flight = self.in_flight.pop(key)
        upload = protocol.state.trained.pop(key)
        rec = flight.record
        now.ended.append(rec)
        t = protocol.state.version - flight.version
        if self.sim.policy_step is not None:  # what the server measured, for the policy
            g = _order(key)[0]
            self.sim.policy_step.measure(g, flight.start_s, [rec], [t])
        if rec.outcome != "arrived":
            now.dropped += 1
            if now.dropped >= protocol.concurrency:  # a full set of slots lost
                return self.close(failed=True) and not self.stop()
            return True
        now.staleness_of[id(rec)] = t
        now.aggregated.append(t)
        if protocol.kind == "async":
            if self.trains:
                protocol.apply(mixed(self.sim.state["w"], upload, protocol.mixing * protocol.s(t)))
            return self.close(failed=False) and not self.stop()
        st = protocol.state
        st.buffer.append((key, rec.client, protocol.s(t)))
        st.buffer_deltas.append(upload)
        if len(st.buffer) < protocol.buffer_size:
            return True
        if self.trains:
            protocol.apply(self.buffered_model())
        st.buffer, st.buffer_deltas = [], []
        return self.close(failed=False) and not self.stop()

    @property
    def trains(self) -> bool:
        """The model changes (learning, and not replaying the timeline)."""
        return self.sim.learns and not self.replaying

    def buffered_model(self) -> "torch.Tensor":
        """FedBuff's step over the full buffer (buffered_step)."""
        st, sim = self.protocol.state, self.sim
        torch = load_torch()  # learning only: a run that trains nothing loads no torch
        ids = torch.as_tensor([k for _, k, _ in st.buffer])
        weights = torch.as_tensor([s for *_, s in st.buffer])
        return buffered_step(
            sim.state["w"],
            torch.stack(st.buffer_deltas),
            sim.world.algorithm.client_samples[ids],
            weights,
            self.protocol.server_lr,
        )

    def close(self, failed: bool) -> bool:
        """A new server version: the row (the kernel's close_row and finish steps), the
        callback; at the saved version of a replay, the checkpoint's learning state.
        False: the run ends."""
        protocol, sim, now, env = self.protocol, self.sim, self.now, self.env
        version = protocol.state.version
        row = {
            "round": version,
            "sim_time_start_s": now.start_s,
            "lr": round_lr(self.scenario.training, version),
            "online": now.online,
            "selected": len(now.ended),
        }
        if protocol.diverged:  # (the kernel's adopt found it, and its cause)
            row["diverged"] = 1
        count_updates(sim, now.ended, now.staleness_of)
        row = sim.close_row(row, env.now, list(now.ended), failed)
        row.update(stale_columns(len(now.aggregated), now.aggregated), energy_backhaul_j=0.0)
        self.now = Version(start_s=env.now, online=now.online)
        protocol.state.version += 1
        wall_s = self.now.tic_s - now.tic_s
        row = sim.finish_round(row, wall_s, evaluate=not self.replaying)
        if self.replaying:
            if protocol.state.version == self.replay_to:
                protocol.restore_learning(self.learning)
                self.replaying = False
            return True
        return self.on_round(row) is not False


def _order(key: str) -> tuple[int, int]:
    g, k = key.split(":")
    return int(g), int(k)
