"""Radio power models (fedjoule/devices/radio.py): defaults, resolution and closed forms."""

import pytest

from fedjoule.devices.population import sample_population
from fedjoule.devices.radio import (
    DEFAULTS,
    MODELS,
    RadioParams,
    has_states,
    is_plain_radiated,
    isolated_transfer_energy_j,
    promotion_energy_j,
    receive_energy_j,
    receive_power_w,
    resolve,
    tail_energy_j,
    transmit_draw_w,
    transmit_energy_j,
    transmit_power_w,
)
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import RadioSection

P_W, PRX_W = 0.2, 0.1  # 23 dBm, the class's rx_power_w default


def lte(**given) -> RadioParams:
    return resolve(RadioSection(model="lte", **given), P_W, PRX_W)


def test_defaults_are_the_sources_values():
    # ARO/VideoOptimizer lte.conf and WiFi.conf, ns-3 LinearWifiTxCurrentModel
    p = lte()
    assert (p.uplink_w_per_mbps, p.downlink_w_per_mbps) == (0.43839, 0.05197)
    assert (p.base_power_w, p.uplink_base_power_w) == (1.2, 1.2)
    assert (p.promotion_s, p.promotion_power_w, p.tail_power_w) == (0.26, 1.21, 1.06)
    assert p.tail_s == 11.576 and p.idle_power_w == pytest.approx(0.594 * 0.043 / 1.28)
    w = resolve(RadioSection(model="wifi"), P_W, PRX_W)
    assert (w.base_power_w, w.tail_s, w.tail_power_w, w.idle_power_w) == (0.403, 0.25, 0.403, 0.02)
    assert w.promotion_s == 0 and w.uplink_w_per_mbps == 0
    lin = resolve(RadioSection(model="linear"), P_W, PRX_W)
    assert lin.pa_efficiency == 0.10 and lin.circuit_power_w == pytest.approx(0.82, abs=1e-5)
    nb = resolve(RadioSection(model="nbiot"), P_W, PRX_W)
    assert (nb.uplink_base_power_w, nb.base_power_w, nb.idle_power_w) == (0.543, 0.09, 15e-6)
    assert set(DEFAULTS) == set(MODELS)


def test_given_values_win_and_uplink_base_follows_base():
    p = lte(base_power_w=1.3, tail_s=5.0)
    assert p.base_power_w == p.uplink_base_power_w == 1.3 and p.tail_s == 5.0
    assert lte(uplink_base_power_w=2.0).uplink_base_power_w == 2.0
    assert lte(tail_s=0.0).tail_s == 0.0  # 0 is a value, not "use the default"


def test_radiated_is_todays_model_exactly():
    p = resolve(None, P_W, PRX_W)
    assert p == resolve(RadioSection(), P_W, PRX_W) and is_plain_radiated(p)
    assert not has_states(p)
    for airtime in (0.0, 0.1234567, 3.0, 1e-9):
        assert transmit_energy_j(p, 1e6, airtime) == P_W * airtime  # E_tx = p * t, bit for bit
        assert transmit_energy_j(p, 1e6, airtime, radiated_w=0.05) == 0.05 * airtime
        assert receive_energy_j(p, 1e6, airtime) == PRX_W * airtime
    assert transmit_power_w(p, 5e6) == P_W and receive_power_w(p, 5e6) == PRX_W
    assert not is_plain_radiated(resolve(RadioSection(idle_power_w=0.01), P_W, PRX_W))


def test_linear_power_amplifier():
    p = resolve(RadioSection(model="linear", pa_efficiency=0.25, circuit_power_w=0.5), P_W, PRX_W)
    assert transmit_power_w(p, 1e6) == pytest.approx(P_W / 0.25 + 0.5, rel=1e-12)
    assert transmit_power_w(p, 1e6, radiated_w=0.1) == pytest.approx(0.1 / 0.25 + 0.5, rel=1e-12)
    assert transmit_energy_j(p, 8e6, 2.0) == pytest.approx((P_W / 0.25 + 0.5) * 2.0, rel=1e-12)
    assert receive_energy_j(p, 8e6, 2.0) == PRX_W * 2.0
    assert not has_states(p)


