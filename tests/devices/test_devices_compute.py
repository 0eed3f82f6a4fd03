"""Tests for the CPU (DVFS) and accelerator compute models."""

import numpy as np
import pytest

from fedjoule.devices.compute import (
    accelerator_step_energy_j,
    accelerator_step_time_s,
    cpu_step_energy_j,
    cpu_step_time_s,
    cycles_per_sample,
)


def test_mlp_example_from_wireless_md():
    c = cycles_per_sample(0.4e6)
    assert c == pytest.approx(3e5)
    assert cpu_step_time_s(c, 50, 1.5e9) == pytest.approx(0.010)
    assert cpu_step_energy_j(c, 50, 1.5e9) == pytest.approx(3.375e-3)


def test_cnn_example_from_wireless_md():
    c = cycles_per_sample(25e6)
    assert cpu_step_time_s(c, 50, 1.5e9) == pytest.approx(0.625)
    assert cpu_step_energy_j(c, 50, 1.5e9) == pytest.approx(0.2109375)


def test_cpu_energy_over_k_steps():
    kappa, c, batch, f_hz, k_steps = 1e-28, 1e4, 32, 2e9, 20
    per_step = cpu_step_energy_j(c, batch, f_hz, kappa=kappa)
    assert k_steps * per_step == pytest.approx(kappa * c * batch * f_hz**2 * k_steps)
    assert k_steps * per_step == pytest.approx(2.56e-3)


def test_vectorised_over_clients():
    f_hz = np.array([1e9, 2e9])
    np.testing.assert_allclose(cpu_step_time_s(3e5, 50, f_hz), [0.015, 0.0075])
    np.testing.assert_allclose(cpu_step_energy_j(3e5, 50, f_hz), [1.5e-3, 6e-3])


def test_accelerator():
    t = accelerator_step_time_s(25e6, 50, 1e12, 0.3)
    assert t == pytest.approx(3 * 25e6 * 50 / 0.3e12)
    assert accelerator_step_energy_j(t, 7.5) == pytest.approx(7.5 * t)
