"""Link budget: noise, SNR, Shannon rate, airtime, outage, and one client's `Link`."""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fedjoule.channel.units import dbm_to_w
from fedjoule.errors import FedjouleError


def noise_psd_w_per_hz(noise_dbm_per_hz: float = -174.0, noise_figure_db: float = 7.0) -> float:
    """Receiver noise power spectral density N0 in W/Hz (thermal noise + noise figure)."""
    # Thermal noise kT at 290 K = -174 dBm/Hz, raised by the receiver noise figure
    return float(dbm_to_w(noise_dbm_per_hz + noise_figure_db))


def snr_linear(
    rx_power_w: ArrayLike, noise_psd_w_per_hz: ArrayLike, bandwidth_hz: ArrayLike
) -> np.ndarray | float:
    """SNR = P_rx / (N0 B)."""
    rx_power_w = np.asarray(rx_power_w, dtype=float)
    return rx_power_w / (np.asarray(noise_psd_w_per_hz) * np.asarray(bandwidth_hz))


def shannon_rate_bps(bandwidth_hz: ArrayLike, snr: ArrayLike) -> np.ndarray | float:
    """Shannon capacity B log2(1 + SNR) in bit/s."""
    # Shannon (1948): C = B log2(1 + SNR)
    return np.asarray(bandwidth_hz, dtype=float) * np.log2(1.0 + np.asarray(snr, dtype=float))


def airtime_s(bits: ArrayLike, rate_bps: ArrayLike) -> np.ndarray | float:
    """Time to send `bits` at `rate_bps`; inf where the rate is 0."""
    bits = np.asarray(bits, dtype=float)
    rate_bps = np.asarray(rate_bps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rate_bps > 0, bits / rate_bps, np.where(bits > 0, np.inf, 0.0))[()]


def rayleigh_outage_probability(
    mean_snr: ArrayLike, threshold_snr: ArrayLike
) -> np.ndarray | float:
    """P(mean_snr * |h|^2 < threshold_snr) under Rayleigh fading = 1 - exp(-g/SNR)."""
    # Rayleigh outage: |h|^2 ~ Exp(1), so P(|h|^2 < g/SNR) = 1 - exp(-g/SNR)
    ratio = np.asarray(threshold_snr, dtype=float) / np.asarray(mean_snr, dtype=float)
    return -np.expm1(-ratio)


def rayleigh_ergodic_capacity_bps_per_hz(mean_snr: ArrayLike) -> np.ndarray | float:
    """E[log2(1 + SNR |h|^2)] under Rayleigh fading, in bit/s/Hz."""
    # Rayleigh ergodic capacity: log2(e) exp(1/SNR) E1(1/SNR) (e.g. Goldsmith, ch. 4.2.4)
    from scipy.special import exp1  # deferred: scipy (0.4 s of every start-up)

    snr = np.asarray(mean_snr, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        x = 1.0 / snr
        direct = np.exp(np.minimum(x, 700.0)) * exp1(np.minimum(x, 700.0))
        # exp(x) E1(x) overflows for large x (tiny SNR); use its asymptotic series there
        asymptotic = (1.0 - 1.0 / x + 2.0 / x**2 - 6.0 / x**3 + 24.0 / x**4) / x
        scaled = np.where(x > 700.0, asymptotic, direct)
        scaled = np.where(snr > 0, scaled, 0.0)
        scaled = np.where(np.isinf(snr), np.inf, scaled)
    return (np.log2(np.e) * scaled)[()]


NOISE_PSD_W_PER_HZ = noise_psd_w_per_hz()


@dataclass(frozen=True)
class Link:
    """One client's uplink (or downlink) for one round.

    Either `gain` (linear power gain including path loss, shadowing and fading) or
    `snr_fixed` (the scenario gave the SNR directly; fading already multiplied in)
    must be given; `snr_fixed` wins when both are. `fixed_se_bps_per_hz` set: the link
    sends at that fixed spectral efficiency r (rate b r) whatever its SNR (channel.rate=fixed).
    """

    tx_power_w: float
    gain: float | None = None
    noise_psd_w_per_hz: float = NOISE_PSD_W_PER_HZ
    snr_fixed: float | None = None
    fixed_se_bps_per_hz: float | None = None

    def __post_init__(self) -> None:
        if self.gain is None and self.snr_fixed is None:
            raise FedjouleError("a Link needs either a channel gain or a fixed SNR")

    def snr(self, bandwidth_hz: float) -> float:
        """Linear SNR over `bandwidth_hz` (the fixed SNR when one was given)."""
        if self.snr_fixed is not None:
            return float(self.snr_fixed)
        assert self.gain is not None
        # SNR = p * gain / (N0 * b)
        return self.tx_power_w * self.gain / (self.noise_psd_w_per_hz * bandwidth_hz)

    def rate_bps(self, bandwidth_hz: float) -> float:
        """Shannon rate over `bandwidth_hz`, or b r at a fixed spectral efficiency r."""
        if self.fixed_se_bps_per_hz is not None:
            return bandwidth_hz * self.fixed_se_bps_per_hz
        # Shannon, in scalar math: the medium calls this on every join, finish and abort
        return bandwidth_hz * math.log2(1.0 + self.snr(bandwidth_hz))

    def tx_energy_j(self, airtime_s: float) -> float:
        """Radiated-power energy of transmitting for `airtime_s`: p * t."""
        return self.tx_power_w * airtime_s
