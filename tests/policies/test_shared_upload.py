"""The weighted sharing's predictor (policies/shared_upload.py) and min-energy's closed
forms: the triangular solve equals the phase-by-phase walk on 60 clients for equal, random,
steep and partly zero weights, and so does its walk fallback; heSRPT's weights are
i^c - (i-1)^c by hand; the elasticity exponent is 1 / (1 - e) by hand; min-energy never
spends more than equal weights and stays within 1 % of a dense grid of its own family."""

import math

import numpy as np
import pytest

from fedjoule.channel.link import NOISE_PSD_W_PER_HZ
from fedjoule.policies import shared_upload as module
from fedjoule.policies.bandwidth import Uplink, equal_shares
from fedjoule.policies.min_energy import (
    MOST_EXPONENT,
    ON_TIME_MARGIN,
    InfeasibleAllocation,
    elasticity_exponent,
    hesrpt_weights,
    min_energy_weights,
    softmax,
)
from fedjoule.policies.shared_upload import phase_upload_time_s, shared_upload_time_s

W_HZ = 1e6


def uplink(m: int, seed: int, bits=None) -> Uplink:
    """m clients, SNR on the whole band -15 to 65 dB (as default-theory's), 0.2 or 0.01 W."""
    gen = np.random.default_rng(seed)
    snr_db = gen.uniform(-15.0, 65.0, m)
    bits = np.full(m, 6e3) if bits is None else bits
    power_w = np.where(gen.random(m) < 0.8, 0.2, 0.01)
    rx_w = 10 ** (snr_db / 10) * NOISE_PSD_W_PER_HZ * W_HZ
    return Uplink(bits, power_w, W_HZ, rx_power_w=rx_w)


def weight_cases(m: int, gen) -> list:
    steep = softmax(-0.3 * gen.permutation(m))
    some_zero = np.where(gen.random(m) < 0.2, 0.0, gen.random(m))
    return [equal_shares(uplink(m, 0)), gen.random(m), gen.random(m) ** 8, steep, some_zero]


@pytest.mark.parametrize("bits", ["equal", "mixed"])
def test_the_triangular_solve_is_the_phase_walk(bits):
    gen = np.random.default_rng(3)
    sizes = None if bits == "equal" else gen.uniform(1e3, 5e4, 60)
    up = uplink(60, 1, sizes)
    for weights in weight_cases(60, gen):
        walked_s = phase_upload_time_s(up, weights)
        solved_s = shared_upload_time_s(up, weights)
        assert np.array_equal(np.isinf(solved_s), weights == 0)
        sending = weights > 0
        assert solved_s[sending] == pytest.approx(walked_s[sending], rel=1e-12, abs=0)


def test_a_client_of_rate_zero_takes_the_walk():
    """No received power: its rate is 0 and it never ends (inf); the others' times are the
    walk's (the triangular solve cannot hold a rate of 0 on its diagonal)."""
    up = uplink(40, 2)
    up = Uplink(up.bits, up.tx_power_w, W_HZ, rx_power_w=np.where(np.arange(40) == 7, 0.0,
                                                                   up.rx_power_w))  # fmt: skip
    weights = np.random.default_rng(4).random(40)
    time_s = shared_upload_time_s(up, weights)
    assert time_s[7] == np.inf
    assert np.array_equal(time_s, phase_upload_time_s(up, weights))


@pytest.mark.parametrize("seed", [5, 6])
def test_blocks_of_a_few_phases_give_the_walks_times(monkeypatch, seed):
    """Blocks of 4 phases at most (BLOCK_RATES 160 rates over 40 clients), so most clients
    are due after the block: each block's phases are kept only while none of them ends
    within them, and the times are still the walk's."""
    gen = np.random.default_rng(seed)
    up = uplink(40, seed, gen.uniform(1e3, 5e4, 40))
    monkeypatch.setattr(module, "BLOCK_RATES", 160)
    monkeypatch.setattr(module, "LEAST_BLOCK_RATES", 1)
    for weights in weight_cases(40, gen):
        sending = weights > 0
        walked_s = phase_upload_time_s(up, weights)[sending]
        assert shared_upload_time_s(up, weights)[sending] == pytest.approx(walked_s, rel=1e-12)


