"""A policy's band shares (round.Allocation.band_share) in the uplink of both engines:
under FDMA each client's share s_k weighs the cell's band, B s_k / sum of the uploading s_j
at each instant (generalised processor sharing); under OFDMA each sends on floor(s_k R)
resource blocks; under TDMA on the whole band in the order of decreasing share; the SimPy
processes and the numpy engine agree, and None is the equally shared medium."""

import numpy as np
import pytest

from fedjoule.channel.link import airtime_s, shannon_rate_bps, snr_linear
from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import Uplink, equal_finish_shares
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.round_row import ClientsOfRound
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from tests.simulator.test_system_engine import COLUMNS, SMALL_BATTERY, assert_rows_equal

GAIN = 1e-10  # every client's large-scale gain (100 dB): one downlink, uploads start together
CLASSES = (
    "population.device_classes=[{name: strong, share: 0.5, cpu_freq_min_hz: 1.5e9, "
    "cpu_freq_max_hz: 1.5e9, tx_power_dbm: 23}, {name: weak, share: 0.5, "
    "cpu_freq_min_hz: 1.5e9, cpu_freq_max_hz: 1.5e9, tx_power_dbm: 10}]"
)
CLEAN = [
    "population.size=8", "training.clients_per_round=4", "availability.kind=always",
    "round.deadline_s=null", "round.min_clients=1", "channel.fading=none",
    "channel.shadowing_sigma_db=0", CLASSES,
]  # fmt: skip
FIXED = np.array([0.4, 0.3, 0.2, 0.1])


class Shares:
    """A toy policy in the kernel's allocate step: `shares(engine, selected)` per client."""

    shares = None

    def allocate(self, selected, r):
        allocation = super().allocate(selected, r)
        if self.shares is not None:
            allocation.band_share = self.shares(selected)
        return allocation


class NumpyShares(Shares, SystemEngine):
    pass


class SimpyShares(Shares, SimpySystemSimulation):
    pass


def same_gain_world(scenario):
    world = build_system_world(scenario)
    world.cell.large_scale_gain[:] = GAIN
    return world


def play(cls, scenario, shares, rounds=1, world=build_system_world):
    """The rows and each round's clients (ClientsOfRound) of an engine with `shares`."""
    engine = cls(world(scenario))
    engine.shares = None if shares is None else (lambda sel: shares(engine, sel))
    rows, clients = [], []

    def on_round(row):
        rows.append(row)
        if isinstance(engine, SystemEngine):
            clients.append(engine.last_clients)
        else:
            clients.append(ClientsOfRound.from_records(engine.last_records))

    engine.run(rounds, on_round)
    return rows, clients


def both(scenario, shares, rounds=1, world=build_system_world):
    simpy_rows, simpy_clients = play(SimpyShares, scenario, shares, rounds, world)
    numpy_rows, numpy_clients = play(NumpyShares, scenario, shares, rounds, world)
    assert_rows_equal(simpy_rows, numpy_rows, [*COLUMNS, *STATES])
    for a, b in zip(simpy_clients, numpy_clients, strict=True):
        assert a.client.tolist() == b.client.tolist()
        assert a.outcome.tolist() == b.outcome.tolist()
        for name in ("end_s", "uplink_airtime_s", "energy_tx_j", "uplink_bits", "energy_total_j"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-9, abs=1e-12)
    return numpy_rows, numpy_clients


def uplink_of(engine, selected) -> Uplink:
    """The allocators' view of the selected clients' uplink (policies/bandwidth.py)."""
    world = engine.world
    p = world.population.tx_power_w[selected]
    return Uplink(
        np.full(len(selected), float(world.uplink_bits)), p,
        world.scenario.channel.uplink_bandwidth_hz,
        rx_power_w=p * world.cell.large_scale_gain[selected],
        noise_psd_w_per_hz=world.cell.noise_psd_w_per_hz,
    )  # fmt: skip


def weighted_airtime_s(bits, p, shares, band_hz, noise_psd_w_per_hz):
    """Each upload's airtime when all start together on band_hz shared in proportion to
    `shares`, by hand phase by phase: the uploads left send at B s_k / sum of their s_j
    (Shannon, at the same gain GAIN) until the next of them ends."""
    left_bits, airtime = np.full(len(p), float(bits)), np.zeros(len(p))
    sending, now_s = np.ones(len(p), dtype=bool), 0.0
    while sending.any():
        b = band_hz * shares[sending] / shares[sending].sum()
        rate = shannon_rate_bps(b, snr_linear(p[sending] * GAIN, noise_psd_w_per_hz, b))
        step_s = float(np.min(left_bits[sending] / rate))
        now_s += step_s
        left_bits[sending] -= rate * step_s
        ended = np.flatnonzero(sending)[left_bits[sending] <= rate * 1e-12]
        airtime[ended], sending[ended] = now_s, False
    return airtime


