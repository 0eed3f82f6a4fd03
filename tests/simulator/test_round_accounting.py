"""A round's time and energy equal hand-computed values (docs/models.md formulas)."""

import math

import numpy as np
import pytest

from fedjoule.models import build_model
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world

P_TX_W = 10 ** (23 / 10) / 1000  # 23 dBm
FREQ_HZ, KAPPA, BATCH, STEPS, M = 1.5e9, 1e-28, 10, 4, 4
UP_HZ, DOWN_HZ, SNR_DB = 1e6, 20e6, 10.0

FIXED = [
    "population.size=8",
    f"training.clients_per_round={M}",
    f"training.local_steps={STEPS}",
    f"training.batch_size={BATCH}",
    "training.rounds=3",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    f"channel.snr_db={SNR_DB}",
    "channel.fading=none",
    f"channel.uplink_bandwidth_hz={UP_HZ}",
    f"channel.downlink_bandwidth_hz={DOWN_HZ}",
    "channel.access=fdma",
    f"population.device_classes=[{{name: phone, share: 1.0, cpu_freq_min_hz: {FREQ_HZ}, "
    f"cpu_freq_max_hz: {FREQ_HZ}, kappa: {KAPPA}, tx_power_dbm: 23, rx_power_w: 0.1}}]",
]


def scenario(*extra):
    return load_scenario("default-theory", FIXED + list(extra))


def hand_costs(s):
    """Payloads, per-step cost and airtimes from the formulas, independently of the simulator."""
    model, _ = build_model(s.model, (s.dataset.synthetic.dim,), s.dataset.synthetic.classes, 0)
    params = s.dataset.synthetic.dim * s.dataset.synthetic.classes + s.dataset.synthetic.classes
    assert model.n_params == params
    bits = params * 32 + s.channel.header_bits
    forward_flops = 2 * s.dataset.synthetic.dim * s.dataset.synthetic.classes  # one matmul
    cycles = 3 * forward_flops / 4.0  # c = 3 x forward FLOPs / flops_per_cycle
    return {
        "bits": bits,
        "step_s": cycles * BATCH / FREQ_HZ,  # t = c B / f
        "step_j": KAPPA * cycles * BATCH * FREQ_HZ**2,  # E = kappa c B f^2
        "rate_up_bps": UP_HZ / M * math.log2(1 + 10 ** (SNR_DB / 10)),  # FDMA share B/m
        "rate_down_bps": DOWN_HZ * math.log2(1 + 10 ** (SNR_DB / 10)),
    }


def test_round_time_and_energy_equal_the_formulas(tmp_path):
    s = scenario()
    _, summary = run_scenario(s, tmp_path, device="cpu")
    c = hand_costs(s)
    down_s = c["bits"] / c["rate_down_bps"]
    up_s = c["bits"] / c["rate_up_bps"]  # equal clients share B/m all the way through
    round_s = down_s + STEPS * c["step_s"] + up_s
    rows = read_rounds(tmp_path / "rounds.csv")
    for r, row in enumerate(rows):
        assert row["sim_time_start_s"] == pytest.approx(r * round_s, rel=1e-9)
        assert row["sim_time_end_s"] - row["sim_time_start_s"] == pytest.approx(round_s, rel=1e-9)
        assert row["uplink_airtime_s"] == pytest.approx(M * up_s, rel=1e-9)
        assert row["energy_tx_j"] == pytest.approx(M * P_TX_W * up_s, rel=1e-9)
        assert row["energy_rx_j"] == pytest.approx(M * 0.1 * down_s, rel=1e-9)
        assert row["energy_compute_j"] == pytest.approx(M * STEPS * c["step_j"], rel=1e-9)
        assert row["uplink_bits"] == M * c["bits"]
    assert summary["energy_total_j"] == pytest.approx(sum(r["energy_total_j"] for r in rows))


