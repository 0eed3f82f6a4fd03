"""Simulator-level checks of the wireless models against closed forms: shared media,
retransmissions, backhaul, cells, batteries, over-commit, events and the round timeline."""

import json
import math

import numpy as np
import pytest

from fedjoule.channel.link import Link
from fedjoule.report.results import read_rounds
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.transfers import attempt_plan
from fedjoule.simulator.world import build_world
from tests.simulator.test_round_accounting import (
    BATCH,
    FREQ_HZ,
    KAPPA,
    P_TX_W,
    SNR_DB,
    STEPS,
    UP_HZ,
    M,
    hand_costs,
    scenario,
)

SE = math.log2(1 + 10 ** (SNR_DB / 10))  # bit/s/Hz at the fixed SNR


def one_round(*extra, rounds=1):
    """Play `rounds` rounds in memory; the rows and the last round's records."""
    sim = Simulation(build_world(scenario(*extra), device="cpu"))
    rows = []
    sim.run(rounds, rows.append)
    return sim, rows


def upload_start(c):
    return c["bits"] / c["rate_down_bps"] + STEPS * c["step_s"]


def test_tdma_equal_uploads_finish_one_after_another():
    sim, rows = one_round("channel.access=tdma")
    c = hand_costs(sim.world.scenario)
    one_s = c["bits"] / (UP_HZ * SE)  # S / r with the whole band
    ends = sorted(rec.end_s for rec in sim.last_records)
    np.testing.assert_allclose(ends, upload_start(c) + one_s * np.arange(1, M + 1), rtol=1e-12)
    assert rows[0]["uplink_airtime_s"] == pytest.approx(M * one_s, rel=1e-12)  # queueing is free
    assert rows[0]["energy_tx_j"] == pytest.approx(M * P_TX_W * one_s, rel=1e-12)