def test_hesrpt_weights_by_hand():
    order = np.array([2, 0, 3, 1])  # client 2 ends first (i = 4), client 1 last (i = 1)
    # c = 2: i^2 - (i-1)^2 = 2i - 1 = 7, 5, 3, 1 over 16
    assert hesrpt_weights(order, 2.0)[[2, 0, 3, 1]] == pytest.approx(
        np.array([7, 5, 3, 1]) / 16, rel=1e-14
    )
    assert hesrpt_weights(order, 1.0) == pytest.approx(np.full(4, 0.25), rel=1e-15)
    steep = hesrpt_weights(order, MOST_EXPONENT)  # one at a time
    assert steep[2] == pytest.approx(1.0, rel=1e-12) and steep[1] < 1e-25


def test_the_elasticity_exponent_by_hand():
    up = uplink(5, 7)
    x = up.rx_power_w / (NOISE_PSD_W_PER_HZ * W_HZ / 5)  # SNR on the equal share 1/5
    e = 1 - x / ((1 + x) * np.log1p(x))  # d ln(s ln(1 + a/s)) / d ln s
    expected = 1 / (1 - np.sum(up.tx_power_w * e) / np.sum(up.tx_power_w))
    assert elasticity_exponent(up) == pytest.approx(expected, rel=1e-12)
    fixed = Uplink(np.full(3, 6e3), np.full(3, 0.2), W_HZ, snr=np.array([7.0, 1.0, 31.0]))
    assert elasticity_exponent(fixed) == MOST_EXPONENT


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("deadline_s", [math.inf, 0.14])  # 0.14 s: heSRPT late, equal not
def test_min_energy_beats_equal_and_its_family_grid(seed, deadline_s):
    up = uplink(30, seed)
    energy_j = lambda w: float(np.sum(up.tx_power_w * shared_upload_time_s(up, w)))  # noqa: E731
    on_time = lambda w: bool(np.all(shared_upload_time_s(up, w) <= deadline_s))  # noqa: E731
    weights = min_energy_weights(up, deadline_s)
    assert weights.sum() == pytest.approx(1.0, abs=1e-12) and on_time(weights)
    equal = equal_shares(up)
    assert not on_time(equal) or energy_j(weights) <= energy_j(equal)
    smith = np.argsort(up.upload_time_s(np.ones(30)) / up.tx_power_w, kind="stable")
    rank = np.argsort(smith, kind="stable")
    grid = [softmax(-a * rank) for a in np.geomspace(1e-3, 10, 200)]
    grid += [hesrpt_weights(smith, c) for c in np.geomspace(1, 100, 200)]
    best_j = min(energy_j(w) for w in grid if on_time(w))
    assert energy_j(weights) <= best_j * 1.01


def test_min_energy_leaves_room_for_the_engines_round_off():
    """A review's case (fixed spectral efficiency, per-client deadlines): the weights found
    end every upload at least ON_TIME_MARGIN (relative) before its deadline, so the
    sharing engine, its arithmetic differing in the last bits, drops nobody."""
    power_w = np.array([0.01, 0.2, 0.01, 0.2, 0.2])
    up = Uplink(np.full(5, 6e3), power_w, W_HZ, fixed_se_bps_per_hz=1.7)
    deadline_s = np.array([0.019241903551656735, 0.02318990139594658, 0.01977172703448526,
                           0.015956576608573438, 0.02247723121231788])  # fmt: skip
    weights = min_energy_weights(up, deadline_s)
    assert np.all(shared_upload_time_s(up, weights) <= deadline_s * (1 - ON_TIME_MARGIN))
    assert np.all(phase_upload_time_s(up, weights) <= deadline_s * (1 - ON_TIME_MARGIN))


def test_per_client_deadlines_that_a_weighting_meets_are_not_refused():
    """Deadlines 2.1 and 3.1 ms, two clients at SNR 15: no fixed split meets both (least
    shares sum to 1.198), but serving client 0 first does (1.5 and 3.0 ms)."""
    up = Uplink(np.full(2, 6e3), np.full(2, 0.2), W_HZ, snr=np.array([15.0, 15.0]))
    deadline_s = np.array([0.0021, 0.0031])
    time_s = shared_upload_time_s(up, min_energy_weights(up, deadline_s))
    assert np.all(time_s <= deadline_s)
    with pytest.raises(InfeasibleAllocation):  # a common deadline of 2.1 ms: none does
        min_energy_weights(up, 0.0021)


