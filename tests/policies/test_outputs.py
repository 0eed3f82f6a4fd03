"""A policy's decisions in the run's files (issue 29 item 5): a `decision` line in
events.jsonl per decided client and round, per-client means in clients.csv, and in
summary.json the policy and Jain's fairness indices of participation and energy; a
default run's events.jsonl and clients.csv as before. The toy policies are subclasses of
the engines, put in the place of the engine class `fedjoule run` uses."""

import csv
import io
import json
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

import fedjoule
from fedjoule.energy_kinds import KINDS
from fedjoule.report.fairness import POLICY_DEFAULTS, jain_index, policy_label
from fedjoule.report.results import CLIENT_COLUMNS
from fedjoule.report.summary_tables import summary_table
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator import decisions, system_run
from fedjoule.simulator import run as learning_run
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.round import Allocation
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from tests.goldens.compare import Differences, compare_file

SMALL = [
    "population.size=6",
    "training.clients_per_round=3",
    "training.rounds=3",
    "training.local_steps=4",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
]
MEANS = ("band_share_mean", "cpu_freq_hz_mean", "local_steps_mean")


class Deciding:
    """A toy policy in the kernel's allocate step: each selected client k in round r gets
    1 + (k + r) % 3 local steps (the scenario's are 4), a band share (their sum at most
    0.6) and a CPU frequency in its class's DVFS range that depend on k and r; every
    decision is kept in `decided`, (r, k) -> values."""

    def allocate(self, selected, r):
        allocation = super().allocate(selected, r)
        k = np.asarray(selected)
        allocation.local_steps = 1 + (k + r) % 3
        allocation.band_share = (1 + r % 3 + k % 2) / (4 * len(k) + 8)
        pop, classes = self.world.population, self.world.scenario.population.device_classes
        low = np.array([classes[c].cpu_freq_min_hz for c in pop.class_index[k]])
        high = np.array([classes[c].cpu_freq_max_hz for c in pop.class_index[k]])
        allocation.cpu_freq_hz = low + (high - low) * ((k + r) % 4 + 1) / 4
        self.decided = getattr(self, "decided", {})
        for i, client in enumerate(k.tolist()):
            self.decided[(r, client)] = {
                "band_share": float(allocation.band_share[i]),
                "cpu_freq_hz": float(allocation.cpu_freq_hz[i]),
                "local_steps": int(allocation.local_steps[i]),
            }
        return allocation


class FirstOnly:
    """A toy policy in the kernel's select step: client 0 alone, every round."""

    def select(self, candidates, r, key=()):
        return candidates[:1]


def engines(monkeypatch, mixin) -> dict:
    """The engines `fedjoule run` uses, with `mixin` over each; the instances made."""
    made = {}

    def deciding(base, name):
        class Engine(mixin, base):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                made[name] = self

        return Engine

    monkeypatch.setattr(system_run, "SystemEngine", deciding(SystemEngine, "numpy"))
    monkeypatch.setattr(
        system_run, "SimpySystemSimulation", deciding(SimpySystemSimulation, "simpy")
    )
    monkeypatch.setattr(learning_run, "Simulation", deciding(Simulation, "learning"))
    return made


def system(out, engine: str, sets=()):
    scenario = load_scenario("default-theory", [*SMALL, *sets])
    return system_run.run_system(scenario, out, engine=engine)[0]


def read(folder):
    with (folder / "clients.csv").open() as f:
        clients = list(csv.DictReader(f))
    events = []
    if (folder / "events.jsonl").exists():
        events = [json.loads(line) for line in (folder / "events.jsonl").open()]
    return clients, events, json.loads((folder / "summary.json").read_text())


def test_jains_index_closed_forms():
    assert jain_index([3, 3, 3, 3]) == 1.0
    assert jain_index([5, 0, 0, 0]) == 0.25  # one takes all: 1/N
    assert jain_index([0, 0, 0]) == 1.0  # nothing shared, nothing unfair
    assert jain_index([1, 2]) == pytest.approx(9 / 10, rel=1e-15)  # (1+2)^2 / (2 (1+4))


@pytest.mark.parametrize("engine", ["numpy", "simpy"])
def test_summary_gives_jains_index_of_the_runs_clients(tmp_path, engine):
    """Every client every round: participation J = 1, energy J that of clients.csv; the
    policy named with its defaults (the scenario has no `policy:` choice)."""
    folder = system(tmp_path / "all", engine, ["training.clients_per_round=6"])
    clients, _, summary = read(folder)
    assert [int(c["selected"]) for c in clients] == [3] * 6
    assert summary["jain_participation"] == 1.0
    energy = [float(c["energy_total_j"]) for c in clients]
    assert summary["jain_energy"] == pytest.approx(jain_index(energy), rel=1e-12)
    assert 1 / 6 < summary["jain_energy"] < 1.0  # distances differ
    assert summary["policy"] == POLICY_DEFAULTS


