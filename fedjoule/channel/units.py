"""Conversions between decibels and linear values (dB, dBm, watts)."""

import numpy as np
from numpy.typing import ArrayLike


def db_to_linear(x_db: ArrayLike) -> np.ndarray | float:
    """10^(x/10): a power ratio in dB as a linear factor."""
    return 10.0 ** (np.asarray(x_db, dtype=float) / 10.0)


def linear_to_db(x: ArrayLike) -> np.ndarray | float:
    """10 log10(x): a linear power ratio in dB."""
    return 10.0 * np.log10(np.asarray(x, dtype=float))


def dbm_to_w(x_dbm: ArrayLike) -> np.ndarray | float:
    """A power in dBm (dB relative to 1 mW) in watts."""
    return 10.0 ** ((np.asarray(x_dbm, dtype=float) - 30.0) / 10.0)


def w_to_dbm(x_w: ArrayLike) -> np.ndarray | float:
    """A power in watts in dBm."""
    return 10.0 * np.log10(np.asarray(x_w, dtype=float)) + 30.0
