"""The energy kinds of fedjoule/energy_kinds.py are exactly the energy columns of a run's
rounds.csv, clients.csv and summary.json, in their order; the kinds counted in the total
add up to energy_total_j; the events.jsonl kinds each declares carry its energy."""

import csv
import json
import re
from collections import defaultdict

import pytest

import fedjoule
from fedjoule.energy_kinds import DEVICE, ENERGY_FIELDS, KINDS, total_j

# a hierarchical run of default's measured radios over 2 cells, and NB-IoT devices slow
# enough that their 10 s tail runs out while they compute (idle): every kind spends energy
SLOW = {"name": "slow", "share": 0.5, "cpu_freq_min_hz": 100.0, "cpu_freq_max_hz": 100.0}
RUN = {
    "population.device_classes": [
        {"profile": "phone-lte-midrange", "share": 0.5},
        {**SLOW, "radio": {"model": "nbiot"}},
    ],
    "round.deadline_s": None,
    "population.size": 12,
    "training.clients_per_round": 6,
    "round.min_clients": 2,
    "training.rounds": 2,
    "training.local_steps": 2,
    "protocol.kind": "hierarchical",
    "protocol.edge_rounds": 1,
    "protocol.backhaul_energy_j_per_bit": 1.0e-8,
    "topology.layout": "hexagonal",
    "topology.cells": 2,
    "energy.end_of_run_tail": "separate",
    "output.events": True,
}
# an energy column, besides the total and the figures to the target
ENERGY_COLUMN = re.compile(r"^energy_(?!total_j$|to_target_j$).*_j$")


def energy_columns(names) -> list[str]:
    return [name for name in names if ENERGY_COLUMN.match(name)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kinds") / "run"
    fedjoule.run("default", out, overrides=RUN, device="cpu", threads=1, quiet=True)
    with (out / "rounds.csv").open() as f:
        rounds = list(csv.DictReader(f))
    with (out / "clients.csv").open() as f:
        clients = list(csv.DictReader(f))
    events = [json.loads(line) for line in (out / "events.jsonl").open()]
    return rounds, clients, json.loads((out / "summary.json").read_text()), events


def test_the_declared_kinds_are_the_files_energy_columns(run):
    rounds, clients, summary, _ = run
    assert energy_columns(rounds[0]) == [k.column for k in KINDS]
    assert energy_columns(clients[0]) == [k.column for k in KINDS if k.spender == DEVICE]
    assert energy_columns(summary) == [k.column for k in KINDS]
    assert [k.column for k in KINDS if not summary[k.column] > 0] == []  # every kind spent


def test_the_kinds_in_the_total_sum_to_it(run):
    rounds, clients, summary, _ = run
    for row in [*rounds, *clients]:
        parts = {name: float(row[name]) for name in ENERGY_FIELDS}
        assert float(row["energy_total_j"]) == pytest.approx(total_j(parts), rel=1e-12)
    assert summary["energy_total_j"] == pytest.approx(total_j(summary), rel=1e-9)
    outside = sum(summary[k.column] for k in KINDS if not k.in_total)
    assert summary["energy_total_j"] < sum(summary[k.column] for k in KINDS) - outside / 2


def test_each_kinds_events_carry_its_energy(run):
    *_, summary, events = run
    by_event = defaultdict(float)
    for event in events:
        by_event[event["kind"]] += event["energy_j"]
    declared = {name for k in KINDS for name in k.events}
    assert sum(j for name, j in by_event.items() if name not in declared) == 0.0
    for kind in KINDS:
        if kind.events:
            carried = sum(by_event[name] for name in kind.events)
            assert carried == pytest.approx(summary[kind.column], rel=1e-9), kind.column