def test_compute_energy_per_client_is_kappa_c_b_f2_k(tmp_path):
    s = scenario("training.local_steps=7")
    run_scenario(s, tmp_path, device="cpu")
    c = hand_costs(s)
    import csv

    with (tmp_path / "clients.csv").open() as f:
        for row in csv.DictReader(f):
            expected = int(row["selected"]) * 7 * c["step_j"]
            assert float(row["energy_compute_j"]) == pytest.approx(expected, rel=1e-12)


def test_lower_snr_or_bandwidth_means_more_airtime_and_tx_energy(tmp_path):
    totals = {}
    for label, extra in {
        "base": [],
        "low_snr": ["channel.snr_db=0"],
        "narrow": [f"channel.uplink_bandwidth_hz={UP_HZ / 4}"],
    }.items():
        _, summary = run_scenario(scenario(*extra), tmp_path / label, device="cpu")
        totals[label] = summary["energy_tx_j"]
    # airtime scales with 1/log2(1+snr) and with 1/B exactly (fixed SNR)
    assert totals["low_snr"] == pytest.approx(totals["base"] * math.log2(11) / math.log2(2))
    assert totals["narrow"] == pytest.approx(totals["base"] * 4)


def test_deadline_drops_uploads_still_in_flight_and_counts_their_energy(tmp_path):
    c = hand_costs(scenario())
    down_s = c["bits"] / c["rate_down_bps"]
    upload_start = down_s + STEPS * c["step_s"]
    up_s = c["bits"] / c["rate_up_bps"]
    deadline = upload_start + 0.5 * up_s  # half-way through the uploads
    _, summary = run_scenario(scenario(f"round.deadline_s={deadline}"), tmp_path, device="cpu")
    for row in read_rounds(tmp_path / "rounds.csv"):
        assert row["arrived"] == 0 and row["dropped_deadline"] == M and row["failed"] == 1
        assert row["sim_time_end_s"] - row["sim_time_start_s"] == pytest.approx(deadline)
        assert row["energy_tx_j"] == pytest.approx(M * P_TX_W * 0.5 * up_s, rel=1e-9)
        assert row["uplink_bits"] == pytest.approx(M * 0.5 * c["bits"], rel=1e-9)
    # failed rounds leave the model where it was
    assert summary["final_accuracy"] == pytest.approx(
        read_rounds(tmp_path / "rounds.csv")[0]["accuracy"]
    )


def test_min_clients_fails_a_round_but_its_energy_is_spent(tmp_path):
    s = scenario("round.min_clients=4", "round.deadline_s=1e9")
    world = build_world(s, device="cpu")
    sim = Simulation(world)
    w0 = sim.state["w"].clone()
    rows = []
    sim.run(1, rows.append)
    assert rows[0]["arrived"] == M and rows[0]["failed"] == 0
    assert not np.allclose(sim.state["w"].numpy(), w0.numpy())


def test_a_round_with_nobody_online_waits_and_fails(tmp_path):
    s = scenario(
        "availability.kind=bernoulli", "availability.p_drop=0.9", "round.idle_wait_s=7.5",
        "training.rounds=12",
    )
    run_scenario(s, tmp_path, device="cpu")
    rows = read_rounds(tmp_path / "rounds.csv")
    empty = [r for r in rows if r["online"] == 0]
    assert empty, "with p_drop=0.9 and 8 clients some rounds have nobody online (0.9^8=0.43)"
    for r in empty:
        assert r["selected"] == 0 and r["failed"] == 1 and r["energy_total_j"] == 0
        assert r["sim_time_end_s"] - r["sim_time_start_s"] == pytest.approx(7.5)


def test_stop_at_target_ends_the_run_at_the_first_round_reaching_it(tmp_path):
    s = load_scenario(
        "default-theory", ["training.target_value=0.6", "training.stop_at_target=true", "seed=2"]
    )
    _, summary = run_scenario(s, tmp_path, device="cpu")
    rows = read_rounds(tmp_path / "rounds.csv")
    assert summary["rounds_to_target"] == summary["rounds_completed"] == len(rows) < 100
    assert rows[-1]["accuracy"] >= 0.6 > max(r["accuracy"] for r in rows[:-1])
