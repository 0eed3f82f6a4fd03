"""Tests for the shared uplink: FDMA processor sharing, TDMA and OFDMA queues, aborts."""

import math

import numpy as np
import pytest
import simpy

from fedjoule.channel.link import Link, noise_psd_w_per_hz
from fedjoule.channel.medium import (
    FdmaMedium,
    OfdmaMedium,
    TdmaMedium,
    TransmissionAborted,
    make_medium,
)
from fedjoule.errors import FedjouleError

B_HZ = 1e6
SNR = 15.0
SE = math.log2(1 + SNR)  # 4 bit/s/Hz
S_BITS = 6.4e6


def run_uploads(medium, uploads):
    """Start (start_s, bits, link) uploads; return {index: (finish_s, airtime_s)}."""
    env = medium.env
    results = {}

    def client(index, start_s, bits, link):
        yield env.timeout(start_s)
        airtime = yield from medium.transmit(bits, link)
        results[index] = (env.now, airtime)

    for index, (start_s, bits, link) in enumerate(uploads):
        env.process(client(index, start_s, bits, link))
    env.run()
    return results


@pytest.mark.parametrize("m", [1, 3, 8])
def test_fdma_equal_clients_finish_together(m):
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    seen = []

    def probe():
        yield env.timeout(0.5)
        seen.append((medium.active_count, medium.share_hz))

    env.process(probe())
    results = run_uploads(medium, [(0.0, S_BITS, link)] * m)
    expected_s = m * S_BITS / (B_HZ * SE)
    for finish_s, airtime in results.values():
        assert finish_s == pytest.approx(expected_s)
        assert airtime == pytest.approx(expected_s)
    assert seen == [(m, pytest.approx(B_HZ / m))]
    assert medium.active_count == 0
    assert env.now == pytest.approx(expected_s)  # no stray wake-ups after the end


def test_fdma_unequal_sizes():
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    results = run_uploads(medium, [(0.0, S_BITS, link), (0.0, 2 * S_BITS, link)])
    assert results[0][0] == pytest.approx(2 * S_BITS / (B_HZ * SE))
    assert results[1][0] == pytest.approx(3 * S_BITS / (B_HZ * SE))


def test_fdma_late_joiner():
    # A alone from 0 to 1 s at the full rate, then both at half rate until A ends.
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    rate = B_HZ * SE
    results = run_uploads(medium, [(0.0, S_BITS, link), (1.0, S_BITS, link)])
    a_finish = 1.0 + (S_BITS - rate) / (rate / 2)
    assert results[0][0] == pytest.approx(a_finish)
    b_left = S_BITS - (a_finish - 1.0) * rate / 2
    assert results[1][0] == pytest.approx(a_finish + b_left / rate)
    assert results[1][1] == pytest.approx(a_finish + b_left / rate - 1.0)


def test_fdma_geometry_rates_depend_on_share():
    n0 = noise_psd_w_per_hz()
    link = Link(tx_power_w=0.2, gain=1e-13)
    snr_full = 0.2 * 1e-13 / (n0 * B_HZ)

    env = simpy.Environment()
    alone = run_uploads(FdmaMedium(env, B_HZ), [(0.0, S_BITS, link)])
    assert alone[0][0] == pytest.approx(S_BITS / (B_HZ * math.log2(1 + snr_full)))

    env = simpy.Environment()
    pair = run_uploads(FdmaMedium(env, B_HZ), [(0.0, S_BITS, link)] * 2)
    # each gets B/2, over which the same power gives twice the SNR
    expected_s = S_BITS / (B_HZ / 2 * math.log2(1 + 2 * snr_full))
    assert pair[0][0] == pytest.approx(expected_s)
    assert pair[1][0] == pytest.approx(expected_s)


