"""Shadowing and small-scale fading power gains (linear, unit mean for fading)."""

import numpy as np

from fedjoule.errors import FedjouleError

FADING_KINDS = ("none", "rayleigh", "rician")

Size = int | tuple[int, ...] | None


def shadowing_linear(rng: np.random.Generator, sigma_db: float, size: Size) -> np.ndarray:
    """Log-normal shadowing factor 10^(X/10) with X ~ N(0, sigma_db^2)."""
    # Log-normal shadowing (Goldsmith, Wireless Communications, ch. 2.7)
    return 10.0 ** (rng.normal(0.0, sigma_db, size) / 10.0)


def rayleigh_power(rng: np.random.Generator, size: Size) -> np.ndarray:
    """Rayleigh fading power |h|^2 ~ Exp(1)."""
    # |h|^2 of h ~ CN(0, 1) is exponential with mean 1
    return rng.exponential(1.0, size)


def rician_power(rng: np.random.Generator, k_factor: float, size: Size) -> np.ndarray:
    """Rician fading power |h|^2 with K-factor `k_factor` (linear), unit mean."""
    if k_factor < 0:
        raise FedjouleError(f"the Rician K-factor must be >= 0, got {k_factor}")
    # Rician: h = sqrt(K/(K+1)) + sqrt(1/(K+1)) * CN(0, 1), so E|h|^2 = 1
    los = np.sqrt(k_factor / (k_factor + 1.0))
    scatter = np.sqrt(1.0 / (2.0 * (k_factor + 1.0)))
    re = los + scatter * rng.standard_normal(size)
    im = scatter * rng.standard_normal(size)
    return re * re + im * im


def fading_power(
    rng: np.random.Generator, kind: str, size: Size, k_factor: float = 10.0
) -> np.ndarray:
    """Fading power gain of `kind` ("none", "rayleigh", "rician"); unit mean."""
    if kind == "none":
        return np.ones(size if size is not None else ())
    if kind == "rayleigh":
        return rayleigh_power(rng, size)
    if kind == "rician":
        return rician_power(rng, k_factor, size)
    raise FedjouleError(f"unknown fading kind {kind!r}; valid kinds: {', '.join(FADING_KINDS)}")
