"""Tests for the link budget: noise, Shannon rate, airtime, energy, outage, capacity."""

import numpy as np
import pytest

from fedjoule.channel.link import (
    Link,
    airtime_s,
    noise_psd_w_per_hz,
    rayleigh_ergodic_capacity_bps_per_hz,
    rayleigh_outage_probability,
    shannon_rate_bps,
    snr_linear,
)
from fedjoule.errors import FedjouleError


def test_noise_psd():
    # -174 dBm/Hz + 7 dB = -167 dBm/Hz = 10^(-19.7) W/Hz
    assert noise_psd_w_per_hz() == pytest.approx(10 ** (-19.7))
    assert noise_psd_w_per_hz(-174.0, 0.0) == pytest.approx(10 ** (-20.4))


def test_rate_airtime_energy_hand_values():
    rate = shannon_rate_bps(1e6, 15.0)
    assert rate == pytest.approx(4e6)
    assert airtime_s(6.4e6, rate) == pytest.approx(1.6)
    link = Link(tx_power_w=0.2, snr_fixed=15.0)
    assert link.rate_bps(1e6) == pytest.approx(4e6)
    assert link.tx_energy_j(1.6) == pytest.approx(0.32)
    np.testing.assert_allclose(shannon_rate_bps([1e6, 2e6], [1.0, 3.0]), [1e6, 4e6])
    assert airtime_s(1.0, 0.0) == np.inf
    assert airtime_s(0.0, 0.0) == 0.0


def test_snr_from_gain_scales_with_bandwidth():
    n0 = noise_psd_w_per_hz()
    gain = 1e-12
    link = Link(tx_power_w=0.2, gain=gain)
    expected = 0.2 * gain / (n0 * 1e6)
    assert link.snr(1e6) == pytest.approx(expected)
    assert snr_linear(0.2 * gain, n0, 1e6) == pytest.approx(expected)
    assert link.snr(5e5) == pytest.approx(2 * expected)
    assert link.rate_bps(1e6) == pytest.approx(1e6 * np.log2(1 + expected))


def test_fixed_snr_is_independent_of_bandwidth():
    link = Link(tx_power_w=0.1, snr_fixed=7.0)
    assert link.snr(1e5) == link.snr(2e7) == 7.0
    assert link.rate_bps(2e6) == pytest.approx(2 * link.rate_bps(1e6))
    with pytest.raises(FedjouleError):
        Link(tx_power_w=0.1)


@pytest.mark.parametrize("mean_snr,threshold", [(1.0, 1.0), (10.0, 3.0), (100.0, 10.0)])
def test_rayleigh_outage_matches_monte_carlo(mean_snr, threshold):
    n = 200_000
    h2 = np.random.default_rng(7).exponential(1.0, n)
    frequency = np.mean(mean_snr * h2 < threshold)
    p = rayleigh_outage_probability(mean_snr, threshold)
    assert p == pytest.approx(1 - np.exp(-threshold / mean_snr))
    assert abs(frequency - p) < 4 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0])
def test_rayleigh_ergodic_capacity_matches_monte_carlo(snr_db):
    snr = 10 ** (snr_db / 10)
    h2 = np.random.default_rng(8).exponential(1.0, 200_000)
    monte_carlo = np.mean(np.log2(1 + snr * h2))
    assert rayleigh_ergodic_capacity_bps_per_hz(snr) == pytest.approx(monte_carlo, rel=0.01)


def test_rayleigh_ergodic_capacity_limits():
    snr = np.array([0.0, 1e-6, 1e-3, 1e6])
    capacity = rayleigh_ergodic_capacity_bps_per_hz(snr)
    assert capacity[0] == 0.0
    # low SNR: E[log2(1 + s h)] ~ s log2(e); high SNR: log2(s) - gamma log2(e)
    assert capacity[1] == pytest.approx(1e-6 * np.log2(np.e), rel=1e-5)
    assert capacity[2] == pytest.approx(1e-3 * np.log2(np.e), rel=2e-3)
    assert capacity[3] == pytest.approx(np.log2(1e6) - np.euler_gamma * np.log2(np.e), rel=1e-4)
    assert np.all(np.isfinite(capacity))