def test_fdma_interrupted_transmitter_frees_its_share():
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    rate = B_HZ * SE
    start_a_s, interrupt_s = 0.5, 1.0
    outcome = {}

    def client(name, start_s):
        yield env.timeout(start_s)
        try:
            airtime = yield from medium.transmit(S_BITS, link)
            outcome[name] = ("done", env.now, airtime)
        except TransmissionAborted as aborted:
            outcome[name] = ("aborted", env.now, aborted)

    def deadline(process):
        yield env.timeout(interrupt_s)
        process.interrupt("deadline")

    env.process(client("b", 0.0))
    a = env.process(client("a", start_a_s))
    env.process(deadline(a))
    env.run()

    kind, when, aborted = outcome["a"]
    assert kind == "aborted" and when == interrupt_s
    assert aborted.cause == "deadline"
    assert isinstance(aborted, simpy.Interrupt)
    assert aborted.airtime_s == pytest.approx(interrupt_s - start_a_s)
    assert aborted.bits_sent == pytest.approx((interrupt_s - start_a_s) * rate / 2)
    # B: full rate 0..0.5, half rate 0.5..1.0, full rate again afterwards
    b_left = S_BITS - 0.5 * rate - 0.5 * rate / 2
    assert outcome["b"][0] == "done"
    assert outcome["b"][1] == pytest.approx(interrupt_s + b_left / rate)
    assert medium.active_count == 0


def test_transmit_as_a_subprocess():
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    got = []

    def client():
        got.append((yield env.process(medium.transmit(S_BITS, link))))

    env.process(client())
    env.run()
    assert got == [pytest.approx(1.6)]


def test_zero_bits_take_no_time():
    env = simpy.Environment()
    for medium in (FdmaMedium(env, B_HZ), TdmaMedium(env, B_HZ), OfdmaMedium(env, B_HZ, 2)):
        results = run_uploads(medium, [(0.0, 0.0, Link(tx_power_w=0.2, snr_fixed=SNR))])
        assert results[0][1] == 0.0


@pytest.mark.parametrize("m", [1, 4])
def test_tdma_uploads_queue(m):
    env = simpy.Environment()
    medium = TdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    results = run_uploads(medium, [(0.0, S_BITS, link)] * m)
    one_s = S_BITS / (B_HZ * SE)
    finishes = sorted(finish for finish, _ in results.values())
    np.testing.assert_allclose(finishes, one_s * np.arange(1, m + 1))
    for _, airtime in results.values():
        assert airtime == pytest.approx(one_s)  # queueing time is not airtime


def test_tdma_abort_while_sending_and_while_queued():
    env = simpy.Environment()
    medium = TdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    one_s = S_BITS / (B_HZ * SE)
    outcome = {}

    def client(name):
        try:
            airtime = yield from medium.transmit(S_BITS, link)
            outcome[name] = ("done", env.now, airtime)
        except TransmissionAborted as aborted:
            outcome[name] = ("aborted", env.now, aborted.airtime_s)

    def interrupt_at(time_s, process):
        yield env.timeout(time_s)
        process.interrupt("offline")

    a = env.process(client("a"))
    b = env.process(client("b"))
    env.process(client("c"))
    env.process(interrupt_at(0.4, a))  # a is sending
    env.process(interrupt_at(0.2, b))  # b is still queued
    env.run()
    assert outcome["a"] == ("aborted", 0.4, pytest.approx(0.4))
    assert outcome["b"] == ("aborted", 0.2, 0.0)
    assert outcome["c"] == ("done", pytest.approx(0.4 + one_s), pytest.approx(one_s))


