"""Client placement around a base station and client-to-station distances."""

import numpy as np
from numpy.typing import ArrayLike

from fedjoule.errors import FedjouleError


def uniform_disc_positions(
    rng: np.random.Generator, n: int, radius_m: float, min_radius_m: float = 10.0
) -> np.ndarray:
    """`n` points uniform in area in the annulus min_radius_m <= r <= radius_m; shape (n, 2)."""
    if not 0.0 <= min_radius_m < radius_m:
        raise FedjouleError(
            f"client placement needs 0 <= min_radius_m < radius_m, got min_radius_m="
            f"{min_radius_m} and radius_m={radius_m}"
        )
    # Inverse CDF of the radius: P(R <= r) = (r^2 - r0^2) / (R^2 - r0^2)
    u = rng.random(n)
    r = np.sqrt(min_radius_m**2 + u * (radius_m**2 - min_radius_m**2))
    theta = rng.uniform(0.0, 2.0 * np.pi, n)
    return np.column_stack([r * np.cos(theta), r * np.sin(theta)])


def distances_m(positions: ArrayLike, bs_position: ArrayLike = (0.0, 0.0)) -> np.ndarray:
    """Euclidean distance of each (x, y) row of `positions` to the base station."""
    positions = np.asarray(positions, dtype=float)
    bs = np.asarray(bs_position, dtype=float)
    return np.linalg.norm(positions - bs, axis=-1)
