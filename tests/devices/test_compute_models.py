"""The efficiency and measured compute models: closed forms, per-client spread, step_costs."""

import numpy as np
import pytest

from fedjoule import rng
from fedjoule.devices.compute import (
    efficiency_step_energy_j,
    efficiency_step_time_s,
    lognormal_spread,
    measured_step_energy_j,
    measured_step_time_s,
)
from fedjoule.devices.population import sample_population, step_costs
from fedjoule.scenarios.loading import load_scenario

RESNET18_FLOPS = 3.640565248e9  # fedjoule's count of ResNet-18's forward pass at 224x224


def test_efficiency_closed_form():
    forward, batch, flops_per_s, flops_per_joule = 4.0e5, 32, 2.0e10, 3.0e9
    step_flops = 3 * forward * batch
    assert efficiency_step_time_s(forward, batch, flops_per_s) == pytest.approx(
        step_flops / flops_per_s, rel=1e-9
    )
    assert efficiency_step_energy_j(forward, batch, flops_per_joule) == pytest.approx(
        step_flops / flops_per_joule, rel=1e-9
    )
    # 3 * 4e5 * 32 = 3.84e7 FLOPs: 1.92 ms at 20 GFLOP/s, 12.8 mJ at 3 GFLOP/J
    assert efficiency_step_time_s(forward, batch, flops_per_s) == pytest.approx(1.92e-3, rel=1e-9)
    assert efficiency_step_energy_j(forward, batch, flops_per_joule) == pytest.approx(
        1.28e-2, rel=1e-9
    )


def test_measured_closed_form():
    # the reference model itself: t = s_ref * B, E = P * s_ref * B
    t = measured_step_time_s(RESNET18_FLOPS, 16, 0.6825, RESNET18_FLOPS)
    assert t == pytest.approx(0.6825 * 16, rel=1e-9)
    assert measured_step_energy_j(t, 7.2) == pytest.approx(7.2 * 0.6825 * 16, rel=1e-9)
    # a model of a tenth of the FLOPs takes a tenth as long per sample
    t = measured_step_time_s(RESNET18_FLOPS / 10, 32, 0.45, RESNET18_FLOPS)
    assert t == pytest.approx(0.45 * 0.1 * 32, rel=1e-9)
    assert measured_step_energy_j(t, 4.0) == pytest.approx(4.0 * 0.045 * 32, rel=1e-9)


def test_vectorised_over_clients():
    seconds = np.array([0.25, 0.5, 1.0])
    np.testing.assert_allclose(
        measured_step_time_s(1e9, 8, seconds, 2e9), seconds * 0.5 * 8, rtol=1e-12
    )
    np.testing.assert_allclose(
        efficiency_step_time_s(1e6, 10, np.array([1e9, 2e9])), [3e-2, 1.5e-2], rtol=1e-12
    )


def test_lognormal_spread_median_one_and_none_at_zero():
    assert np.all(lognormal_spread(rng.stream(0, "compute_spread"), 5, 0.0) == 1.0)
    factors = lognormal_spread(rng.stream(0, "compute_spread"), 20_000, 0.6)
    assert np.all(factors > 0)
    assert np.median(np.log(factors)) == pytest.approx(0.0, abs=0.03)
    assert np.std(np.log(factors)) == pytest.approx(0.6, rel=0.03)


def scenario(classes: str, *extra: str):
    return load_scenario(
        "default-theory",
        ["population.size=40", f"population.device_classes={classes}", *extra],
    )


def test_step_costs_use_the_closed_forms():
    s = scenario(
        "[{name: eff, share: 0.5, compute: efficiency, flops_per_s: 2.0e10, "
        "flops_per_joule: 3.0e9}, {name: meas, share: 0.5, compute: measured, "
        "reference_seconds_per_sample: 0.6825, reference_flops_per_sample: 3.64e9, "
        "measured_power_w: 7.2}]"
    )
    pop = sample_population(s.population, s.seed)
    assert pop.compute_slowdown is None
    forward, batch = 1.0e6, 32
    time_s, energy_j = step_costs(s.population, pop, forward, batch)
    eff = pop.class_index == 0
    np.testing.assert_allclose(time_s[eff], 3 * forward * batch / 2.0e10, rtol=1e-9)
    np.testing.assert_allclose(energy_j[eff], 3 * forward * batch / 3.0e9, rtol=1e-9)
    t = 0.6825 * forward / 3.64e9 * batch
    np.testing.assert_allclose(time_s[~eff], t, rtol=1e-9)
    np.testing.assert_allclose(energy_j[~eff], 7.2 * t, rtol=1e-9)


def test_spread_scales_time_and_measured_energy_but_not_flop_per_joule():
    s = scenario(
        "[{name: eff, share: 0.5, compute: efficiency, flops_per_s: 2.0e10, "
        "flops_per_joule: 3.0e9, compute_spread_sigma: 0.5}, {name: meas, share: 0.5, "
        "compute: measured, reference_seconds_per_sample: 0.5, "
        "reference_flops_per_sample: 1.0e9, measured_power_w: 4.0, compute_spread_sigma: 0.5}]"
    )
    pop = sample_population(s.population, s.seed)
    factor = pop.compute_slowdown
    assert factor is not None and factor.std() > 0
    time_s, energy_j = step_costs(s.population, pop, 1.0e6, 10)
    eff = pop.class_index == 0
    np.testing.assert_allclose(time_s[eff], factor[eff] * 3e7 / 2.0e10, rtol=1e-9)
    np.testing.assert_allclose(energy_j[eff], 3e7 / 3.0e9, rtol=1e-9)
    t = factor[~eff] * 0.5 * 1e-3 * 10
    np.testing.assert_allclose(time_s[~eff], t, rtol=1e-9)
    np.testing.assert_allclose(energy_j[~eff], 4.0 * t, rtol=1e-9)


def test_spread_leaves_other_draws_unchanged():
    """The spread has its own random stream: battery and CPU draws are as without it."""
    base = "compute: measured, reference_seconds_per_sample: 0.5, "
    base += "reference_flops_per_sample: 1.0e9, measured_power_w: 4.0"
    plain = sample_population(scenario(f"[{{{base}}}]").population, 0)
    spread = sample_population(scenario(f"[{{{base}, compute_spread_sigma: 0.4}}]").population, 0)
    np.testing.assert_array_equal(plain.battery_initial_j, spread.battery_initial_j)
    np.testing.assert_array_equal(plain.cpu_freq_hz, spread.cpu_freq_hz)


def test_cpu_kind_ignores_the_spread():
    s = scenario("[{compute: cpu, compute_spread_sigma: 1.0}]")
    assert sample_population(s.population, s.seed).compute_slowdown is None


@pytest.mark.parametrize(
    "kind, missing",
    [
        ("efficiency", "flops_per_s, flops_per_joule"),
        ("measured", "reference_seconds_per_sample, reference_flops_per_sample, measured_power_w"),
    ],
)
def test_a_kind_without_its_figures_is_an_error(kind, missing):
    from fedjoule.errors import FedjouleError

    with pytest.raises(FedjouleError, match=f"compute: {kind} needs {missing}"):
        scenario(f"[{{compute: {kind}}}]")
