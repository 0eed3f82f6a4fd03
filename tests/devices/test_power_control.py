"""Uplink fractional power control (devices/power_control.py): the 3GPP formula at known
path losses with its P_max clip; a near client's power, SNR and energy from it in a run;
both engines equal under it; `none` (and a P0 so high that every client clips) equal to
today's outputs; the scenario checks, each one `error:` line and exit 2."""

import math
import subprocess
import sys

import numpy as np
import pytest

from fedjoule.channel.link import noise_psd_w_per_hz
from fedjoule.channel.pathloss import macro_3gpp_db
from fedjoule.channel.units import dbm_to_w
from fedjoule.devices import power_control
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from fedjoule.simulator.transfers import with_power_control
from fedjoule.simulator.world import build_world
from tests.simulator.test_system_engine import COLUMNS, assert_rows_equal

FRACTIONAL = "{power_control: fractional, p0_dbm: -80, alpha: 0.8}"


def phones(radio: str = FRACTIONAL, tx_power_dbm: float = 23) -> str:
    return (
        f"population.device_classes=[{{name: phone, share: 1.0, tx_power_dbm: {tx_power_dbm}, "
        f"radio: {radio}}}]"
    )


@pytest.mark.parametrize(
    ("path_loss_db", "bandwidth_hz", "p0_dbm", "alpha", "expected_dbm"),
    [
        (90.0, 1.8e6, -80.0, 1.0, 20.0),  # -80 + 90 + 10 log10(10 blocks)
        (100.0, 1.8e6, -80.0, 1.0, 23.0),  # 30 dBm asked: clipped at P_max
        (110.0, 180e3, -80.0, 0.8, 8.0),  # -80 + 0.8 x 110 + 10 log10(1)
        (70.0, 360e3, -106.0, 1.0, -36.0 + 10 * math.log10(2)),  # NR mu=1: one 360 kHz block
        (120.0, 18e6, -90.0, 0.7, 14.0),  # -90 + 84 + 20
        (140.0, 1e6, -80.0, 1.0, 23.0),  # far cell edge: P_max
    ],
)
def test_the_3gpp_formula_at_known_path_losses(
    path_loss_db, bandwidth_hz, p0_dbm, alpha, expected_dbm
):
    got = power_control.fractional_power_dbm(23.0, path_loss_db, bandwidth_hz, p0_dbm, alpha)
    assert got == pytest.approx(expected_dbm, abs=1e-12)


def near_far(access: str = "tdma", extra=()) -> object:
    """One cell, no shadowing or fading, no drops: each client's upload airtime is
    S / (b log2(1 + p g/(N0 b))) exactly."""
    return load_scenario(
        "default-theory",
        [
            phones(),
            "population.size=40",
            "training.clients_per_round=8",
            "availability.kind=always",
            "round.deadline_s=null",
            "channel.fading=none",
            "channel.shadowing_sigma_db=0",
            f"channel.access={access}",
            "channel.uplink_bandwidth_hz=10.0e6",
            *extra,
        ],
    )


def test_near_clients_send_below_p_max_and_their_snr_and_energy_follow():
    s = near_far()
    world = build_system_world(s)
    p_w = world.population.tx_power_w
    band_hz = 10e6  # tdma: the whole band in the client's own slot, M = 55.6 blocks
    path_loss_db = macro_3gpp_db(world.cell.distance_m)
    expected_dbm = np.minimum(23.0, -80.0 + 0.8 * path_loss_db + 10 * math.log10(band_hz / 180e3))
    np.testing.assert_allclose(p_w, dbm_to_w(expected_dbm), rtol=1e-12)
    near = p_w < dbm_to_w(23.0)
    assert 5 <= near.sum() < len(p_w)  # some clients controlled, others at P_max
    assert set(p_w[~near]) == {float(dbm_to_w(23.0))}  # the clip is P_max bit for bit
    # the SNR on the band is the controlled power's: P - PL - N0 b, in dB
    noise_dbm = 10 * math.log10(noise_psd_w_per_hz() * band_hz) + 30
    snr = p_w * world.cell.large_scale_gain / (world.cell.noise_psd_w_per_hz * band_hz)
    np.testing.assert_allclose(10 * np.log10(snr), expected_dbm - path_loss_db - noise_dbm)
    # energy: every arrived upload costs p x S / (b log2(1 + SNR)), on both engines
    closed_j = p_w * world.uplink_bits / (band_hz * np.log2(1 + snr))
    ledgers = []
    for engine in (SystemEngine(world), SimpySystemSimulation(build_system_world(s))):
        engine.run(10, lambda row: None)
        ledgers.append(engine.ledger)
    for ledger in ledgers:
        assert ledger["arrived"][near].sum() > 0
        np.testing.assert_allclose(ledger["energy_tx_j"], ledger["arrived"] * closed_j, rtol=1e-9)
    # and a controlled client pays less than it would at P_max
    full_j = (
        dbm_to_w(23.0) * world.uplink_bits / (band_hz * np.log2(1 + snr * dbm_to_w(23.0) / p_w))
    )
    assert np.all(closed_j[near] < full_j[near])


