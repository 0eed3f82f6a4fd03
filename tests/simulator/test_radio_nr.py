"""The 5G NR radios (fedjoule/devices/radio_nr.py): NSA promotes through its LTE anchor,
then the NR leg, and ends with the NR tail; SA has its own promotion and tail; mmWave is
NSA with its own numbers. Closed forms for promotion and tail with gaps shorter and
longer than the tail, on the SimPy radio and on the numpy engine; a constant-rate
upload costs the documented power x airtime + promotion + tail."""

import math

import numpy as np
import pytest
import simpy

from fedjoule.devices.radio import promotion_energy_j, promotion_time_s, resolve
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import RadioSection
from fedjoule.simulator.client import BatteryGuard, ClientRecord, _NoGuard, _Power
from fedjoule.simulator.vector_radio import VectorRadio
from tests.simulator.test_radio_states import (
    COMPUTE_W,
    DOWN_BITS,
    DOWN_RATE,
    UP_BITS,
    UP_RATE,
    background,
    kinds,
    plan_for,
    play,
    radio,
)

# the documented numbers (docs/models.md#5g-nr-radios; Narayanan et al., SIGCOMM 2021,
# Tables 2 and 7; slopes and mmWave base fitted to its artifact): (anchor s, W), (NR
# promotion s, W), (tail s, W), (slope up, down W per Mbit/s), (base up, down W)
NR = {
    "nr-nsa": ((0.21, 1.21), (1.23, 0.699), (10.4, 0.26), (0.0322, 0.0115), (1.2, 1.2)),
    "nr-sa": ((0.0, 0.0), (0.341, 0.245), (10.4, 0.593), (0.0322, 0.0115), (1.2, 1.2)),
    "nr-mmwave": ((0.396, 1.21), (1.511, 1.494), (10.5, 1.092), (0.0089, 0.0017), (3.938, 3.599)),
}
IDLE_W = 0.594 * 0.043 / 1.28
T_D, T_U = DOWN_BITS / DOWN_RATE, UP_BITS / UP_RATE


def numbers(model):
    (a_s, a_w), (p_s, p_w), (t_s, t_w), (up, down), (b_up, b_down) = NR[model]
    e_pro = a_s * a_w + p_s * p_w
    e_up = up * UP_BITS / 1e6 + b_up * T_U  # slope x S + base x t
    e_down = down * DOWN_BITS / 1e6 + b_down * T_D
    return dict(t_pro=a_s + p_s, e_pro=e_pro, t_tail=t_s, p_tail=t_w, e_tail=t_s * t_w,
                e_up=e_up, e_down=e_down, anchor=(a_s, a_w), leg=(p_s, p_w))  # fmt: skip


@pytest.mark.parametrize("model", NR)
def test_the_radio_resolves_to_the_documented_numbers(model):
    p, _ = radio(model)
    (a_s, a_w), (p_s, p_w), (t_s, t_w), (up, down), (b_up, b_down) = NR[model]
    assert (p.anchor_promotion_s, p.anchor_promotion_power_w) == (a_s, a_w)
    assert (p.promotion_s, p.promotion_power_w, p.tail_s, p.tail_power_w) == (p_s, p_w, t_s, t_w)
    assert (p.uplink_w_per_mbps, p.downlink_w_per_mbps) == (up, down)
    assert (p.uplink_base_power_w, p.base_power_w, p.idle_power_w) == (b_up, b_down, IDLE_W)
    assert promotion_time_s(p) == a_s + p_s
    assert promotion_energy_j(p) == pytest.approx(a_s * a_w + p_s * p_w, rel=1e-12)


@pytest.mark.parametrize("model", NR)
def test_a_constant_rate_upload_costs_power_x_airtime_plus_promotion_and_tail(model):
    """From idle: the LTE anchor (NSA, mmWave), then the NR leg delay the upload; it
    draws slope x rate + base for its airtime; the whole NR tail follows."""
    n = numbers(model)
    p, bank = radio(model)
    env = simpy.Environment()
    record = ClientRecord(0)
    states = bank.client(env, 0, record)
    started = {}

    def one_upload():
        states.begin(_Power(_NoGuard()))
        yield from states.connect()
        started["s"] = env.now
        states.sending()
        yield env.timeout(T_U)
        power_w = p.uplink_w_per_mbps * UP_RATE / 1e6 + p.uplink_base_power_w
        record.energy_tx_j += power_w * T_U  # the documented power x airtime
        states.release()
        states.end()

    env.process(one_upload())
    env.run()
    assert started["s"] == pytest.approx(n["t_pro"], rel=1e-12)
    total = record.energy_total_j + background(bank)
    assert total == pytest.approx(n["e_pro"] + n["e_up"] + n["e_tail"], rel=1e-9)
    phases = [(s[1], s[2], s[3]) for s in kinds(record, "promotion")]
    a_s, a_w = n["anchor"]
    leg_s, leg_w = n["leg"]
    expected = [(0.0, a_s, a_s * a_w)] if a_s > 0 else []
    expected.append((a_s, a_s + leg_s, leg_s * leg_w))  # the NR leg (SA: its promotion)
    assert phases == [pytest.approx(e, rel=1e-12) for e in expected]


