"""Server protocols beside synchronous rounds (docs/protocols.md): FedAsync, FedBuff and
HierFAVG, each a server-side SimPy process over the one engine, world, client process
(client.client_round) and ledger of engine.Simulation.

- async (Xie, Koyejo, Gupta, 2019): `concurrency` clients train at any time; each arrival
  is mixed in, w <- (1 - a) w + a w_k with a = mixing x s(staleness).
- buffered (Nguyen et al., AISTATS 2022): `concurrency` in flight; every `buffer_size`
  arrivals the server applies w <- w + server_lr sum_i n_i s(t_i) D_i / sum_i n_i, the
  sample-weighted mean of the buffered deltas D_i = w_i - w_(dispatch), each scaled by its
  staleness weight (FedBuff: 1/sqrt(1 + t)).
- hierarchical (Liu, Zhang, Song, Letaief, ICC 2020): an edge server at every base station
  runs `edge_rounds` synchronous rounds with its own clients, then sends its model over the
  backhaul; the cloud takes the data-weighted mean of the edge models and sends it back.

A rounds.csv row is one server model version (a cloud aggregation). Checkpoints: a
hierarchical cloud round ends with every edge holding the cloud model, so the state between
rows is the sync one. Under async and buffered clients are in flight at every aggregation;
their trained uploads (computed at dispatch) and the buffer are saved as tensors, and a
resume replays the system timeline (no training: it does not depend on the models) from
time 0 up to the saved version, then takes the learning state from the checkpoint.
"""

import math
import time

import numpy as np
import simpy
import torch

from fedjoule import rng
from fedjoule.algorithms.base import weighted_mean
from fedjoule.algorithms.learning import (
    aggregate_arrived,
    aggregate_buffers,
    keep_client_state,
    model_is_finite,
    round_lr,
)
from fedjoule.channel.medium import make_medium
from fedjoule.errors import FedjouleError
from fedjoule.simulator.checkpoint import Progress
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.transfers import arrivals_kept, play_clients, serving_cells, start_clients

LATE = 2  # SimPy priority after URGENT (0) and NORMAL (1): the end of an instant
ROUND_COLUMNS = ["updates", "staleness_mean", "staleness_max", "energy_backhaul_j"]
CLIENT_COLUMNS = ["stale_updates", "dropped_updates"]
LEDGER = ("stale_updates", "dropped_updates")


def staleness_weight(kind: str, t: float, a: float, b: float) -> float:
    """FedAsync's s(t) of an update t versions old (Xie et al., 2019, Sec. 5.2): constant
    1; polynomial (t + 1)^-a; hinge 1 for t <= b, else 1 / (a (t - b) + 1)."""
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return (t + 1.0) ** -a
    if kind == "hinge":
        return 1.0 if t <= b else 1.0 / (a * (t - b) + 1.0)
    raise ValueError(f"unknown staleness weight {kind!r}")


def mixed(w: torch.Tensor, w_client: torch.Tensor, alpha: float) -> torch.Tensor:
    """FedAsync's update (Xie et al., 2019, Alg. 1): (1 - alpha) w + alpha w_client."""
    return (1.0 - alpha) * w + alpha * w_client


def buffered_step(
    w: torch.Tensor,
    deltas: torch.Tensor,
    samples: torch.Tensor,
    weights: torch.Tensor,
    server_lr: float,
) -> torch.Tensor:
    """FedBuff's server step (Nguyen et al., 2022, Alg. 1) with FedAvg's sample weights:
    w + server_lr sum_i n_i s_i D_i / sum_i n_i for the (K, P) buffered deltas D_i."""
    n = samples.to(deltas)
    return w + server_lr * ((n * weights.to(deltas))[:, None] * deltas).sum(0) / n.sum()