def test_both_engines_and_training_agree_under_fractional_power_control():
    """FDMA (shares change as clients finish), Rayleigh fading, shadowing, two classes."""
    s = load_scenario(
        "default-theory",
        [
            "population.device_classes=[{name: phone, share: 0.8, radio: "
            f"{FRACTIONAL}}}, {{name: iot, share: 0.2, tx_power_dbm: 10, radio: {{model: "
            "linear, power_control: fractional}}]",
            "round.deadline_s=null",
        ],
    )
    simpy_rows, numpy_rows = [], []
    SimpySystemSimulation(build_system_world(s)).run(8, simpy_rows.append)
    SystemEngine(build_system_world(s)).run(8, numpy_rows.append)
    assert_rows_equal(simpy_rows, numpy_rows)
    trained = []
    Simulation(build_world(s, device="cpu")).run(2, trained.append)
    for a, b in zip(trained, simpy_rows[:2], strict=True):
        for c in COLUMNS:
            assert a[c] == b[c], c
    none_rows = []
    plain = s.model_copy(deep=True)
    for c in plain.population.device_classes:
        c.radio.power_control, c.radio.p0_dbm, c.radio.alpha = "none", None, None
    SystemEngine(build_system_world(plain)).run(8, none_rows.append)
    assert sum(r["energy_tx_j"] for r in numpy_rows) < sum(r["energy_tx_j"] for r in none_rows)


def test_none_leaves_the_population_and_a_clipped_p0_changes_nothing():
    s = near_far(access="fdma", extra=[phones("{}")])
    world = build_system_world(s)
    assert with_power_control(s, world.population, world.cell) is world.population
    clipped = near_far(access="fdma", extra=[phones("{power_control: fractional, p0_dbm: 24}")])
    rows, clipped_rows = [], []
    SystemEngine(world).run(5, rows.append)
    SystemEngine(build_system_world(clipped)).run(5, clipped_rows.append)
    for a, b in zip(rows, clipped_rows, strict=True):
        assert a.keys() == b.keys()
        for key in a.keys() - {"wall_time_s"}:  # bit for bit (NaN: not evaluated)
            assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), key


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ([phones("{model: lte, power_control: fractional}")], "radio.power_control",
         "the lte model's power is a measured function of the throughput"),
        ([phones("{power_control: fractional, p0_dbm: 30}")], "radio.p0_dbm",
         "less than or equal to 24"),
        ([phones("{power_control: fractional, alpha: 1.5}")], "radio.alpha",
         "less than or equal to 1"),
        ([phones("{p0_dbm: -90}")], "radio.p0_dbm",
         "p0_dbm is only used with power_control=fractional"),
        ([phones(), "channel.snr_db=10"], "channel.snr_db",
         "radio.power_control=fractional (device class 'phone') needs geometry"),
    ],
)  # fmt: skip
def test_bad_settings_are_named(overrides, field, message):
    with pytest.raises(FedjouleError) as err:
        load_scenario("default-theory", overrides)
    assert field in str(err.value) and message in str(err.value)


