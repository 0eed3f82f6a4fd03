"""Large-scale path loss models, in dB, as functions of distance."""

import numpy as np
from numpy.typing import ArrayLike

SPEED_OF_LIGHT_M_PER_S = 299_792_458.0


def macro_3gpp_db(distance_m: ArrayLike) -> np.ndarray | float:
    """Urban macro-cell path loss for a distance in metres."""
    # 3GPP TR 36.814 macro path loss: PL = 128.1 + 37.6 log10(d_km)
    distance_km = np.asarray(distance_m, dtype=float) / 1000.0
    return 128.1 + 37.6 * np.log10(distance_km)


def free_space_db(distance_m: ArrayLike, carrier_hz: ArrayLike) -> np.ndarray | float:
    """Free-space path loss at a carrier frequency."""
    # Friis free-space path loss: PL = 20 log10(4 pi d f / c)
    distance_m = np.asarray(distance_m, dtype=float)
    carrier_hz = np.asarray(carrier_hz, dtype=float)
    return 20.0 * np.log10(4.0 * np.pi * distance_m * carrier_hz / SPEED_OF_LIGHT_M_PER_S)


def log_distance_db(
    distance_m: ArrayLike, pl0_db: float, exponent: float, d0_m: float = 1.0
) -> np.ndarray | float:
    """Log-distance path loss with reference loss `pl0_db` at `d0_m`."""
    # Log-distance model (Rappaport, Wireless Communications): PL = PL0 + 10 n log10(d/d0)
    distance_m = np.asarray(distance_m, dtype=float)
    return pl0_db + 10.0 * exponent * np.log10(distance_m / d0_m)
