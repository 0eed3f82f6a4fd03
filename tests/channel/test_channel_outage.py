"""Packet errors and retransmissions against their closed forms (docs/models.md#outage)."""

import math

import numpy as np
import pytest

from fedjoule.channel.link import Link, noise_psd_w_per_hz
from fedjoule.channel.outage import (
    attempt_error_probability,
    drop_probability,
    expected_attempts,
    rayleigh_target_threshold_snr,
    waterfall_error_probability,
)
from fedjoule.scenarios.schema import ChannelSection
from fedjoule.simulator.transfers import attempt_plan


def test_waterfall_is_chen_et_al_formula():
    # q = 1 - exp(-m N0 b / (p gain)) with hand numbers
    m, p_w, gain, b_hz = 0.023, 0.01, 1e-14, 2e4
    n0 = noise_psd_w_per_hz()
    snr = p_w * gain / (n0 * b_hz)
    assert waterfall_error_probability(m, snr) == pytest.approx(
        1 - math.exp(-m * n0 * b_hz / (p_w * gain)), rel=1e-12
    )


def test_rayleigh_target_rate_threshold_and_probability():
    assert rayleigh_target_threshold_snr(2.0) == pytest.approx(3.0)
    section = ChannelSection(outage="rayleigh", outage_target_se_bps_per_hz=1.0)
    # P(SNR |h|^2 < 2^1 - 1) = 1 - exp(-1/SNR)
    assert attempt_error_probability(section, 4.0) == pytest.approx(1 - math.exp(-0.25))
    assert attempt_error_probability(ChannelSection(), 4.0) == 0.0


def test_truncated_geometric_closed_forms():
    q = 0.3
    assert expected_attempts(q, 0) == 1.0
    assert expected_attempts(q, 3) == pytest.approx((1 - q**4) / (1 - q))
    assert drop_probability(q, 3) == pytest.approx(q**4)
    # no truncation in the limit: 1 / (1 - q)
    assert expected_attempts(q, 200) == pytest.approx(1 / (1 - q))


class _Cell:
    large_scale_gain = None
    noise_psd_w_per_hz = noise_psd_w_per_hz()


@pytest.mark.parametrize("outage,snr_db,max_retx", [("rayleigh", 3.0, 2), ("waterfall", -8.0, 3)])
def test_simulated_attempts_and_drops_match_closed_forms(outage, snr_db, max_retx):
    """The simulator's per-attempt draws (stream "outage", keyed by round and client)."""
    section = ChannelSection(snr_db=snr_db, outage=outage, max_retx=max_retx)
    q = float(attempt_error_probability(section, 10 ** (snr_db / 10)))
    assert 0.1 < q < 0.6
    link = Link(0.2, snr_fixed=10 ** (snr_db / 10))
    attempts, drops = [], []
    for r in range(200):
        for k in range(100):
            _, fails = attempt_plan(section, _Cell(), 5, r, k, link, 0.2, 1e6)
            n = fails.index(False) + 1 if False in fails else len(fails)
            attempts.append(n)
            drops.append(all(fails))
    n_draws = len(attempts)
    mean, expected = np.mean(attempts), expected_attempts(q, max_retx)
    assert abs(mean - expected) < 4 * np.std(attempts) / math.sqrt(n_draws)
    p_drop = drop_probability(q, max_retx)
    assert abs(np.mean(drops) - p_drop) < 4 * math.sqrt(p_drop * (1 - p_drop) / n_draws)
    # first-attempt error frequency is q itself
    first = 1 - np.mean(np.array(attempts) == 1)
    assert abs(first - q) < 4 * math.sqrt(q * (1 - q) / n_draws)


def test_per_transmission_fading_redraws_retransmissions_only():
    section = ChannelSection(snr_db=10.0, max_retx=2, fading_per="transmission")
    link = Link(0.2, snr_fixed=7.0)
    links, fails = attempt_plan(section, _Cell(), 0, 3, 4, link, 0.2, 1e6)
    assert fails is None and links[0] is link and len(links) == 3
    assert links[1].snr_fixed != links[2].snr_fixed
    per_round = ChannelSection(snr_db=10.0, max_retx=2)
    assert attempt_plan(per_round, _Cell(), 0, 3, 4, link, 0.2, 1e6) == (None, None)