@pytest.mark.parametrize("engine", ["numpy", "simpy"])
def test_one_client_taking_all_gives_one_over_n(tmp_path, monkeypatch, engine):
    engines(monkeypatch, FirstOnly)
    _, _, summary = read(system(tmp_path / "one", engine))
    assert summary["jain_participation"] == pytest.approx(1 / 6, rel=1e-15)
    assert summary["jain_energy"] == pytest.approx(1 / 6, rel=1e-15)


def test_a_policys_decisions_are_recorded_where_it_set_them(tmp_path, monkeypatch):
    """events.jsonl: one decision line per selected client and round, holding the toy's
    values; clients.csv: their per-client means; both engines the same; energy still
    adds up per kind (the decision lines carry 0 J)."""
    made = engines(monkeypatch, Deciding)
    simpy = read(system(tmp_path / "simpy", "simpy", ["output.events=true"]))
    decided = made["simpy"].decided
    clients, events, summary = simpy
    lines = [e for e in events if e["kind"] == "decision"]
    assert len(lines) == len(decided) == 9  # 3 rounds x 3 clients
    for line in lines:
        assert line["energy_j"] == 0.0 and line["end_s"] == line["start_s"]
        values = {k: line[k] for k in ("band_share", "cpu_freq_hz", "local_steps")}
        assert values == decided[line["round"], line["client"]]
    assert {(e["round"], e["client"]) for e in lines} == set(decided)
    assert list(clients[0])[-3:] == list(MEANS)
    for c in clients:
        mine = [v for (_, k), v in decided.items() if k == int(c["client"])]
        assert int(c["selected"]) == len(mine)
        for name in ("band_share", "cpu_freq_hz", "local_steps"):
            if mine:
                mean = sum(v[name] for v in mine) / len(mine)
                assert float(c[f"{name}_mean"]) == pytest.approx(mean, rel=1e-12)
            else:
                assert c[f"{name}_mean"] == ""
    by_kind = defaultdict(float)
    for e in events:
        by_kind[e["kind"]] += e.get("energy_j", 0.0)
    for kind in KINDS:
        if kind.events:
            carried = sum(by_kind[name] for name in kind.events)
            assert carried == pytest.approx(summary[kind.column], rel=1e-9), kind.column
    numpy_clients, _, numpy_summary = read(system(tmp_path / "numpy", "numpy"))
    assert made["numpy"].decided == decided
    for a, b in zip(clients, numpy_clients, strict=True):
        assert [float(a[m] or "nan") for m in MEANS] == pytest.approx(
            [float(b[m] or "nan") for m in MEANS], rel=1e-12, nan_ok=True
        )
    assert numpy_summary["policy"] == summary["policy"] == POLICY_DEFAULTS
    for key in ("jain_participation", "jain_energy"):
        assert numpy_summary[key] == pytest.approx(summary[key], rel=1e-12)


def test_a_learning_run_records_the_decisions_too(tmp_path, monkeypatch):
    made = engines(monkeypatch, Deciding)
    out = tmp_path / "learning"
    sets = [*SMALL, "training.rounds=2", "output.events=true"]
    scenario = load_scenario("default-theory", sets)
    fedjoule.run(scenario, out, device="cpu", threads=1, quiet=True)
    clients, events, summary = read(out)
    decided = made["learning"].decided
    assert len([e for e in events if e["kind"] == "decision"]) == len(decided) == 6
    assert list(clients[0])[-3:] == list(MEANS)
    for c in clients:
        steps = [v["local_steps"] for (_, k), v in decided.items() if k == int(c["client"])]
        assert (float(c["local_steps_mean"]) if steps else None) == (
            sum(steps) / len(steps) if steps else None
        )
    assert set(summary["policy"]) == set(POLICY_DEFAULTS)


def test_a_default_run_has_no_decisions(tmp_path):
    clients, events, summary = read(system(tmp_path / "d", "simpy", ["output.events=true"]))
    assert events and not [e for e in events if e["kind"] == "decision"]
    assert list(clients[0]) == list(CLIENT_COLUMNS)
    assert isinstance(summary["jain_participation"], float)


