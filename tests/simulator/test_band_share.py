"""A policy's fixed band shares (round.Allocation.band_share) in the uplink of both engines:
each client sends on s_k W for its whole upload (FDMA), on floor(s_k R) resource blocks
(OFDMA), or on the whole band in the order of decreasing share (TDMA); the SimPy processes
and the numpy engine agree, and None is the shared medium."""

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


def test_fixed_shares_give_the_closed_form_in_both_engines():
    """t_k = S / (s_k W log2(1 + p_k g / (N0 s_k W))), E_k = p_k t_k: nobody's band grows
    when the others finish."""
    scenario = load_scenario("default-theory", CLEAN)
    _, (clients,) = both(scenario, lambda e, sel: FIXED, world=same_gain_world)
    world = same_gain_world(scenario)
    band_hz = FIXED * scenario.channel.uplink_bandwidth_hz
    p = world.population.tx_power_w[clients.client]
    snr = snr_linear(p * GAIN, world.cell.noise_psd_w_per_hz, band_hz)
    up_s = airtime_s(world.uplink_bits, shannon_rate_bps(band_hz, snr))
    assert clients.uplink_airtime_s == pytest.approx(up_s, rel=1e-12)
    assert clients.energy_tx_j == pytest.approx(p * up_s, rel=1e-12)
    start_s = clients.end_s - clients.uplink_airtime_s  # the uploads start together
    assert start_s == pytest.approx(np.full(4, start_s[0]), rel=1e-12)
    assert len(set(p.tolist())) == 2 and len(set(up_s.tolist())) == 4


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
def test_both_engines_agree_on_fixed_shares(case):
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
