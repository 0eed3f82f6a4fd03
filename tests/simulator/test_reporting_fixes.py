"""Reporting fixes: clients.csv's mean uplink SNR is on the band each access scheme gives a
client, and downlink events in events.jsonl carry the broadcast's bits."""

import csv
import json
import math

import numpy as np
import pytest

from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import client_rows, run_scenario
from fedjoule.simulator.system_run import run_system
from fedjoule.simulator.system_world import build_system_world
from fedjoule.simulator.world import build_world

UP_HZ = 1e6
N0_W_PER_HZ = 10 ** ((-174.0 + 7.0 - 30.0) / 10)  # -174 dBm/Hz + 7 dB noise figure, in W/Hz


def closed_form_snr_db(world, band_hz):
    """10 log10(p G / (N0 b)) from the drawn powers and gains, independently of cell.py."""
    p_w, gain = world.population.tx_power_w, world.cell.large_scale_gain
    return 10 * np.log10(p_w * gain / (N0_W_PER_HZ * band_hz))


# access overrides: the band b of one client (default: clients_per_round 10, B = 1 MHz)
BANDS = {
    "fdma": (["channel.access=fdma"], UP_HZ / 10),  # B/m
    "fdma-overcommit": (["channel.access=fdma", "round.overcommit=1.3"], UP_HZ / 13),
    "tdma": (["channel.access=tdma"], UP_HZ),  # the whole band in its own slot
    "ofdma": (["channel.access=ofdma", "channel.resource_blocks=4"], UP_HZ / 4),  # B/R
}


@pytest.mark.parametrize("access", BANDS)
def test_clients_csv_snr_is_on_the_band_of_the_access_scheme(access, tmp_path):
    overrides, band_hz = BANDS[access]
    s = load_scenario("default-theory", [*overrides, "training.rounds=2"])
    out, _ = run_system(s, tmp_path)  # the numpy engine's clients.csv
    with (out / "clients.csv").open() as f:
        written = np.array([float(r["mean_uplink_snr_db"]) for r in csv.DictReader(f)])
    expected = closed_form_snr_db(build_system_world(s), band_hz)
    np.testing.assert_allclose(written, expected, rtol=1e-12)
    # the training engine's clients.csv rows: the same values
    sim = Simulation(build_world(s, device="cpu"))
    trained = np.array([row["mean_uplink_snr_db"] for row in client_rows(sim)])
    np.testing.assert_allclose(trained, expected, rtol=1e-12)


def test_snr_differs_by_the_band_ratio_between_schemes(tmp_path):
    """Same clients: tdma's SNR (B) is 10 dB below fdma's (B/10), ofdma's (B/4) 6.02 dB."""
    snr = {}
    for access in ("fdma", "tdma", "ofdma"):
        s = load_scenario("default-theory", [*BANDS[access][0], "training.rounds=1"])
        sim = Simulation(build_world(s, device="cpu"))
        snr[access] = np.array([row["mean_uplink_snr_db"] for row in client_rows(sim)])
    np.testing.assert_allclose(snr["fdma"] - snr["tdma"], 10.0, rtol=1e-9)
    np.testing.assert_allclose(snr["ofdma"] - snr["tdma"], 10 * math.log10(4), rtol=1e-9)


def test_fixed_snr_clients_csv_is_snr_db(tmp_path):
    s = load_scenario(
        "default-theory", ["channel.snr_db=7.5", "channel.access=tdma", "training.rounds=1"]
    )
    sim = Simulation(build_world(s, device="cpu"))
    assert {row["mean_uplink_snr_db"] for row in client_rows(sim)} == {7.5}


def downlinks(folder):
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == "downlink"]


def test_downlink_events_carry_the_broadcast_bits(tmp_path):
    s = load_scenario("default-theory", ["output.events=true", "training.rounds=3"])
    out, _ = run_scenario(s, tmp_path / "trained", device="cpu")
    world = build_world(s, device="cpu")
    down = downlinks(out)
    assert len(down) >= 3 * 5 and all(e["ok"] for e in down)
    assert {e["bits"] for e in down} == {world.downlink_bits}
    assert world.downlink_bits == world.n_params * 32 + 1_000  # FedAvg: the model + header
    # without training (the SimPy engine with training skipped): the same bits
    out, _ = run_system(s, tmp_path / "system")
    assert {e["bits"] for e in downlinks(out)} == {build_system_world(s).downlink_bits}


def test_a_cut_off_downlink_carries_the_bits_received(tmp_path):
    """A 1 kHz broadcast at 10 dB takes 1.7 s; the 0.5 s deadline stops it after
    0.5 s x 1000 log2(1 + 10) bits."""
    s = load_scenario(
        "default-theory",
        ["output.events=true", "training.rounds=1", "channel.downlink_bandwidth_hz=1000",
         "channel.snr_db=10", "channel.fading=none", "round.deadline_s=0.5",
         "availability.kind=always"],
    )  # fmt: skip
    out, _ = run_system(s, tmp_path)
    down = downlinks(out)
    assert len(down) == 10 and not any(e["ok"] for e in down)
    assert build_system_world(s).downlink_bits > 1000 * math.log2(11) * 1.7
    for e in down:
        assert e["end_s"] - e["start_s"] == pytest.approx(0.5, rel=1e-12)
        assert e["bits"] == pytest.approx(0.5 * 1000 * math.log2(11), rel=1e-9)


def test_multi_cell_fdma_snr_is_on_each_cells_own_band(tmp_path):
    """2 cells of 4 clients, all 8 selected: each cell splits its own band B among its 4,
    so a client's SNR is 10 log10(p g / (N0 B/4)), 3.01 dB below B/8 (issue 18, item 3);
    the numpy engine and the training engine report the same."""
    s = load_scenario(
        "default-theory",
        [
            "population.size=8",
            "training.clients_per_round=8",
            "round.min_clients=1",
            "training.rounds=1",
            "topology.layout=positions",
            "topology.bs_positions_m=[[0, 0], [5000, 0]]",
            "topology.client_share_per_cell=[0.5, 0.5]",
            "channel.shadowing_sigma_db=0",
        ],
    )
    world = build_world(s, device="cpu")
    cells = world.cell.serving_cell
    assert np.bincount(cells).tolist() == [4, 4]  # far apart: each client stays in its cell
    expected = closed_form_snr_db(world, UP_HZ / 4)
    trained = np.array([row["mean_uplink_snr_db"] for row in client_rows(Simulation(world))])
    np.testing.assert_allclose(trained, expected, rtol=1e-12)
    out, _ = run_system(s, tmp_path)
    with (out / "clients.csv").open() as f:
        written = np.array([float(r["mean_uplink_snr_db"]) for r in csv.DictReader(f)])
    np.testing.assert_allclose(written, expected, rtol=1e-12)