def test_the_golden_comparison_checks_the_added_keys_and_every_recorded_one(tmp_path):
    recorded = {"energy_total_j": 1.0, "protocol": "sync"}
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "summary.json").write_text(json.dumps(recorded))

    def differences(new: dict) -> list[str]:
        (tmp_path / "new" / "summary.json").write_text(json.dumps(new))
        diff = Differences("case", tmp_path / "new")
        compare_file(tmp_path / "old" / "summary.json", tmp_path / "new" / "summary.json",
                     "summary.json", diff)  # fmt: skip
        return diff.lines

    added = {"policy": POLICY_DEFAULTS, "jain_participation": 1.0, "jain_energy": 0.5}
    assert differences({**recorded, **added}) == []
    assert differences(recorded) == [
        f"case: summary.json {key}: added key missing or not {kind}"
        for key, kind in (("policy", "dict"), ("jain_participation", "float"),
                          ("jain_energy", "float"))
    ]  # fmt: skip
    changed = differences({**recorded, **added, "energy_total_j": 2.0})
    assert changed == ["case: summary.json energy_total_j: stored 1.0, new 2.0"]


def test_report_tables_add_a_policy_column_when_one_is_not_the_default():
    def shown(rows, keys=None) -> str:
        console = Console(file=io.StringIO(), width=200, record=True)
        console.print(summary_table(rows, keys))
        return console.export_text()

    row = {"run": "a", "final_accuracy": 0.5, "energy_total_j": 1.0, "sim_time_s": 2.0}
    plain = {**row, "policy": POLICY_DEFAULTS}
    oort = {**row, "run": "b", "policy": {**POLICY_DEFAULTS, "select": "oort"}}
    assert "policy" not in shown([plain, {**row, "run": "c"}])
    assert "select=oort" in shown([plain, oort]) and "default" in shown([plain, oort])
    assert policy_label(oort["policy"]) == "select=oort"
    assert "policy" not in shown([plain, oort], ["policy.select"])  # the grid says it


def test_hierarchical_edge_rounds_record_each_allocation(tmp_path, monkeypatch):
    """Under hierarchical an edge round allocates (its index the cloud round's x
    edge_rounds + j); each of its clients gets a decision line in the cloud round's."""
    made = engines(monkeypatch, Deciding)
    sets = ["output.events=true", "protocol.kind=hierarchical", "protocol.edge_rounds=2"]
    clients, events, summary = read(system(tmp_path / "h", "simpy", sets))
    decided = made["simpy"].decided
    lines = [e for e in events if e["kind"] == "decision"]
    assert len(lines) == len(decided) == summary["selected_total"] == 18  # 3 x 2 x 3
    assert sorted((e["round"], e["client"]) for e in lines) == sorted(
        (q // 2, k) for q, k in decided
    )
    for e in lines:  # the values of one of the cloud round's two edge rounds
        values = {k: e[k] for k in ("band_share", "cpu_freq_hz", "local_steps")}
        edge = [decided.get((2 * e["round"] + j, e["client"])) for j in (0, 1)]
        assert values in edge
    steps = [float(c["local_steps_mean"] or 0) * int(c["selected"]) for c in clients]
    assert sum(steps) == pytest.approx(sum(v["local_steps"] for v in decided.values()))


def test_a_resumed_run_keeps_the_decided_sums(tmp_path, monkeypatch):
    """The sums behind clients.csv's means are in the ledger, so in the checkpoint: a run
    stopped after round 1 and resumed writes the uninterrupted run's clients.csv."""
    engines(monkeypatch, Deciding)
    scenario = load_scenario("default-theory", [*SMALL, "training.rounds=2"])
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    learning_run.run_scenario(scenario, whole, device="cpu")
    learning_run.run_scenario(scenario, stopped, device="cpu", stop_after=1)
    learning_run.run_scenario(None, stopped, device="cpu", resume=True)
    assert (stopped / "clients.csv").read_text() == (whole / "clients.csv").read_text()
    assert "local_steps_mean" in (whole / "clients.csv").read_text()


def test_which_allocation_fields_count_as_decided():
    """band_share and cpu_freq_hz where not None; local_steps where they differ from the
    scenario's, or wherever the scenario's policy.steps decides them."""
    scenario_steps = np.array([4, 4, 2])
    plain = Allocation(np.array([0, 2]), np.array([4, 2]), 2)
    assert decisions.decided(plain, scenario_steps) == {}
    steps = decisions.decided(plain, scenario_steps, steps_policy=True)
    assert list(steps) == ["local_steps"] and steps["local_steps"].tolist() == [4, 2]
    both = Allocation(np.array([0, 2]), np.array([4, 1]), 2, cpu_freq_hz=np.array([1e9, 2e9]))
    found = decisions.decided(both, scenario_steps)
    assert list(found) == ["cpu_freq_hz", "local_steps"]
    assert decisions.line_values(found, 1) == {"cpu_freq_hz": 2e9, "local_steps": 1}
    assert decisions.steps_policy(SimpleNamespace(policy=SimpleNamespace(steps="deadline")))
    assert not decisions.steps_policy(SimpleNamespace(policy=SimpleNamespace(steps="fixed")))
    assert not decisions.steps_policy(SimpleNamespace())  # no policy: section
