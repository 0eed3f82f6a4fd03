"""Repricing a learning run on another channel: its selections replayed on the SimPy system
engine (training skipped), with checks that the channel did not change who took part.

A learning run records every transfer in events.jsonl (output.events=true). The clients
that uploaded a model in round r are the round's training set; those that uploaded a loss
(header + 32 bits) are DRFA/DRDM's probe set. `ReplaySimulation` plays the same rounds on
a system world with another channel: the recorded sets instead of a new selection, the
same transfer plans as the learning engine (simulator/engine.py), the same ledger. Any
sign that the channel changed who took part (a drop, a client whose battery reached its
threshold, a recorded client not eligible) is a violation: the repricing is then not valid.
"""

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import simpy

from fedjoule.algorithms.registry import algorithm_class
from fedjoule.energy_kinds import ENERGY_FIELDS
from fedjoule.errors import FedjouleError
from fedjoule.report.table import read_table
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.round_rules import PROBE_LOSS_BITS
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import SystemWorld, build_system_world


@dataclass
class RoundSets:
    """Who took part in one round of a learning run."""

    selected: list[int] = field(default_factory=list)
    probed: list[int] = field(default_factory=list)


def read_round_sets(run_dir: Path, world: SystemWorld) -> tuple[dict[int, RoundSets], list[str]]:
    """Each round's training and probe sets from a run's events.jsonl, and what makes the run
    unfit for replay (a drop: a selected client without a completed upload)."""
    path = Path(run_dir) / "events.jsonl"
    if not path.exists():
        raise FedjouleError(f"{run_dir}: no events.jsonl; the run needs output.events=true")
    probe_bits = world.scenario.channel.header_bits + PROBE_LOSS_BITS
    sets: dict[int, RoundSets] = {}
    with path.open() as f:
        for line in f:
            event = json.loads(line)
            if event["kind"] != "uplink" or not event["ok"]:
                continue
            found = sets.setdefault(event["round"], RoundSets())
            if event["bits"] == world.uplink_bits:
                found.selected.append(event["client"])
            elif event["bits"] == probe_bits:
                found.probed.append(event["client"])
            else:
                raise FedjouleError(
                    f"{path}: an upload of {event['bits']} bits in round {event['round']}, "
                    f"neither a model ({world.uplink_bits}) nor a probe loss ({probe_bits})"
                )
    problems = []
    for row in read_table(Path(run_dir) / "rounds.csv"):
        r = int(row["round"])
        found = sets.setdefault(r, RoundSets())
        found.selected.sort()
        found.probed.sort()
        if int(row["selected"]) != len(found.selected) or int(row["dropped"]):
            problems.append(f"round {r} of the learning run dropped {row['dropped']} clients")
    return sets, problems


class ReplaySimulation(SimpySystemSimulation):
    """The SimPy engine without training, playing recorded training and probe sets."""

    def __init__(self, world: SystemWorld, rounds: dict[int, RoundSets]):
        # the recorded sets replace the policy's selector (who_takes_part), so a loss-driven
        # selector needs no loss here; its allocators run on the replayed channel
        policy = world.scenario.policy.model_copy(update={"select": "random"})
        scenario = world.scenario.model_copy(update={"policy": policy})
        super().__init__(dataclasses.replace(world, scenario=scenario))
        self.rounds = rounds
        self.needs_probe = algorithm_class(world.scenario.algorithm)[0].needs_probe
        self.violations: list[str] = []

    def _eligible(self, time_s: float, r: int, wanted: list[int], what: str) -> None:
        """Every online client is above its battery threshold (so the candidates were the
        same on any channel) and every recorded client is among them."""
        online = self.online_clients(time_s, r)
        available = np.flatnonzero(self.world.availability.online_mask(time_s, r))
        if len(online) != len(available):
            self.violations.append(
                f"round {r}: {len(available) - len(online)} clients at their battery threshold"
            )
        if not set(wanted) <= set(online.tolist()):
            self.violations.append(f"round {r}: a recorded {what} client is not eligible")

    def _arrived(self, r: int, records) -> None:
        for rec in records:
            if rec.outcome != "arrived":
                self.violations.append(f"round {r}: client {rec.client} dropped ({rec.outcome})")

    def who_takes_part(self, time_s: float, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps 1 and 2 (simulator/round.py): the recorded training set, checked eligible."""
        wanted = self.rounds.get(r, RoundSets()).selected
        self._eligible(time_s, r, wanted, "training")
        return self.online_clients(time_s, r), np.asarray(wanted, dtype=int)

    def transfer(self, env: simpy.Environment, r: int, allocation, backhaul=True):
        """Step 5, each drop a violation."""
        records = yield from super().transfer(env, r, allocation, backhaul)
        self._arrived(r, records)
        return records

    def probe_step(self, env: simpy.Environment, r: int, played, row: dict):
        """After step 6, the recorded probe set (when the algorithm probes)."""
        probed = self.rounds.get(r, RoundSets()).probed
        if not self.needs_probe or played.failed or not probed:
            return []
        return (yield from self.probe_replay(env, r, probed))

    def probe_replay(self, env: simpy.Environment, r: int, probed: list[int]):
        """engine.Simulation.probe's transfers for the recorded probe set."""
        self._eligible(env.now, r, probed, "probe")
        clients = np.asarray(probed, dtype=int)
        records = yield from self.probe_transfer(env, r, clients)
        self._arrived(r, records)
        return records


@dataclass
class Priced:
    """A replay's totals over its rounds, and why it is not valid (empty: valid)."""

    rounds: int
    energy_total_j: float
    energy_j: dict[str, float]  # per energy kind (energy_kinds.ENERGY_FIELDS)
    sim_time_s: float
    violations: list[str]


def reprice(scenario: Scenario, run_dir: Path, rounds: int) -> Priced:
    """Replay the first `rounds` rounds of the learning run in `run_dir` on `scenario` (the
    run's scenario with another channel)."""
    world = build_system_world(scenario)
    sets, problems = read_round_sets(run_dir, world)
    sim = ReplaySimulation(world, sets)
    sim.run(rounds, lambda row: None)
    return Priced(
        rounds=rounds,
        energy_total_j=sim.progress.cumulative_energy_j,
        energy_j={name: float(sim.ledger[name].sum()) for name in ENERGY_FIELDS},
        sim_time_s=sim.progress.sim_time_s,
        violations=problems + sim.violations,
    )