@pytest.mark.parametrize("m,blocks", [(7, 3), (4, 4), (2, 5)])
def test_ofdma_waves(m, blocks):
    env = simpy.Environment()
    medium = OfdmaMedium(env, B_HZ, blocks)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    results = run_uploads(medium, [(0.0, S_BITS, link)] * m)
    wave_s = S_BITS / (B_HZ / blocks * SE)
    finishes = sorted(finish for finish, _ in results.values())
    expected = [wave_s * (1 + i // blocks) for i in range(m)]
    np.testing.assert_allclose(finishes, expected)
    assert math.isclose(max(finishes), math.ceil(m / blocks) * wave_s)


def test_ofdma_geometry_uses_block_bandwidth():
    n0 = noise_psd_w_per_hz()
    link = Link(tx_power_w=0.2, gain=1e-13)
    env = simpy.Environment()
    results = run_uploads(OfdmaMedium(env, B_HZ, 4), [(0.0, S_BITS, link)])
    block_hz = B_HZ / 4
    expected_s = S_BITS / (block_hz * math.log2(1 + 0.2 * 1e-13 / (n0 * block_hz)))
    assert results[0][0] == pytest.approx(expected_s)


def test_make_medium():
    env = simpy.Environment()
    assert isinstance(make_medium(env, "fdma", B_HZ), FdmaMedium)
    assert isinstance(make_medium(env, "tdma", B_HZ), TdmaMedium)
    ofdma = make_medium(env, "ofdma", B_HZ, resource_blocks=5)
    assert isinstance(ofdma, OfdmaMedium) and ofdma.share_hz == B_HZ / 5
    with pytest.raises(FedjouleError, match="fdma, tdma, ofdma"):
        make_medium(env, "cdma", B_HZ)
    with pytest.raises(FedjouleError):
        FdmaMedium(env, 0.0)
    with pytest.raises(FedjouleError):
        OfdmaMedium(env, B_HZ, 0)


def _fluid_reference(starts_s, bits, links, bandwidth_hz):
    """Finish times by stepping from event to event (an independent re-derivation)."""
    now_s, left, active, done = 0.0, list(bits), set(), {}
    pending = sorted(range(len(bits)), key=lambda i: starts_s[i])
    while len(done) < len(bits):
        rates = {i: links[i].rate_bps(bandwidth_hz / len(active)) for i in active}
        finish_s = min((now_s + left[i] / rates[i] for i in active), default=math.inf)
        join_s = starts_s[pending[0]] if pending else math.inf
        next_s = min(finish_s, join_s)
        for i in active:
            left[i] -= rates[i] * (next_s - now_s)
        now_s = next_s
        if join_s <= finish_s:
            active.add(pending.pop(0))
        else:
            first = min(active, key=lambda i: left[i] / rates[i])
            active.discard(first)
            done[first] = now_s
    return done


def test_fdma_random_arrivals_match_fluid_reference():
    rng = np.random.default_rng(11)
    for _ in range(30):
        m = int(rng.integers(1, 10))
        starts_s = rng.uniform(0.0, 3.0, m)
        bits = rng.uniform(1e5, 5e6, m)
        links = [Link(tx_power_w=0.2, gain=g) for g in 10 ** rng.uniform(-14, -11, m)]
        env = simpy.Environment()
        results = run_uploads(FdmaMedium(env, B_HZ), list(zip(starts_s, bits, links, strict=True)))
        reference = _fluid_reference(starts_s, bits, links, B_HZ)
        for i in range(m):
            assert results[i][0] == pytest.approx(reference[i], rel=1e-9)
            assert results[i][1] == pytest.approx(reference[i] - starts_s[i], rel=1e-9)


def test_fdma_interrupt_at_the_finish_instant_reports_all_bits_sent():
    env = simpy.Environment()
    medium = FdmaMedium(env, B_HZ)
    link = Link(tx_power_w=0.2, snr_fixed=SNR)
    outcome = []

    def client():
        try:
            outcome.append((yield from medium.transmit(S_BITS, link)))
        except TransmissionAborted as aborted:
            outcome.append(aborted)

    def deadline(process):
        yield env.timeout(S_BITS / (B_HZ * SE))
        if process.is_alive:
            process.interrupt("deadline")

    process = env.process(client())
    env.process(deadline(process))
    env.run()
    # Either way the caller learns that the whole payload went out by the deadline.
    result = outcome[0]
    if isinstance(result, TransmissionAborted):
        assert result.bits_sent == S_BITS and result.airtime_s == pytest.approx(1.6)
    else:
        assert result == pytest.approx(1.6)
