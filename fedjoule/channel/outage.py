"""Packet error per upload attempt (Rayleigh outage, waterfall, fixed-rate fade threshold) and
retransmission counts."""

import numpy as np
from numpy.typing import ArrayLike

from fedjoule.channel.link import rayleigh_outage_probability
from fedjoule.errors import FedjouleError

OUTAGE_KINDS = ("none", "rayleigh", "waterfall")


def rayleigh_target_threshold_snr(target_se_bps_per_hz: ArrayLike) -> np.ndarray | float:
    """SNR threshold g = 2^R - 1 below which a packet sent at R bit/s/Hz is lost."""
    # Outage at a target rate: log2(1 + SNR |h|^2) < R  <=>  SNR |h|^2 < 2^R - 1
    return np.exp2(np.asarray(target_se_bps_per_hz, dtype=float)) - 1.0


def waterfall_error_probability(waterfall_m: ArrayLike, mean_snr: ArrayLike) -> np.ndarray | float:
    """q = 1 - exp(-m N0 b / (p gain)) = 1 - exp(-m / SNR)."""
    # Chen et al., "A joint learning and communications framework for FL over wireless
    # networks", IEEE TWC 2021, eq. (4) without interference: q = 1 - exp(-m (N0 b)/(p h))
    ratio = np.asarray(waterfall_m, dtype=float) / np.asarray(mean_snr, dtype=float)
    return -np.expm1(-ratio)


def attempt_error_probability(section, mean_snr: ArrayLike) -> np.ndarray | float:
    """Per-attempt error probability of the channel section's `outage` model at `mean_snr`.

    `mean_snr` is the fading-free (large-scale) SNR on the client's nominal bandwidth;
    the small-scale fading the error model averages over is inside the closed form.
    """
    mean_snr = np.asarray(mean_snr, dtype=float)
    if section.outage == "none":
        return np.zeros_like(mean_snr)[()]
    if section.outage == "rayleigh":
        threshold = rayleigh_target_threshold_snr(section.outage_target_se_bps_per_hz)
        return rayleigh_outage_probability(mean_snr, threshold)
    if section.outage == "waterfall":
        return waterfall_error_probability(section.waterfall_m, mean_snr)
    raise FedjouleError(
        f"channel.outage: unknown model {section.outage!r}; allowed: {', '.join(OUTAGE_KINDS)}"
    )


def fixed_rate_fails(mean_snr: ArrayLike, fades: ArrayLike, se_bps_per_hz: float) -> np.ndarray:
    """Which attempts sent at spectral efficiency r fail: log2(1 + SNR |h|^2) < r.

    `mean_snr`: the fading-free SNR on the client's band (broadcasts against `fades`);
    `fades`: each attempt's fading power |h|^2. No draw: the fade decides (channel.rate=fixed).
    """
    # Outage of a slow-fading channel (Tse & Viswanath 2005, sec. 5.4.1):
    # log2(1 + SNR |h|^2) < r  <=>  SNR |h|^2 < 2^r - 1
    threshold = rayleigh_target_threshold_snr(se_bps_per_hz)
    return np.asarray(mean_snr, dtype=float) * np.asarray(fades, dtype=float) < threshold


def expected_attempts(q: ArrayLike, max_retx: int) -> np.ndarray | float:
    """E[attempts] with at most 1 + max_retx attempts: sum_{i<n} q^i = (1 - q^n) / (1 - q)."""
    # Truncated geometric law: attempt i+1 happens iff the first i failed (prob. q^i)
    q = np.asarray(q, dtype=float)
    n = max_retx + 1
    return np.sum(q[..., None] ** np.arange(n), axis=-1)[()]


def drop_probability(q: ArrayLike, max_retx: int) -> np.ndarray | float:
    """Probability that all 1 + max_retx attempts fail: q^(1 + max_retx)."""
    return (np.asarray(q, dtype=float) ** (max_retx + 1))[()]