def test_a_client_too_slow_for_its_own_deadline_is_refused_before_any_search(monkeypatch):
    """Deadlines of their own, 3.1 and 1.0 ms: client 1 needs 1.5 ms even alone on the
    whole band (6,000 bits at 4 Mbit/s). The last deadline's check (3.1 ms) misses it; it
    used to be found only after the whole search (each candidate's sharing evaluated),
    now before the first evaluation."""
    import fedjoule.policies.min_energy as min_energy

    evaluations = []
    evaluate = min_energy.shared_upload
    monkeypatch.setattr(
        min_energy, "shared_upload", lambda *a, **k: evaluations.append(1) or evaluate(*a, **k)
    )
    up = Uplink(np.full(2, 6e3), np.full(2, 0.2), W_HZ, snr=np.array([15.0, 15.0]))
    with pytest.raises(InfeasibleAllocation) as refused:
        min_energy_weights(up, np.array([0.0031, 0.0010]))
    assert evaluations == []
    assert str(refused.value) == (
        "min-energy: selected client 1 cannot upload 6000 bits within 0.001 s even on the "
        "whole band"
    )


def test_a_deadline_binding_near_equal_still_finds_a_cheaper_split():
    """A common deadline 5 % above equal's longest upload (100 clients): theta^rank's
    search interval is all late there, so it looks toward equal and finds a split in time
    spending at most 0.8 of equal's energy (a review's case: it returned equal)."""
    up = uplink(100, 100)
    equal = equal_shares(up)
    deadline_s = 1.05 * shared_upload_time_s(up, equal).max()
    weights = min_energy_weights(up, deadline_s)
    time_s = shared_upload_time_s(up, weights)
    assert np.all(time_s <= deadline_s)
    equal_j = up.tx_power_w @ shared_upload_time_s(up, equal)
    assert up.tx_power_w @ time_s <= 0.8 * equal_j


def test_a_guessed_order_must_list_every_client_sending():
    up = uplink(3, 1)
    with pytest.raises(ValueError, match="every client of positive weight"):
        shared_upload_time_s(up, np.full(3, 1 / 3), order=np.array([0, 1]))


@pytest.mark.parametrize("rate", ["fixed-snr", "fixed-se", "interference"])
def test_the_triangular_solve_is_the_phase_walk_on_every_rate_model(rate):
    """A fixed SNR, a fixed spectral efficiency, and a noise PSD of its own per client (co-
    channel interference: N0 + I / W), each against the walk."""
    gen = np.random.default_rng(8)
    base = uplink(50, 9)
    if rate == "fixed-snr":
        up = Uplink(base.bits, base.tx_power_w, W_HZ, snr=10 ** gen.uniform(-1.5, 4, 50))
    elif rate == "fixed-se":
        up = Uplink(base.bits, base.tx_power_w, W_HZ, fixed_se_bps_per_hz=2.5)
    else:
        noise = NOISE_PSD_W_PER_HZ * 10 ** gen.uniform(0, 3, 50)  # up to 30 dB of interference
        up = Uplink(base.bits, base.tx_power_w, W_HZ, rx_power_w=base.rx_power_w,
                    noise_psd_w_per_hz=noise)  # fmt: skip
    for weights in weight_cases(50, gen):
        sending = weights > 0
        walked_s = phase_upload_time_s(up, weights)[sending]
        assert shared_upload_time_s(up, weights)[sending] == pytest.approx(walked_s, rel=1e-12)


def test_a_wrong_order_with_a_tiny_weight_early_is_corrected_by_hand():
    """A review's case: the given order puts a client of weight 1e-30 second, so its phase
    is ~1e30 times too long and the next one as negative. Round-off is judged against the
    time up to each phase, not the block's end (~1e26 s here, under which client 0's end
    within phase 0 went unseen: 1.5 and 2.1 ms were returned). At 1 bit/s/Hz on 1 MHz:
    client 0 (2/3 of the band) sends 800 bits in 1.2 ms, client 1 then has 300 of its 700
    left, alone 0.3 ms; clients 2 and 3 then share equally (0.5 Mbit/s): 0.2 s for 1e5
    bits, and client 3 the rest of its 1e8 alone (99.9 s)."""
    up = Uplink(np.array([800.0, 700.0, 1e5, 1e8]), np.full(4, 0.2), W_HZ, fixed_se_bps_per_hz=1.0)
    weights = np.array([1.0, 0.5, 1e-30, 1e-30])
    expected_s = np.array([1.2e-3, 1.5e-3, 0.2015, 100.1015])
    time_s, finished = module.shared_upload(up, weights, order=np.array([1, 3, 2, 0]))
    assert time_s == pytest.approx(expected_s, rel=1e-12)
    assert finished.tolist() == [0, 1, 2, 3]