def test_the_cli_refuses_a_measured_radio_with_exit_2(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "population:\n  device_classes:\n"
        "    - {name: p, profile: phone-5g, radio: {power_control: fractional}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "fedjoule.cli", "validate", str(scenario)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {scenario}: invalid scenario (1 problem)")
    assert "power_control=fractional needs a radio model whose power follows" in done.stderr
    assert "Traceback" not in done.stderr


def test_capacity_recomputes_the_power_for_each_candidate():
    """`capacity` tries other clients_per_round on one world: the band share, so M and the
    power, follow the candidate as a world built for it has them."""
    from fedjoule.planning.capacity import with_scenario

    s = near_far(access="fdma")
    world = build_system_world(s)
    training = s.training.model_copy(update={"clients_per_round": 2})
    candidate = s.model_copy(update={"training": training})
    got = with_scenario(world, candidate).population.tx_power_w
    np.testing.assert_array_equal(got, build_system_world(candidate).population.tx_power_w)
    near = got < dbm_to_w(23.0)
    assert np.all(got[near] > world.population.tx_power_w[near])  # a wider band: more power


def test_a_controlled_client_interferes_with_its_controlled_power():
    """Two co-channel cells, one client each, both uploading from (almost) the same instant
    (no fading or shadowing, equal compute, downloads of a few microseconds): the faster
    upload's SINR is p_f g_f / (N0 B + p_s G_sf) and the slower one's mean mixes that with
    its interference-free SNR after the faster one ends, both with the controlled powers."""
    s = load_scenario(
        "default-theory",
        [
            "population.device_classes=[{name: phone, share: 1.0, cpu_freq_min_hz: 2.0e9, "
            "cpu_freq_max_hz: 2.0e9, radio: {power_control: fractional, alpha: 0.8}}]",
            "population.size=2",
            "training.clients_per_round=2",
            "round.min_clients=1",
            "availability.kind=always",
            "round.deadline_s=null",
            "dataset.synthetic.size_sigma=0",
            "topology={layout: hexagonal, cells: 2, inter_site_distance_m: 300, "
            "client_share_per_cell: [0.5, 0.5], reuse_factor: 1}",
            "channel.interference=cochannel",
            "channel.fading=none",
            "channel.shadowing_sigma_db=0",
            "channel.access=tdma",
            "channel.uplink_bandwidth_hz=1.0e4",  # uploads of 0.2 s: starts 5 us apart
            "channel.downlink_bandwidth_hz=1.0e12",
        ],
    )
    world = build_system_world(s)
    cell, p_w = world.cell, world.population.tx_power_w
    assert sorted(cell.serving_cell) == [0, 1]
    assert np.all(p_w < dbm_to_w(23.0))  # both controlled (the interferer too)
    sim = SimpySystemSimulation(world)
    sim.run(1, lambda row: None)
    band_hz, n0 = s.channel.uplink_bandwidth_hz, cell.noise_psd_w_per_hz
    own = p_w * cell.large_scale_gain
    cross = p_w * cell.gains_all[[0, 1], cell.serving_cell[::-1]]  # at the other's station
    sinr = own / (n0 * band_hz + cross[::-1])
    rate = band_hz * np.log2(1 + sinr)
    fast, slow = (0, 1) if rate[0] > rate[1] else (1, 0)
    t_fast = world.uplink_bits / rate[fast]
    alone = own[slow] / (n0 * band_hz)
    t_alone = (world.uplink_bits - rate[slow] * t_fast) / (band_hz * np.log2(1 + alone))
    mixed = (sinr[slow] * t_fast + alone * t_alone) / (t_fast + t_alone)
    # (the downloads end 5 us apart, 2.5e-5 of the uploads' time: about 2e-4 dB)
    assert sim.sinr_db[fast] == [pytest.approx(10 * math.log10(sinr[fast]), abs=1e-3)]
    assert sim.sinr_db[slow] == [pytest.approx(10 * math.log10(mixed), abs=1e-3)]
    # an interferer at p_max would have cost the faster client far more than that
    at_p_max = own[fast] / (n0 * band_hz + cross[slow] * dbm_to_w(23.0) / p_w[slow])
    assert 10 * math.log10(sinr[fast] / at_p_max) > 1.0