def test_ofdma_finishes_in_ceil_m_over_r_waves():
    m, blocks = 7, 3
    sim, _ = one_round(
        "channel.access=ofdma", f"channel.resource_blocks={blocks}",
        f"training.clients_per_round={m}",
    )  # fmt: skip
    c = hand_costs(sim.world.scenario)
    wave_s = c["bits"] / (UP_HZ / blocks * SE)  # S / r on one block of B/R
    ends = np.sort([rec.end_s for rec in sim.last_records])
    waves = upload_start(c) + wave_s * (np.arange(m) // blocks + 1)
    np.testing.assert_allclose(ends, waves, rtol=1e-12)
    assert len(set(np.round(ends, 12))) == math.ceil(m / blocks)


def test_fdma_late_joiner_end_to_end():
    """Two clients whose uploads start at different times (different CPU speeds): the
    first sends alone at B log2(1+snr) until the second joins, then both at B/2."""
    slow_hz = FREQ_HZ / 200  # makes the compute gap comparable to the upload
    classes = (
        f"population.device_classes=[{{name: fast, share: 0.5, cpu_freq_min_hz: {FREQ_HZ}, "
        f"cpu_freq_max_hz: {FREQ_HZ}, kappa: {KAPPA}}}, {{name: slow, share: 0.5, "
        f"cpu_freq_min_hz: {slow_hz}, cpu_freq_max_hz: {slow_hz}, kappa: {KAPPA}}}]"
    )
    sim, _ = one_round(classes, "population.size=2", "training.clients_per_round=2")
    c = hand_costs(sim.world.scenario)
    pop = sim.world.population
    down_s = c["bits"] / c["rate_down_bps"]
    cycles = c["step_s"] * FREQ_HZ / BATCH
    starts = {k: down_s + STEPS * cycles * BATCH / pop.cpu_freq_hz[k] for k in range(2)}
    first, second = sorted(starts, key=starts.get)
    full = UP_HZ * SE
    sent_alone = full * (starts[second] - starts[first])
    assert 0 < sent_alone < c["bits"]
    first_end = starts[second] + (c["bits"] - sent_alone) / (full / 2)
    second_end = first_end + (c["bits"] - (full / 2) * (first_end - starts[second])) / full
    ends = {rec.client: rec.end_s for rec in sim.last_records}
    assert ends[first] == pytest.approx(first_end, rel=1e-12)
    assert ends[second] == pytest.approx(second_end, rel=1e-12)


def test_backhaul_latency_and_capacity_add_exactly():
    latency_s, capacity_bps = 0.013, 2.5e5
    base = one_round()[1][0]
    sim, rows = one_round(
        "topology.layout=positions", "topology.bs_positions_m=[[0, 0]]",
        f"topology.backhaul_latency_s={latency_s}",
        f"topology.backhaul_capacity_bps={capacity_bps}",
    )  # fmt: skip
    c = hand_costs(sim.world.scenario)
    per_crossing_s = latency_s + c["bits"] / capacity_bps  # down and up cross it once each
    duration = rows[0]["sim_time_end_s"] - rows[0]["sim_time_start_s"]
    base_duration = base["sim_time_end_s"] - base["sim_time_start_s"]
    assert duration == pytest.approx(base_duration + 2 * per_crossing_s, rel=1e-12)
    # the backhaul costs the devices no energy
    assert rows[0]["energy_total_j"] == pytest.approx(base["energy_total_j"], rel=1e-12)


def test_each_cell_has_its_own_bandwidth_pool():
    sim, rows = one_round(
        "topology.layout=positions", "topology.bs_positions_m=[[0, 0], [500, 0]]",
        "topology.client_share_per_cell=[0.75, 0.25]", "training.clients_per_round=8",
    )  # fmt: skip
    c = hand_costs(sim.world.scenario)
    assert rows[0]["selected_per_cell"] == "6;2"
    for rec in sim.last_records:
        share = UP_HZ / (6 if rec.cell == 0 else 2)  # FDMA within the client's cell
        assert rec.uplink_airtime_s == pytest.approx(c["bits"] / (share * SE), rel=1e-12)


def test_retransmissions_cost_airtime_and_energy_per_attempt():
    extra = ["channel.outage=rayleigh", "channel.snr_db=3", "channel.max_retx=2",
             "training.clients_per_round=1", "round.min_clients=1"]  # fmt: skip
    rounds = 12
    world = build_world(scenario(*extra), device="cpu")
    sim = Simulation(world)
    rows, records = [], []
    sim.run(rounds, lambda row: (rows.append(row), records.append(list(sim.last_records))))
    c = hand_costs(world.scenario)
    one_s = c["bits"] / (UP_HZ * math.log2(1 + 10**0.3))
    ch = world.scenario.channel
    for r, (row, recs) in enumerate(zip(rows, records, strict=True)):
        (rec,) = recs
        _, fails = attempt_plan(ch, world.cell, world.scenario.seed, r, rec.client,
                                Link(P_TX_W, snr_fixed=2.0), P_TX_W, UP_HZ)  # fmt: skip
        attempts = fails.index(False) + 1 if False in fails else 3
        assert row["uplink_attempts"] == attempts
        assert row["uplink_airtime_s"] == pytest.approx(attempts * one_s, rel=1e-12)
        assert row["energy_tx_j"] == pytest.approx(attempts * P_TX_W * one_s, rel=1e-12)
        assert row["dropped_outage"] == int(all(fails)) == 1 - row["arrived"]
    assert sum(row["uplink_attempts"] for row in rows) > rounds  # some retransmissions


def test_battery_at_threshold_goes_offline_at_the_computed_time():
    c = hand_costs(scenario())
    down_s = c["bits"] / c["rate_down_bps"]
    up_s = c["bits"] / c["rate_up_bps"]
    e_rx, e_c = 0.1 * down_s, STEPS * c["step_j"]
    budget_j = e_rx + e_c + P_TX_W * up_s / 2  # runs out half-way through the upload
    charge = 0.2 + budget_j  # battery of 1 J, threshold 20 %
    classes = (
        f"population.device_classes=[{{name: phone, share: 0.75, cpu_freq_min_hz: {FREQ_HZ}, "
        f"cpu_freq_max_hz: {FREQ_HZ}, kappa: {KAPPA}}}, {{name: weak, share: 0.25, "
        f"cpu_freq_min_hz: {FREQ_HZ}, cpu_freq_max_hz: {FREQ_HZ}, kappa: {KAPPA}, "
        f"battery_j: 1.0, battery_threshold: 0.2, initial_charge_min: {charge}, "
        f"initial_charge_max: {charge}}}]"
    )
    world = build_world(scenario(classes), device="cpu")
    sim = Simulation(world)
    weak = set(np.flatnonzero(world.population.class_index == 1))
    seen = []

    def on_round(row):
        for rec in sim.last_records:
            if rec.client in weak:
                seen.append((row, rec))

    sim.run(3, on_round)
    assert seen, "a weak client is selected in one of the rounds (fixed seed)"
    row, rec = seen[0]
    hit_s = (
        row["sim_time_start_s"] + down_s + STEPS * c["step_s"] + (budget_j - e_rx - e_c) / P_TX_W
    )
    assert rec.outcome == "battery" and rec.end_s == pytest.approx(hit_s, rel=1e-12)
    assert rec.energy_total_j == pytest.approx(budget_j, rel=1e-9)
    assert row["dropped_battery"] >= 1
    for k in weak & {r.client for _, r in seen}:
        assert sim.battery_j[k] == pytest.approx(0.2)
        assert sim.ledger["selected"][k] == 1  # offline from then on
    assert len({id(r) for r, _ in seen}) == 1


def test_overcommit_keeps_the_first_m_arrivals():
    classes = (
        f"population.device_classes=[{{name: phone, share: 1.0, cpu_freq_min_hz: 1e6, "
        f"cpu_freq_max_hz: 2e9, kappa: {KAPPA}}}]"
    )
    sim, rows = one_round(classes, "round.overcommit=1.5", rounds=2)
    for row in rows:
        assert row["selected"] == math.ceil(1.5 * M) == 6
        assert row["arrived"] == M and row["dropped_overcommit"] == 2
    recs = sorted(sim.last_records, key=lambda rec: rec.end_s)
    assert [rec.outcome for rec in recs[:M]] == ["arrived"] * M
    last_arrival = recs[M - 1].end_s
    assert all(rec.outcome == "overcommit" and rec.end_s == last_arrival for rec in recs[M:])
    assert rows[-1]["sim_time_end_s"] == pytest.approx(last_arrival)


def test_events_and_timeline_agree_with_rounds_csv(tmp_path):
    s = scenario("output.events=true", "output.timeline_rounds=[1]", "channel.access=tdma")
    run_scenario(s, tmp_path, device="cpu")
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for row in read_rounds(tmp_path / "rounds.csv"):
        mine = [e for e in events if e["round"] == row["round"]]
        up = [e for e in mine if e["kind"] == "uplink"]
        assert sum(e["energy_j"] for e in up) == pytest.approx(row["energy_tx_j"], rel=1e-12)
        assert sum(e["end_s"] - e["start_s"] for e in up) == pytest.approx(
            row["uplink_airtime_s"], rel=1e-12
        )
        compute = sum(e["end_s"] - e["start_s"] for e in mine if e["kind"] == "compute")
        assert compute == pytest.approx(row["compute_time_s"], rel=1e-9)
        # TDMA: M - 1 clients queue, for S/r, 2S/r, ... (M-1)S/r
        queued = sorted(e["end_s"] - e["start_s"] for e in mine if e["kind"] == "queue")
        np.testing.assert_allclose(queued, row["uplink_airtime_s"] / M * np.arange(1, M))
    png = (tmp_path / "timeline_round_1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "timeline_round_0.png").exists()