def test_weighted_shares_give_the_closed_form_in_both_engines():
    """Phase by phase (weighted_airtime_s), E_k = p_k t_k; every upload but the first to end
    takes less than on its fixed band s_k W alone, t_k = S / (s_k W log2(1 + p_k g /
    (N0 s_k W))): the band a finished client frees goes to the others."""
    scenario = load_scenario("default-theory", CLEAN)
    _, (clients,) = both(scenario, lambda e, sel: FIXED, world=same_gain_world)
    world = same_gain_world(scenario)
    band_hz = scenario.channel.uplink_bandwidth_hz
    noise = world.cell.noise_psd_w_per_hz
    p = world.population.tx_power_w[clients.client]
    up_s = weighted_airtime_s(world.uplink_bits, p, FIXED, band_hz, noise)
    assert clients.uplink_airtime_s == pytest.approx(up_s, rel=1e-12)
    assert clients.energy_tx_j == pytest.approx(p * up_s, rel=1e-12)
    start_s = clients.end_s - clients.uplink_airtime_s  # the uploads start together
    assert start_s == pytest.approx(np.full(4, start_s[0]), rel=1e-12)
    assert len(set(p.tolist())) == 2 and len(set(up_s.tolist())) == 4
    own_hz = FIXED * band_hz
    alone_s = airtime_s(
        world.uplink_bits, shannon_rate_bps(own_hz, snr_linear(p * GAIN, noise, own_hz))
    )
    first = np.argmin(up_s)
    assert up_s[first] == pytest.approx(alone_s[first], rel=1e-12)
    later = np.arange(4) != first
    assert np.all(up_s[later] < alone_s[later] * (1 - 1e-3))


def test_two_shares_closed_form_first_on_its_share_then_the_other_alone():
    """Shares 0.75 / 0.25, starting together: both at b_k = s_k W, r_k = b_k log2(1 + p_k g /
    (N0 b_k)), until the first ends at t_1 = S / r_a; the other then sends its last
    S - r_o t_1 bits alone on W: t_2 = t_1 + (S - r_o t_1) / r_o(W)."""
    scenario = load_scenario("default-theory", [*CLEAN, "training.clients_per_round=2"])
    shares = np.array([0.75, 0.25])
    _, (clients,) = both(scenario, lambda e, sel: shares, world=same_gain_world)
    world = same_gain_world(scenario)
    band_hz, noise = scenario.channel.uplink_bandwidth_hz, world.cell.noise_psd_w_per_hz
    bits = float(world.uplink_bits)
    p = world.population.tx_power_w[clients.client]
    rate = shannon_rate_bps(shares * band_hz, snr_linear(p * GAIN, noise, shares * band_hz))
    a = int(np.argmax(rate))  # the first to end
    o = 1 - a
    t1_s = bits / rate[a]
    t2_s = t1_s + (bits - rate[o] * t1_s) / shannon_rate_bps(
        band_hz, snr_linear(p[o] * GAIN, noise, band_hz)
    )
    expected = np.array([t1_s, t2_s]) if a == 0 else np.array([t2_s, t1_s])
    assert clients.uplink_airtime_s == pytest.approx(expected, rel=1e-12)
    assert clients.energy_tx_j == pytest.approx(p * expected, rel=1e-12)
    assert clients.end_s - clients.end_s.min() == pytest.approx(expected - t1_s, abs=1e-15)
    assert t2_s < bits / rate[o] * (1 - 1e-3)  # sooner than on its fixed share alone


def test_equal_finish_shares_end_every_upload_together():
    scenario = load_scenario("default-theory", CLEAN)

    def shares(engine, selected):
        return equal_finish_shares(uplink_of(engine, selected))

    _, (clients,) = both(scenario, shares, world=same_gain_world)
    assert clients.end_s == pytest.approx(np.full(4, clients.end_s[0]), rel=1e-9)
    # against the shared medium's equal split, the last upload ends no later
    _, (shared,) = play(NumpyShares, scenario, None, world=same_gain_world)
    assert clients.end_s.max() <= shared.end_s.max() * (1 + 1e-12)


@pytest.mark.parametrize("engine", [NumpyShares, SimpyShares])
def test_none_is_the_shared_medium(engine):
    scenario = load_scenario("default-theory", ["training.rounds=3"])
    plain = play(engine.__mro__[2], scenario, None, rounds=3)[0]
    rows = play(engine, scenario, lambda e, sel: None, rounds=3)[0]
    assert [{c: r[c] for c in COLUMNS} for r in rows] == [{c: r[c] for c in COLUMNS} for r in plain]


