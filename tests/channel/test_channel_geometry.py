"""Tests for client placement and distances."""

import numpy as np
import pytest

from fedjoule.channel.geometry import distances_m, uniform_disc_positions
from fedjoule.errors import FedjouleError


def test_uniform_disc_is_uniform_in_area():
    rng = np.random.default_rng(1)
    n, radius_m, min_radius_m = 200_000, 500.0, 10.0
    positions = uniform_disc_positions(rng, n, radius_m, min_radius_m)
    assert positions.shape == (n, 2)
    d = distances_m(positions)
    assert d.min() >= min_radius_m and d.max() <= radius_m
    for r in (50.0, 250.0, 400.0):
        p = (r**2 - min_radius_m**2) / (radius_m**2 - min_radius_m**2)
        se = np.sqrt(p * (1 - p) / n)
        assert abs(np.mean(d <= r) - p) < 4 * se
    # angles uniform: each quadrant holds a quarter
    assert abs(np.mean(positions[:, 0] > 0) - 0.5) < 4 * np.sqrt(0.25 / n)


def test_distances_to_a_base_station():
    positions = np.array([[3.0, 4.0], [0.0, 0.0], [10.0, 0.0]])
    np.testing.assert_allclose(distances_m(positions), [5.0, 0.0, 10.0])
    np.testing.assert_allclose(
        distances_m(positions, bs_position=(10.0, 0.0)), [np.hypot(7, 4), 10, 0]
    )


def test_bad_radii_are_user_errors():
    with pytest.raises(FedjouleError):
        uniform_disc_positions(np.random.default_rng(0), 3, 10.0, 20.0)