def test_measured_power_is_affine_in_throughput():
    p = lte()
    rate = 4e6  # inside the 2012 slope's measured range (5 Mbit/s up, 20 down)
    assert transmit_power_w(p, rate) == pytest.approx(0.43839 * 4 + 1.2, rel=1e-12)
    assert receive_power_w(p, 13e6) == pytest.approx(0.05197 * 13 + 1.2, rel=1e-12)
    # S bits in t seconds: alpha S/1e6 + beta t, whatever the rate did meanwhile
    bits, t = 12e6, 3.0
    assert transmit_energy_j(p, bits, t) == pytest.approx(0.43839 * 12 + 1.2 * 3, rel=1e-12)
    assert receive_energy_j(p, bits, t) == pytest.approx(0.05197 * 12 + 1.2 * 3, rel=1e-12)
    # at a constant rate the energy is the power times the airtime
    assert transmit_energy_j(p, bits, bits / rate) == pytest.approx(
        transmit_power_w(p, rate) * bits / rate, rel=1e-12
    )


def test_above_the_range_the_power_saturates():
    """Faster than the range's top T_max: P = alpha T_max + beta, and S bits in t seconds
    cost alpha min(S, T_max t)/1e6 + beta t (docs/models.md#measured-range)."""
    p = lte(uplink_max_mbps=5.0, downlink_max_mbps=20.0)
    assert transmit_power_w(p, 6e6) == pytest.approx(0.43839 * 5 + 1.2, rel=1e-12)
    assert receive_power_w(p, 50e6) == pytest.approx(0.05197 * 20 + 1.2, rel=1e-12)
    bits, t = 30e6, 3.0  # 10 Mbit/s up: charged as 5 Mbit/s x 3 s = 15 Mbit
    assert transmit_energy_j(p, bits, t) == pytest.approx(0.43839 * 15 + 1.2 * 3, rel=1e-12)
    assert receive_energy_j(p, bits, t) == pytest.approx(0.05197 * 30 + 1.2 * 3, rel=1e-12)
    assert receive_energy_j(p, 90e6, t) == pytest.approx(0.05197 * 60 + 1.2 * 3, rel=1e-12)
    # at a constant rate above the range: the saturated power times the airtime
    assert transmit_energy_j(p, bits, t) == pytest.approx(transmit_power_w(p, 10e6) * t)


def test_promotion_and_tail_energy():
    p = lte()
    assert promotion_energy_j(p) == pytest.approx(1.21 * 0.26, rel=1e-12)
    assert promotion_energy_j(p, 0.1) == pytest.approx(1.21 * 0.1, rel=1e-12)
    assert tail_energy_j(p) == pytest.approx(1.06 * 11.576, rel=1e-12)
    assert tail_energy_j(p, 3.0) == pytest.approx(1.06 * 3.0, rel=1e-12)
    assert tail_energy_j(p, 100.0) == tail_energy_j(p)  # a tail ends on its own


def test_isolated_transfer_closed_form():
    p = lte()
    bits, rate = 4e6, 2e6
    expected = 1.21 * 0.26 + (0.43839 * 4 + 1.2 * 2.0) + 1.06 * 11.576
    assert isolated_transfer_energy_j(p, bits, rate) == pytest.approx(expected, rel=1e-12)
    expected_down = 1.21 * 0.26 + (0.05197 * 4 + 1.2 * 2.0) + 1.06 * 11.576
    assert isolated_transfer_energy_j(p, bits, rate, uplink=False) == pytest.approx(
        expected_down, rel=1e-12
    )


def test_scenarios_radios_and_the_numpy_engine():
    s = load_scenario("default-theory")
    pop = sample_population(s.population, s.seed)
    assert (transmit_draw_w(s.population, pop) == pop.tx_power_w).all()
    d = s.model_dump(mode="json")
    d["population"]["device_classes"][0]["radio"] = {"model": "linear"}
    linear = type(s).model_validate(d)
    draw = transmit_draw_w(linear.population, pop)
    first = pop.class_index == 0
    assert draw[first] == pytest.approx(pop.tx_power_w[first] / 0.1 + 3.0 * 0.273333, rel=1e-12)
    assert (draw[~first] == pop.tx_power_w[~first]).all()
