"""Tests for shadowing and fading against their distributions."""

import numpy as np
import pytest

from fedjoule.channel.fading import fading_power, rayleigh_power, rician_power, shadowing_linear
from fedjoule.channel.units import linear_to_db
from fedjoule.errors import FedjouleError

N = 200_000


def test_shadowing_std_in_db_is_sigma():
    x = shadowing_linear(np.random.default_rng(2), 8.0, N)
    x_db = linear_to_db(x)
    assert abs(np.mean(x_db)) < 4 * 8.0 / np.sqrt(N)
    assert np.std(x_db) == pytest.approx(8.0, rel=0.01)


def test_rayleigh_power_is_unit_exponential():
    x = rayleigh_power(np.random.default_rng(3), N)
    assert np.mean(x) == pytest.approx(1.0, abs=4 / np.sqrt(N))
    assert np.var(x) == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("k_factor", [0.0, 3.0, 10.0])
def test_rician_mean_power_is_one(k_factor):
    x = rician_power(np.random.default_rng(4), k_factor, N)
    # Var |h|^2 = (1 + 2K) / (K + 1)^2 for unit mean power
    var = (1 + 2 * k_factor) / (k_factor + 1) ** 2
    assert np.mean(x) == pytest.approx(1.0, abs=4 * np.sqrt(var / N))
    assert np.var(x) == pytest.approx(var, rel=0.05)


def test_fading_power_kinds():
    rng = np.random.default_rng(5)
    np.testing.assert_array_equal(fading_power(rng, "none", 4), np.ones(4))
    assert fading_power(rng, "rayleigh", (2, 3)).shape == (2, 3)
    assert fading_power(rng, "rician", 5, k_factor=2.0).shape == (5,)
    with pytest.raises(FedjouleError, match="none, rayleigh, rician"):
        fading_power(rng, "nakagami", 3)