@pytest.mark.parametrize("model", NR)
@pytest.mark.parametrize("compute_s", [3.0, 20.0])
def test_promotion_and_tail_for_gaps_shorter_and_longer_than_the_tail(model, compute_s):
    """Download, compute_s of training, upload: a gap inside the tail cuts it (one
    promotion); a longer one lets it run out, idles, and promotes again."""
    n = numbers(model)
    p, bank = radio(model)
    env = simpy.Environment()
    record, _ = play(env, bank, plan_for(p, compute_s))
    env.run()
    assert record.outcome == "arrived"
    inside = compute_s < n["t_tail"]
    promotions = 1 if inside else 2
    assert record.energy_radio_promotion_j == pytest.approx(promotions * n["e_pro"], rel=1e-9)
    assert record.energy_rx_j == pytest.approx(n["e_down"], rel=1e-9)
    assert record.energy_tx_j == pytest.approx(n["e_up"], rel=1e-9)
    tail_j = n["p_tail"] * compute_s if inside else n["e_tail"]
    assert record.energy_radio_tail_j == pytest.approx(tail_j, rel=1e-9)
    idle_j = 0.0 if inside else IDLE_W * (compute_s - n["t_tail"])
    assert record.energy_idle_j == pytest.approx(idle_j, rel=1e-9, abs=1e-15)
    start_up = promotions * n["t_pro"] + T_D + compute_s
    assert record.end_s == pytest.approx(start_up + T_U, rel=1e-12)
    closed = promotions * n["e_pro"] + n["e_down"] + tail_j + idle_j + n["e_up"]
    assert record.energy_total_j == pytest.approx(closed + COMPUTE_W * compute_s, rel=1e-9)
    assert background(bank) == pytest.approx(n["e_tail"], rel=1e-9)  # the upload's tail


@pytest.mark.parametrize("model", ["nr-nsa", "nr-mmwave"])
def test_a_battery_stop_in_the_nr_leg_pays_the_anchor_and_part_of_the_leg(model):
    """The guard stops the client 0.4 s into the NR leg: the anchor's energy whole, the
    leg's for 0.4 s; the numpy engine's promotion energy of that elapsed time agrees."""
    n = numbers(model)
    (a_s, a_w), (_, leg_w) = n["anchor"], n["leg"]
    budget = a_s * a_w + 0.4 * leg_w
    p, bank = radio(model)
    env = simpy.Environment()
    record, _ = play(env, bank, plan_for(p, 1.0), BatteryGuard(env, budget))
    env.run()
    assert record.outcome == "battery"
    assert record.end_s == pytest.approx(a_s + 0.4, rel=1e-9)
    assert record.energy_radio_promotion_j == pytest.approx(budget, rel=1e-9)
    assert record.energy_total_j == pytest.approx(budget, rel=1e-9)
    assert promotion_energy_j(p, a_s + 0.4) == pytest.approx(budget, rel=1e-12)


def test_the_numpy_promotion_energy_equals_the_phases():
    """VectorRadio.promotion_energy_j (the numpy engine's) against devices/radio.py's, for
    promotions cut before, inside and after the anchor, and whole; lte unchanged."""
    models = [*NR, "lte"]
    section = load_scenario("default-theory").population
    section = section.model_copy(update={"device_classes": [
        c.model_copy(update={"radio": RadioSection(model=m), "share": 0.25, "name": m})
        for c, m in zip([section.device_classes[0]] * 4, models, strict=True)
    ]})  # fmt: skip
    vector = VectorRadio(section, np.arange(4))
    sel = np.arange(4)
    for down_s, up_s in [(0.1, 0.0), (0.3, 0.2), (1.0, 0.5), (math.inf, math.inf)]:
        params = [resolve(RadioSection(model=m), 0.2, 0.1) for m in models]
        full = [promotion_time_s(q) for q in params]
        down = np.array([min(down_s, t) for t in full])
        up = np.array([min(up_s, t) for t in full])
        got = vector.promotion_energy_j(sel, down, up)
        want = [promotion_energy_j(q, d) + promotion_energy_j(q, u)
                for q, d, u in zip(params, down, up, strict=True)]  # fmt: skip
        assert got == pytest.approx(want, rel=1e-12)
    lte = params[-1]  # no anchor: the one promotion power times the elapsed sum, exactly
    assert vector.promotion_energy_j(sel[3:], down[3:], up[3:])[0] == lte.promotion_power_w * (
        down[3] + up[3]
    )


@pytest.mark.parametrize(
    ("profile", "model"),
    [("phone-5g", "nr-nsa"), ("phone-5g-sa", "nr-sa"), ("phone-5g-mmwave", "nr-mmwave")],
)
def test_fedjoule_profiles_shows_every_5g_number_with_its_source_and_fit_error(profile, model):
    from fedjoule.devices.library import load_profile
    from fedjoule.devices.radio import DEFAULTS, default_source
    from fedjoule.listings import profile_rows
    from fedjoule.scenarios.schema import DeviceClass

    resolved = DeviceClass.model_validate({"profile": profile})
    rows = {f: (v, s) for f, v, s in profile_rows(load_profile(profile), resolved)}
    assert rows["radio.model"][0] == model
    for name, value in DEFAULTS[model].items():
        shown, source = rows[f"radio.{name}"]
        assert shown == value and source == default_source(model, name), name
        assert "SIGCOMM 2021" in source or "SIGCOMM'21" in source or "lte model" in source
        if name.endswith("_per_mbps"):  # fitted: n, R^2 and RMSE
            assert "R^2" in source and "RMSE" in source, name
    assert "Table 7" in rows["radio.tail_s"][1] and "Table 2" in rows["radio.tail_power_w"][1]