def test_a_tie_across_blocks_of_one_phase(monkeypatch):
    """Two clients alike, blocks of one phase: the second's bits left after the first's
    phase are round-off below 0, so its own phase came out negative and the first phase of
    a block was taken for a wrong one (kept -1: an IndexError). Both end together."""
    monkeypatch.setattr(module, "BLOCK_RATES", 1)
    monkeypatch.setattr(module, "LEAST_BLOCK_RATES", 1)
    up = Uplink(np.full(2, 1816.0), np.full(2, 0.2), W_HZ, snr=np.full(2, 100.0))
    time_s, finished = module.shared_upload(up, np.full(2, 0.5))
    assert time_s == pytest.approx(np.full(2, 1816.0 / (0.5e6 * math.log2(101.0))), rel=1e-14)
    assert sorted(finished.tolist()) == [0, 1] and time_s[finished[0]] <= time_s[finished[1]]


def test_a_wrong_first_guess_does_not_leave_an_empty_block(monkeypatch, capfd):
    """A given order wrong at its first phase keeps none; the next block was then 2 x 0
    phases, LAPACK refused the empty system (printing that parameter 7 was illegal) and the
    O(m^2) walk answered. With LEAST_BLOCK_RATES 1 (as above 16,384 clients sending)."""
    monkeypatch.setattr(module, "LEAST_BLOCK_RATES", 1)
    up = uplink(40, 3)
    weights = np.random.default_rng(5).random(40)
    walked_s = phase_upload_time_s(up, weights)
    order = np.argsort(-walked_s)  # the last to finish guessed first
    assert shared_upload_time_s(up, weights, order) == pytest.approx(walked_s, rel=1e-12)
    captured = capfd.readouterr()
    assert "DTRTRS" not in captured.out + captured.err


def test_clients_ending_together_keep_their_finishing_order_sorted():
    """A review's case: four clients alike end at one instant; a given order puts one of
    weight 1e-30 second, so they end over two blocks, the second's first phase round-off
    below 0 (it ended an ulp before the first: the finishing order was not sorted by time).
    A phase is now at least 0 long: all four at one time, the walk's."""
    up = Uplink(np.full(7, 113.30468615435113), np.full(7, 0.2), W_HZ,
                snr=np.full(7, 2216801.9465369065))  # fmt: skip
    weights = np.array([1.0, 1.0, 1e-30, 1.0, 1e-30, 1e-30, 1.0])
    time_s, finished = module.shared_upload(up, weights, order=np.array([6, 4, 0, 1, 5, 3, 2]))
    assert np.all(np.diff(time_s[finished]) >= 0)
    assert np.array_equal(time_s, phase_upload_time_s(up, weights))


def test_a_client_within_the_engines_finish_tolerance_ends_with_the_one_before():
    """As the engines (channel/sharing.FINISH_TOLERANCE_S, 1 ns): a client 0.5 ns of
    sending short of its end when another's phase ends ends then too, its last bits
    dropped (the solve gave it its exact end, 0.5 ns later, and the next client's 0.17 ns
    later: a review's fuzz met such a pair among 2,323 clients). Equal thirds of 1 MHz at
    1 bit/s/Hz: 3,333 bits in 9.999 ms; the third then sends its 2,667 bits left alone."""
    rate_bps = W_HZ / 3
    bits = np.array([3333.0, 3333.0 + rate_bps * 0.5e-9, 6000.0])
    up = Uplink(bits, np.full(3, 0.2), W_HZ, fixed_se_bps_per_hz=1.0)
    time_s, finished = module.shared_upload(up, np.full(3, 1 / 3))
    first_s = 3333.0 / rate_bps
    expected_s = [first_s, first_s, first_s + 2667.0 / W_HZ]
    assert time_s == pytest.approx(expected_s, rel=1e-12)
    assert np.array_equal(time_s, phase_upload_time_s(up, np.full(3, 1 / 3)))
    assert finished.tolist() == [0, 1, 2]


def test_a_wrong_order_among_near_ties_is_not_taken_for_round_off():
    """Three clients 1.2e-12 and 2.5e-12 (relative) apart, given in a wrong order: the
    first phase (client 2's end) overshoots client 1's by 1.2e-12 of the time, which a
    round-off allowance of 1e-12 took for round-off (times 1.2e-12 late); all three end
    at client 1's end (the engines' 1 ns rule): 100 bits at 4e6 / 3 bit/s."""
    bits = np.array([100.0 + 2.5e-10, 100.0, 100.0 + 1.2e-10])
    up = Uplink(bits, np.full(3, 0.2), W_HZ, snr=np.full(3, 15.0))
    time_s = shared_upload_time_s(up, np.full(3, 1 / 3), order=np.array([2, 0, 1]))
    assert time_s == pytest.approx(np.full(3, 100.0 / (4e6 / 3)), rel=1e-14, abs=0)