# name: (scenario, overrides, the drop causes (or "attempts") it must exercise): fading,
# outage and retransmissions, deadline, over-commit, battery, cells, OFDMA's resource
# blocks, a fixed rate, a 5G radio with states and rate-dependent power
CASES = {
    "fdma-outage-retx": ("urban-macro", ["availability.kind=always", "output.events=false",
                                         "output.timeline_rounds=[]", "channel.access=fdma",
                                         "channel.outage_target_se_bps_per_hz=8",
                                         "round.overcommit=1"], ["outage", "attempts"]),
    "battery": ("default-theory", [SMALL_BATTERY, "round.deadline_s=null"], ["battery"]),
    "fdma-deadline-overcommit": ("default-theory", ["round.overcommit=1.5",
                                                    "round.deadline_s=0.05"], ["overcommit"]),
    "cells-backhaul": ("dense-small-cells", ["round.deadline_s=0.3"], ["deadline"]),
    "ofdma": ("default-theory", ["channel.access=ofdma", "channel.resource_blocks=100"], []),
    "fixed-rate": ("default-theory", ["channel.rate=fixed", "channel.max_retx=2",
                                      "channel.fading_per=transmission",
                                      "channel.spectral_efficiency_bits_per_hz=2"],
                   ["outage", "attempts"]),
    "tdma-deadline-retx": ("urban-macro", ["availability.kind=always", "channel.access=tdma",
                                           "round.deadline_s=1.0", "round.overcommit=1",
                                           "channel.outage_target_se_bps_per_hz=4"],
                           ["deadline", "attempts"]),
    "tdma-slot-deadline": ("default-theory", ["channel.access=tdma", "round.deadline_s=0.04"],
                           ["deadline"]),
    "tdma-battery": ("default-theory", [SMALL_BATTERY, "round.deadline_s=null",
                                        "channel.access=tdma"], ["battery"]),
    "5g-radio": ("default-theory", [
        "population.device_classes=[{profile: phone-5g, share: 1.0}]", "round.interval_s=5",
        "round.deadline_s=null",
    ], []),
}  # fmt: skip
STATES = ["energy_radio_promotion_j", "energy_radio_tail_j", "energy_idle_j"]


def unequal(engine, selected):
    """Shares 1..m in proportion, each cell's summing to 1."""
    cells = engine.world.serving_cell[selected]
    weight = np.arange(1.0, len(selected) + 1)
    return weight / np.bincount(cells, weights=weight)[cells]


@pytest.mark.parametrize("case", CASES)
def test_both_engines_agree_on_a_policys_shares(case):
    name, overrides, exercised = CASES[case]
    rows, _ = both(load_scenario(name, overrides), unequal, rounds=6)
    assert sum(r["arrived"] for r in rows) > 0
    for what in exercised:  # the case does exercise what it is named for
        if what == "attempts":
            assert any(r["uplink_attempts"] > r["selected"] for r in rows)
        else:
            assert sum(r[f"dropped_{what}"] for r in rows) > 0, what


def test_ofdma_sends_on_whole_resource_blocks():
    """Share 0.25 of R = 10 blocks: 2 blocks, 2 B / R."""
    scenario = load_scenario("default-theory", [*CLEAN, "channel.access=ofdma"])
    _, (clients,) = both(scenario, lambda e, sel: np.full(4, 0.25), world=same_gain_world)
    world = same_gain_world(scenario)
    band_hz = 2 * scenario.channel.uplink_bandwidth_hz / 10
    p = world.population.tx_power_w[clients.client]
    snr = snr_linear(p * GAIN, world.cell.noise_psd_w_per_hz, band_hz)
    up_s = airtime_s(world.uplink_bits, shannon_rate_bps(band_hz, snr))
    assert clients.uplink_airtime_s == pytest.approx(up_s, rel=1e-12)


@pytest.mark.parametrize(
    "overrides, shares, message",
    [
        (
            ["channel.interference=cochannel", "topology.cells=3", "topology.layout=hexagonal"],
            np.full(4, 0.25),
            "model.* channel.interference=cochannel",
        ),
        ([], np.array([0.5, 0.3, 0.2, 0.1]), "they sum to 1.1 > 1 in cell 0"),
        ([], np.array([0.5, 0.0, 0.2, 0.1]), "share 0.0 of the round's client 1 is not in"),
        (["channel.access=ofdma"], np.array([0.5, 0.3, 0.05, 0.1]), "below one OFDMA resource"),
    ],
)
@pytest.mark.parametrize("engine", [NumpyShares, SimpyShares])
def test_bad_shares_are_refused(engine, overrides, shares, message):
    scenario = load_scenario("default-theory", [*CLEAN, *overrides])
    with pytest.raises(FedjouleError, match=message):
        play(engine, scenario, lambda e, sel: shares)


def test_tdma_serves_clients_in_the_order_of_decreasing_share():
    """Uploads asked for together: the largest share sends first, each on the whole band B
    for S / (B log2(1 + p g / (N0 B))), the next once it is done."""
    scenario = load_scenario("default-theory", [*CLEAN, "channel.access=tdma"])
    order = np.array([0.1, 0.4, 0.2, 0.3])
    _, (clients,) = both(scenario, lambda e, sel: order, world=same_gain_world)
    world = same_gain_world(scenario)
    band_hz = scenario.channel.uplink_bandwidth_hz
    p = world.population.tx_power_w[clients.client]
    up_s = world.uplink_bits / shannon_rate_bps(
        band_hz, snr_linear(p * GAIN, world.cell.noise_psd_w_per_hz, band_hz)
    )
    assert clients.uplink_airtime_s == pytest.approx(up_s, rel=1e-12)
    served = np.argsort(-order)  # 1, 3, 2, 0
    start_s = clients.end_s[served[0]] - up_s[served[0]]
    assert clients.end_s[served] == pytest.approx(start_s + np.cumsum(up_s[served]), rel=1e-12)
