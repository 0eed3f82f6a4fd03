"""The policy step under the protocols beside sync (issue 29): each hierarchical edge round
selects among its own cell's clients, each async or buffered dispatch selects and allocates
by the policy, whose observation holds the server's staleness; checked against closed
forms, the rounds' energy against the clients', and the refusal of band shares."""

import json
import math
from collections import Counter, defaultdict

import pytest

from fedjoule.api import load_scenario
from fedjoule.cli import invoke
from fedjoule.simulator.checkpoint import read_checkpoint
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from tests.policies.test_wiring import rows, run, scenario_file


def participations(out) -> dict[tuple[int, int], dict]:
    """Each (row, client) of events.jsonl: its cell, dispatch instant (its downlink's
    start), compute span, upload end and outcome."""
    seen: dict[tuple[int, int], dict] = defaultdict(dict)
    for line in (out / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["outcome"] == "outside":
            continue
        p = seen[event["round"], event["client"]]
        p.update(cell=event["cell"], outcome=event["outcome"])
        if event["kind"] == "downlink":
            p["start_s"] = min(p.get("start_s", math.inf), event["start_s"])
        elif event["kind"] == "compute":
            p["compute"] = (event["start_s"], event["end_s"])
        elif event["kind"] == "uplink":
            p["end_s"] = event["end_s"]
    return seen


def test_round_robin_under_hierarchical_walks_each_cells_ring(tmp_path):
    """Edge round q = r E + j of cell c takes the m clients of its ring (the cell's clients
    by id, all online) from position (q m) mod N_c on: every client of the cell once in
    each N_c / m edge rounds when m divides N_c."""
    rounds, edge_rounds, m = 3, 2, 2
    scenario = scenario_file(
        tmp_path,
        training={"rounds": rounds, "clients_per_round": m},
        population={"size": 18},
        topology={"layout": "hexagonal", "cells": 3, "inter_site_distance_m": 200},
        protocol={"kind": "hierarchical", "edge_rounds": edge_rounds},
        policy={"select": "round-robin"},
        output={"events": True},
    )
    out = run(tmp_path, scenario)
    cell_of = {int(c["client"]): int(c["cell"]) for c in rows(out / "clients.csv")}
    # each cloud round's edge rounds of a cell, in order of their start
    by_edge: dict[tuple[int, int], dict[float, set]] = defaultdict(lambda: defaultdict(set))
    for line in (out / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "downlink":
            assert event["cell"] == cell_of[event["client"]]
            by_edge[event["round"], event["cell"]][event["start_s"]].add(event["client"])
    checked = 0
    for c in sorted(set(cell_of.values())):
        ring = sorted(k for k, cell in cell_of.items() if cell == c)
        n_c = len(ring)
        for r in range(rounds):
            starts = sorted(by_edge[r, c])
            assert len(starts) == edge_rounds
            for j, start_s in enumerate(starts):
                first = ((r * edge_rounds + j) * m) % n_c
                expected = {ring[(first + i) % n_c] for i in range(min(m, n_c))}
                assert by_edge[r, c][start_s] == expected, (r, c, j)
                checked += 1
    assert checked == 3 * rounds * edge_rounds
    # the rings wrap: a cell of fewer than 2 m clients, one walked past its end between
    # cloud rounds (more than m E clients, fewer than the run's rounds x E x m)
    sizes = sorted(Counter(cell_of.values()).values())
    assert sizes[0] < 2 * m and m * edge_rounds < sizes[-1] < rounds * edge_rounds * m


def test_steps_deadline_under_async_gives_each_dispatch_the_steps_that_fit(tmp_path):
    """K = floor((deadline - comm) / step) at each dispatch, comm the client's expected time
    outside its computation: at its first dispatch the nominal download and upload (fixed
    SNR, the update over B / m), after an arrival its last round time less its compute."""
    deadline_s, m = 0.02, 3
    scenario = scenario_file(
        tmp_path,
        training={"rounds": 8, "clients_per_round": m},
        population={"size": 8},
        channel={"snr_db": 10.0, "fading": "none"},
        round={"deadline_s": deadline_s},
        protocol={"kind": "async"},
        policy={"steps": "deadline", "max_steps": 100_000},
        output={"events": True},
    )
    out = run(tmp_path, scenario)
    spec = load_scenario(scenario)
    world, channel = build_system_world(spec), spec.channel
    se = math.log2(1 + 10 ** (channel.snr_db / 10))
    nominal_s = world.downlink_bits / (channel.downlink_bandwidth_hz * se) + world.uplink_bits / (
        channel.uplink_bandwidth_hz / m * se
    )
    comm_s: dict[int, float] = {}  # what the server measured of each client so far
    checked = 0
    for (_, k), p in sorted(participations(out).items(), key=lambda item: item[1]["start_s"]):
        step_s = world.step_time_s[k]
        start_s, end_s = p["compute"]
        steps = round((end_s - start_s) / step_s)
        expected = max(1, math.floor((deadline_s - comm_s.get(k, nominal_s)) / step_s))
        assert steps == expected > 1, (k, p)
        checked += 1
        if p["outcome"] == "arrived":
            comm_s[k] = (p["end_s"] - p["start_s"]) - steps * step_s
    assert checked >= 8 and len(comm_s) > 1


def test_buffered_with_a_policy_adds_up_per_energy_kind(tmp_path):
    """A non-random selector, CPU frequency and steps to the deadline under FedBuff: the
    rows' energy per kind equals the clients' (rounds.csv = clients.csv), and the lowered
    frequency spends less compute energy than the same run at fixed frequency."""
    sections = {
        "training": {"rounds": 6, "clients_per_round": 3},
        "round": {"deadline_s": 0.05},
        "protocol": {"kind": "buffered", "concurrency": 5},
    }
    policy = {"select": "age", "frequency": "deadline"}
    scenario = scenario_file(tmp_path, policy=policy, **sections)
    out = run(tmp_path, scenario)
    rounds, clients = rows(out / "rounds.csv"), rows(out / "clients.csv")
    assert len(rounds) == 6
    kinds = [c for c in clients[0] if c.startswith("energy_") and c in rounds[0]]
    assert "energy_compute_j" in kinds and "energy_total_j" in kinds
    for kind in kinds:
        by_rows = sum(float(row[kind] or 0) for row in rounds)
        by_clients = sum(float(c[kind]) for c in clients)
        assert by_rows == pytest.approx(by_clients, rel=1e-9, abs=1e-15), kind
    fixed = run(
        tmp_path, scenario_file(tmp_path, policy={"select": "age"}, **sections),
        name="fixed",
    )  # fmt: skip
    compute_j = [sum(float(r["energy_compute_j"]) for r in rows(o / "rounds.csv"))
                 for o in (out, fixed)]  # fmt: skip
    assert 0 < compute_j[0] < compute_j[1]


def test_the_async_observation_holds_each_clients_staleness(tmp_path):
    """FedAsync: each row aggregates one update; after it the server's observation holds
    that client's staleness, the row's staleness_max (the server's version counter)."""
    spec = load_scenario(
        scenario_file(
            tmp_path,
            training={"rounds": 12, "clients_per_round": 2},
            protocol={"kind": "async", "concurrency": 4},
            policy={"select": "age"},
        )
    )
    sim = SimpySystemSimulation(build_system_world(spec))
    seen = []

    def on_round(row: dict) -> None:
        arrived = [rec.client for rec in sim.last_records if rec.outcome == "arrived"]
        assert len(arrived) == 1
        staleness = sim.policy_step.observer.staleness_rounds[arrived[0]]
        assert staleness == row["staleness_max"]
        seen.append(int(staleness))

    sim.run(spec.training.rounds, on_round)
    assert len(seen) == 12 and max(seen) > 0


def test_a_stopped_buffered_run_with_a_policy_resumes_to_the_same_rows(tmp_path):
    """The resume replays the timeline from time 0 with what the server knew reset (the
    age selector then repeats the run's choices), and ends at the uninterrupted rows."""
    scenario = load_scenario(
        scenario_file(
            tmp_path,
            training={"rounds": 6, "clients_per_round": 3},
            population={"size": 40},
            round={"deadline_s": 0.05},
            protocol={"kind": "buffered", "concurrency": 5},
            policy={"select": "age", "steps": "deadline", "max_steps": 20},
        )
    )
    options = {"device": "cpu", "executor": "vectorised"}
    whole, _ = run_scenario(scenario, tmp_path / "whole", **options)
    stopped, _ = run_scenario(scenario, tmp_path / "stopped", stop_after=3, **options)
    run_scenario(scenario, stopped, resume=True, **options)
    a, b = rows(whole / "rounds.csv"), rows(stopped / "rounds.csv")
    assert len(a) == len(b) == 6
    for x, y in zip(a, b, strict=True):
        x.pop("wall_time_s"), y.pop("wall_time_s")
        assert x == y


@pytest.mark.parametrize(
    "kind, select", [("async", "oort"), ("buffered", "oort"), ("buffered", "power-of-choice")]
)
def test_a_stopped_streaming_run_with_a_loss_driven_selector_resumes_to_the_same_rows(
    tmp_path, kind, select
):
    """The replay trains nothing, so it sends again the losses each dispatch's clients sent
    in the run (kept in the checkpoint by dispatch): the selector makes the run's choices
    and the resumed run ends at the straight run's rows (before, the replay's selections
    differed and the resume was refused)."""
    scenario = load_scenario(
        scenario_file(
            tmp_path,
            training={"rounds": 8, "clients_per_round": 3},
            population={"size": 20},
            protocol={"kind": kind, "concurrency": 4},
            policy={"select": select},
        )
    )
    options = {"device": "cpu", "executor": "vectorised"}
    whole, _ = run_scenario(scenario, tmp_path / "whole", **options)
    stopped, _ = run_scenario(scenario, tmp_path / "stopped", stop_after=3, **options)
    sent = read_checkpoint(stopped / "checkpoint.pt")["simulation"]["policy"]["sent_by_dispatch"]
    assert len(sent["dispatch"]) == len(sent["client"]) == len(sent["loss"]) >= 6
    assert len(sent["loss_rms"]) == len(sent["loss"])
    run_scenario(scenario, stopped, resume=True, **options)
    for name in ("rounds.csv", "clients.csv"):
        a, b = rows(whole / name), rows(stopped / name)
        assert len(a) == len(b) == (8 if name == "rounds.csv" else 20)
        for x, y in zip(a, b, strict=True):
            x.pop("wall_time_s", None), y.pop("wall_time_s", None)
            assert x == y


def test_band_shares_under_async_are_refused(tmp_path, capsys):
    scenario = scenario_file(
        tmp_path, policy={"bandwidth": "equal-finish"}, protocol={"kind": "buffered"}
    )
    assert invoke(["run", scenario, "--no-train", "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("error:") == 1, err
    assert "policy.bandwidth" in err and "equal-finish" in err and "allowed equal" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