class EndOfInstant(simpy.Event):
    """Fires after every other event of the current simulated instant (priority LATE), so
    the server sees all the updates that arrive at one instant before it dispatches."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok, self._value = True, None
        env.schedule(self, priority=LATE)


def make(sim):
    """The protocol object of a Simulation (None: sync rounds)."""
    kind = sim.world.scenario.protocol.kind
    if kind == "sync":
        return None
    if kind == "hierarchical":
        return Hierarchical(sim)
    return Streaming(sim)  # (build_world refuses a model with running statistics)


def add_ledger(sim) -> None:
    """The per-client counts the protocols add to the ledger (clients.csv's columns)."""
    n = sim.world.population.size
    for name in LEDGER:
        sim.ledger.setdefault(name, np.zeros(n))


def count_updates(sim, records: list[ClientRecord], staleness: dict) -> None:
    """stale_updates (arrived with staleness > 0) and dropped_updates per client."""
    for rec in records:
        if rec.outcome == "arrived":
            sim.ledger["stale_updates"][rec.client] += staleness.get(id(rec), 0) > 0
        else:
            sim.ledger["dropped_updates"][rec.client] += 1


def stale_columns(updates: int, staleness: list) -> dict:
    return {
        "updates": updates,
        "staleness_mean": float(np.mean(staleness)) if staleness else None,
        "staleness_max": int(max(staleness)) if staleness else None,
    }


class Counts:
    """What every protocol adds to summary.json: updates aggregated in all and to the
    target, their mean staleness, the backhaul's energy."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.learning = "w" in sim.state  # False: the SimPy system engine (no training)
        self.counts = {
            "updates_total": 0,
            "staleness_sum": 0.0,
            "updates_to_target": None,
            "energy_backhaul_j": 0.0,
        }

    def after_row(self, row: dict) -> None:
        """Called by Simulation.finish_round with the finished row."""
        c = self.counts
        c["updates_total"] += int(row.get("updates") or 0)
        mean = row.get("staleness_mean")
        c["staleness_sum"] += (mean or 0.0) * int(row.get("updates") or 0)
        c["energy_backhaul_j"] += float(row.get("energy_backhaul_j") or 0.0)
        if self.sim.progress.rounds_to_target is not None and c["updates_to_target"] is None:
            c["updates_to_target"] = c["updates_total"]

    def summary(self) -> dict:
        c, section = self.counts, self.sim.world.scenario.protocol
        return {
            "protocol": section.kind,
            "updates_total": c["updates_total"],
            "updates_to_target": c["updates_to_target"],
            "staleness_mean": c["staleness_sum"] / c["updates_total"]
            if c["updates_total"]
            else None,
            "energy_backhaul_j": c["energy_backhaul_j"],
        }


# ---------------------------------------------------------------------- async, buffered
class Streaming(Counts):
    """FedAsync (kind async) and FedBuff (kind buffered) as one server process."""

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
        add_ledger(sim)
        self.reset()

    def reset(self) -> None:
        self.version = 0  # server model versions so far (rows)
        self.group = 0  # dispatch instants so far: the stream index of the next one
        self.trained: dict[str, torch.Tensor | None] = {}  # "g:k" -> upload or delta
        self.buffer: list[tuple[str, int, float]] = []  # (key, client, staleness weight)
        self.buffer_deltas: list[torch.Tensor] = []
        # [dispatch instant, gradient evaluations per step] at each change of the count
        # (algorithms/work.py): what a replay charges without training
        self.gradients: list[list] = []
        self.diverged = False  # the last applied model holds NaN/inf
        self.saved: dict | None = None  # a checkpoint's learning state, while replaying

    def s(self, t: float) -> float:
        kind, a = self.weight  # (default polynomial, a = 0.5: FedBuff's 1 / sqrt(1 + t))
        return staleness_weight(kind, t, a, self.weight_b)

    # -------------------------------------------------------------- persistence
    def state_dict(self) -> dict:
        return {
            "counts": dict(self.counts),
            "version": self.version,
            "group": self.group,
            "trained": dict(self.trained),
            "buffer": [list(entry) for entry in self.buffer],
            "buffer_deltas": list(self.buffer_deltas),
            "gradients": [[g, list(per_step)] for g, per_step in self.gradients],
        }

    def load_state_dict(self, saved: dict) -> None:
        """Keep the saved learning state for the replay (run) to take at its version; the
        counts hold at once (a finished run is not replayed)."""
        self.saved = saved
        self.counts = dict(saved["counts"])

    # -------------------------------------------------------------- the run
    def run(self, last_round: int, on_round) -> None:
        """Versions progress.next_round .. last_round-1. A resumed run replays the system
        timeline from time 0 without training up to the saved version (module docstring)."""
        sim = self.sim
        if sim.finished() or sim.progress.next_round >= last_round:
            return
        replay_to = sim.progress.next_round if self.saved is not None else 0
        learning = None
        if replay_to:
            learning = self.snapshot_learning()
            self.reset_system()
            Counts.__init__(self, sim)  # recounted by the replay, then the saved ones
        self.reset()
        env = simpy.Environment()
        done = env.process(self.server(env, last_round, on_round, replay_to, learning))
        env.run(until=done)

    def snapshot_learning(self) -> dict:
        """What the replay does not recompute: model, algorithm and client state, progress."""
        sim = self.sim
        return {
            "simulation": sim.state_dict(),
            "protocol": self.saved,
        }

    def reset_system(self) -> None:
        """The system state at time 0 (ledger, batteries, radios), for the replay."""
        sim = self.sim
        for values in sim.ledger.values():
            values[:] = 0
        sim.battery_j = sim.world.population.battery_initial_j.copy()
        sim.radios = RadioBank.for_world(sim.world)
        sim.progress = Progress()

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
        radios = sim.radios  # the radios' live state is the replayed one
        sim.radios = RadioBank.for_world(sim.world)
        sim.load_state_dict(saved)
        sim.radios = radios
        protocol = learning["protocol"]
        if sorted(protocol["trained"]) != sorted(self.trained):
            raise FedjouleError("resume: the replayed clients in flight differ; start a new run")
        self.trained = dict(protocol["trained"])
        self.counts = dict(protocol["counts"])
        self.buffer = [(key, int(k), float(s)) for key, k, s in protocol["buffer"]]
        self.buffer_deltas = list(protocol["buffer_deltas"])
        self.gradients = [[int(g), [int(n) for n in p]] for g, p in protocol["gradients"]]
        self.saved = None

    def server(self, env, last_round: int, on_round, replay_to: int, learning):
        sim, scenario = self.sim, self.sim.world.scenario
        replaying = replay_to > 0
        in_flight: dict[str, tuple] = {}  # key -> (record, version at dispatch)
        finished: list[str] = []
        wake = {"event": env.event()}
        pending: list[ClientRecord] = []  # completed since the previous row
        staleness_of: dict[int, int] = {}
        row_start = {"s": 0.0}
        aggregated: list[int] = []  # staleness of the updates of the coming version
        dropped_since = {"n": 0}
        online_count = {"n": 0}
        tic = {"s": time.perf_counter()}

        def on_end(key):
            def callback(_event):
                finished.append(key)
                if not wake["event"].triggered:
                    wake["event"].succeed()

            return callback

        def dispatch() -> int:
            free = self.concurrency - len(in_flight)
            if free <= 0:
                return 0
            g = self.group
            busy = np.array([rec.client for rec, _ in in_flight.values()], dtype=int)
            online = sim.online_clients(env.now, g)
            online_count["n"] = len(online)
            candidates = np.setdiff1d(online, busy)
            if len(candidates) == 0:
                return 0
            gen = rng.stream(scenario.seed, "selection", g)
            chosen = np.sort(gen.choice(candidates, min(free, len(candidates)), replace=False))
            self.group += 1
            lr = sim_round_lr(scenario.training, self.version)
            if replaying:  # the count the run had at this dispatch (training_costs)
                counted = [entry for entry in learning["protocol"]["gradients"] if entry[0] <= g]
                sim.step_gradients = list(counted[-1][1]) if counted else []
            if self.learning and not replaying:
                _, _, freeloaders, _, result = sim.train_selected(sim.state, chosen, g, lr)
                per_step = [int(n) for n in sim.step_gradients]
                if not self.gradients or self.gradients[-1][1] != per_step:
                    self.gradients.append([g, per_step])
                trained = torch.tensor([True] * len(chosen)) & ~freeloaders
                keep_client_state(sim.store, result, trained)
                models = result.uploads["model"]
            # the clients sharing each cell's band: those in flight and the new ones
            load = np.bincount(
                serving_cells(sim.world)[np.concatenate([busy, chosen])], minlength=n_cells
            )
            deadline_s = (
                env.now + scenario.round.deadline_s if scenario.round.deadline_s else (math.inf)
            )
            records, processes = start_clients(
                env, sim, g, env.now, chosen, media, load, deadline_s,
                sim.training_costs, True,
            )  # fmt: skip
            for i, (rec, process) in enumerate(zip(records, processes, strict=True)):
                key = f"{g}:{int(chosen[i])}"
                in_flight[key] = (rec, self.version)
                if replaying or not self.learning:
                    self.trained[key] = None
                elif self.kind == "async":
                    self.trained[key] = models[i].detach().clone()
                else:
                    self.trained[key] = (models[i] - sim.state["w"]).detach().clone()
                process.callbacks.append(on_end(key))
            return len(chosen)

        n_cells = sim.world.topology.n_cells
        channel = scenario.channel
        band_hz, blocks = channel.uplink_bandwidth_hz, channel.resource_blocks
        media = {c: make_medium(env, channel.access, band_hz, blocks) for c in range(n_cells)}

        def close(failed: bool):
            """A new server version: the row, the ledger, evaluation, the callback."""
            nonlocal replaying
            row = {
                "round": self.version,
                "sim_time_start_s": row_start["s"],
                "lr": sim_round_lr(scenario.training, self.version),
                "online": online_count["n"],
                "selected": len(pending),
            }
            if self.diverged:
                row["diverged"] = 1
                sim.divergence_cause = "the global model"
            count_updates(sim, pending, staleness_of)
            row = sim._close_row(row, env.now, list(pending), failed)
            row.update(stale_columns(len(aggregated), aggregated), energy_backhaul_j=0.0)
            pending.clear()
            aggregated.clear()
            dropped_since["n"] = 0
            row_start["s"] = env.now
            self.version += 1
            wall_s, tic["s"] = time.perf_counter() - tic["s"], time.perf_counter()
            row = sim.finish_round(row, wall_s, evaluate=not replaying)
            if replaying:
                if self.version == replay_to:
                    self.restore_learning(learning)
                    replaying = False
                return True
            return on_round(row) is not False

        def stop() -> bool:
            p = sim.progress
            if self.version >= last_round:
                return True
            if scenario.training.stop_at_target and p.rounds_to_target is not None:
                return True
            return p.diverged_at_round is not None

        if stop():
            return
        dispatch()
        while True:
            if not finished:
                wake["event"] = env.event()
                waits = [wake["event"]]
                if not in_flight:  # nobody could be dispatched: wait, then a failed row
                    waits.append(env.timeout(scenario.round.idle_wait_s))
                yield env.any_of(waits)
                if not finished:
                    if not close(failed=True) or stop():
                        return
                    dispatch()
                    continue
            yield EndOfInstant(env)
            batch = sorted(finished, key=lambda key: (in_flight[key][0].end_s, _order(key)))
            finished.clear()
            for key in batch:
                rec, version = in_flight.pop(key)
                upload = self.trained.pop(key)
                pending.append(rec)
                if rec.outcome != "arrived":
                    dropped_since["n"] += 1
                    if dropped_since["n"] >= self.concurrency:  # a full set of slots lost
                        if not close(failed=True) or stop():
                            return
                    continue
                t = self.version - version
                staleness_of[id(rec)] = t
                if self.kind == "async":
                    aggregated.append(t)
                    if self.learning and not replaying:
                        alpha = self.mixing * self.s(t)
                        self.apply(mixed(sim.state["w"], upload, alpha))
                    if not close(failed=False) or stop():
                        return
                else:
                    self.buffer.append((key, rec.client, self.s(t)))
                    self.buffer_deltas.append(upload)
                    aggregated.append(t)
                    if len(self.buffer) >= self.buffer_size:
                        if self.learning and not replaying:
                            ids = torch.as_tensor([k for _, k, _ in self.buffer])
                            weights = torch.as_tensor([s for *_, s in self.buffer])
                            step = buffered_step(
                                sim.state["w"],
                                torch.stack(self.buffer_deltas),
                                sim.world.algorithm.client_samples[ids],
                                weights,
                                self.server_lr,
                            )
                            self.apply(step)
                        self.buffer, self.buffer_deltas = [], []
                        if not close(failed=False) or stop():
                            return
            dispatch()

    def apply(self, w: torch.Tensor) -> None:
        """The new global model (the update kept for freeloaders; NaN/inf: diverged)."""
        sim = self.sim
        sim.last_update = w - sim.state["w"]
        sim.state = {**sim.state, "w": w}
        self.diverged = not bool(torch.isfinite(w).all())


def _order(key: str) -> tuple[int, int]:
    g, k = key.split(":")
    return int(g), int(k)


def sim_round_lr(training, r: int) -> float:
    return round_lr(training, r)


# ---------------------------------------------------------------------- hierarchical
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
        add_ledger(sim)

    def state_dict(self) -> dict:
        return {"counts": dict(self.counts)}

    def load_state_dict(self, saved: dict) -> None:
        self.counts = dict(saved["counts"])

    def play_round(self, env: simpy.Environment, r: int):
        """One cloud round (a SimPy process body); returns its rounds.csv row."""
        sim, world = self.sim, self.sim.world
        row = yield from sim.open_round(env, r)
        serving = serving_cells(world)
        cells = np.unique(serving)
        row.update(online=len(sim.online_clients(env.now, r * self.edge_rounds)))
        edges = [env.process(self.edge(env, r, int(c), row["lr"])) for c in cells]
        yield env.all_of(edges)
        results = [edge.value for edge in edges]
        records = [rec for result in results for rec in result["records"]]
        failed = not any(result["aggregated"] for result in results)
        if not failed and self.learning:
            previous = sim.state["w"]
            weights = torch.as_tensor([result["samples"] for result in results])
            sim.state = mean_state([result["state"] for result in results], weights)
            if sim.buffers.numel():
                sim.buffers = weighted_mean(
                    torch.stack([result["buffers"] for result in results]), weights
                )
            sim.last_update = sim.state["w"] - previous
            if not model_is_finite(sim.state):
                row["diverged"] = 1
                sim.divergence_cause = "the global model"
        bits = world.downlink_bits + world.uplink_bits
        energy_j = self.j_per_bit * bits * len(cells)  # E = bits x J/bit, down and up
        row["selected"] = len(records)
        count_updates(sim, records, {})
        row = sim._close_row(row, env.now, records, failed)
        row.update(
            stale_columns(row["arrived"], [0] * row["arrived"]),
            energy_backhaul_j=energy_j,
        )
        return row

    def edge(self, env: simpy.Environment, r: int, c: int, lr: float):
        """Edge server c's part of cloud round r: the model down the backhaul, edge_rounds
        synchronous rounds with its clients, the model up the backhaul."""
        sim, world = self.sim, self.sim.world
        scenario = world.scenario
        serving = serving_cells(world)
        members = np.flatnonzero(serving == c)
        anchor = int(members[0])  # backhaul_delay_s goes by a client of the cell
        down_s = world.topology.backhaul_delay_s(anchor, world.downlink_bits)
        if down_s > 0:
            yield env.timeout(down_s)
        state, buffers = sim.state, getattr(sim, "buffers", None)
        records, aggregated = [], 0
        key = (c,) if world.topology.n_cells > 1 else ()
        for j in range(self.edge_rounds):
            q = r * self.edge_rounds + j
            online = sim.online_clients(env.now, q)
            selected = sim.select(online[serving[online] == c], q, key)
            if len(selected) == 0:
                yield env.timeout(scenario.round.idle_wait_s)
                continue
            if self.learning:
                ids, _, freeloaders, start, result = sim.train_selected(state, selected, q, lr)
            keep = arrivals_kept(scenario, len(selected))
            recs = yield from play_clients(
                env, sim, q, env.now, selected, keep, sim.training_costs, backhaul=False
            )
            records += recs
            arrived = torch.tensor([rec.outcome == "arrived" for rec in recs])
            enough = int(arrived.sum()) >= scenario.round.min_clients
            aggregated += enough
            if self.learning:
                trained = torch.tensor([rec.trained for rec in recs]) & ~freeloaders
                keep_client_state(sim.store, result, trained)
                if sim.client_buffers is not None:
                    sim.client_buffers[ids[trained]] = result.buffers[trained.to(start.device)]
                if enough:
                    state = aggregate_arrived(world.algorithm, state, result, arrived)
                    samples = world.algorithm.client_samples
                    buffers = aggregate_buffers(buffers, result, arrived, samples)
            if scenario.round.server_time_s:
                yield env.timeout(scenario.round.server_time_s)
        up_s = world.topology.backhaul_delay_s(anchor, world.uplink_bits)
        if up_s > 0:
            yield env.timeout(up_s)
        samples = 0.0
        if self.learning:
            samples = float(world.algorithm.client_samples[torch.as_tensor(members)].sum())
        return {
            "state": state,
            "buffers": buffers,
            "records": records,
            "aggregated": aggregated,
            "samples": samples,
        }


def mean_state(states: list[dict], weights: torch.Tensor) -> dict:
    """The cloud's state: each floating tensor the weighted mean of the edges' (one edge:
    its state as it is); anything else the first edge's."""
    if len(states) == 1:
        return dict(states[0])
    out = {}
    for name, value in states[0].items():
        if torch.is_tensor(value) and value.is_floating_point():
            rows = torch.stack([s[name] for s in states]).flatten(1)
            out[name] = weighted_mean(rows, weights).reshape(value.shape).to(value.dtype)
        else:
            out[name] = value
    return out
