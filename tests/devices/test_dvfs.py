"""CPU power per DVFS frequency (issue 28, item 4): compute energy at three table
frequencies and between them as closed forms, for the cpu and the measured kinds; no table,
or the top speed, equals today's charge; both engines charge the same; the frequency checks;
`fedjoule profiles NAME` shows a profile's table and its source."""

import json

import numpy as np
import pytest

from fedjoule import cli
from fedjoule.devices.library import profile_names
from fedjoule.devices.population import sample_population, step_costs
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import DeviceClass
from tests.simulator.test_system_engine import assert_rows_equal, both_engines

# 4 V; cpu.active 10 mA; cluster 1: 5 mA, 4 cores, 1/2/3 GHz at 100/200/400 mA a core
TABLE = {
    "voltage_v": 4.0,
    "active_ma": 10.0,
    "clusters": [
        {"cores": 2, "core_speeds_khz": [500e3, 1e6], "core_power_ma": [20.0, 40.0]},
        {
            "cores": 4,
            "core_speeds_khz": [1e6, 2e6, 3e6],
            "core_power_ma": [100.0, 200.0, 400.0],
            "cluster_power_ma": 5.0,
        },
    ],
    "cores_used": 2,
}
# P(f) = 4 V x (10 + 5 + 2 x I(f)) mA, I linear in f between the speeds
POWER_W = {1e9: 0.86, 1.5e9: 1.26, 2e9: 1.66, 2.5e9: 2.46, 3e9: 3.26}
FORWARD, BATCH = 2.0e6, 8


def costs(device_class: dict, **population):
    """(time, energy) of one step of every client of a one-class population."""
    s = load_scenario(
        "default-theory",
        [f"population.device_classes=[{json.dumps(device_class)}]", "population.size=10"],
    )
    pop = sample_population(s.population, seed=3)
    return step_costs(s.population, pop, FORWARD, BATCH), pop


@pytest.mark.parametrize("freq_hz", sorted(POWER_W))
def test_cpu_kind_charges_the_tables_power_for_c_b_over_f_n(freq_hz):
    (time_s, energy_j), pop = costs({"compute": "cpu", "cpu_freq_hz": freq_hz, "dvfs": TABLE})
    cycles = 3 * FORWARD / 4.0  # flops_per_cycle 4
    step_s = cycles * BATCH / (freq_hz * 2)
    assert np.all(pop.cpu_freq_hz == freq_hz)
    np.testing.assert_allclose(time_s, step_s, rtol=1e-12)
    np.testing.assert_allclose(energy_j, POWER_W[freq_hz] * step_s, rtol=1e-12)


MEASURED = {
    "compute": "measured",
    "reference_seconds_per_sample": 0.5,
    "reference_flops_per_sample": 4.0e6,
    "measured_power_w": 5.0,
    "dvfs": TABLE,
}


@pytest.mark.parametrize("freq_hz", sorted(POWER_W))
def test_measured_kind_scales_time_by_fmax_over_f_and_swaps_the_cpu_share(freq_hz):
    (time_s, energy_j), _ = costs({**MEASURED, "cpu_freq_hz": freq_hz})
    top_s = 0.5 * (FORWARD / 4.0e6) * BATCH  # measured at 3 GHz, the table's top speed
    step_s = top_s * 3e9 / freq_hz
    power_w = 5.0 - POWER_W[3e9] + POWER_W[freq_hz]  # the rest of the device stays
    np.testing.assert_allclose(time_s, step_s, rtol=1e-12)
    np.testing.assert_allclose(energy_j, power_w * step_s, rtol=1e-12)


@pytest.mark.parametrize(
    "name", ["phone-5g", "phone-lte-highend", "phone-lte-midrange", "phone-lte-lowend"]
)
def test_no_table_an_unset_frequency_and_the_top_speed_charge_as_today(name):
    """Bit for bit: the profile's table unset (null), at no frequency, and at its top."""
    (today, pop_today) = costs({"profile": name, "dvfs": None})
    (unset, pop_unset) = costs({"profile": name})
    table = DeviceClass.model_validate({"profile": name}).dvfs
    top_hz = table.clusters[table.cluster].core_speeds_khz[-1] * 1e3
    (at_top, _) = costs({"profile": name, "cpu_freq_hz": top_hz})
    for got in (unset, at_top):
        assert np.array_equal(got[0], today[0]) and np.array_equal(got[1], today[1])
    assert np.array_equal(pop_unset.cpu_freq_hz, pop_today.cpu_freq_hz)


def test_both_engines_charge_the_same_below_the_top_speed():
    classes = [
        {**MEASURED, "name": "m", "share": 0.5, "cpu_freq_hz": 1.5e9},
        {"name": "c", "share": 0.5, "compute": "cpu", "dvfs": TABLE,
         "cpu_freq_min_hz": 1.2e9, "cpu_freq_max_hz": 2.8e9},
    ]  # fmt: skip
    s = load_scenario(
        "default-theory",
        [f"population.device_classes={json.dumps(classes)}", "round.deadline_s=null"],
    )
    simpy_rows, numpy_rows = both_engines(s, rounds=4)
    assert_rows_equal(simpy_rows, numpy_rows)
    assert sum(r["energy_compute_j"] for r in numpy_rows) > 0


@pytest.mark.parametrize(
    "device_class, words",
    [
        ({"compute": "cpu", "dvfs": TABLE, "cpu_freq_hz": 3.5e9},
         ["cpu_freq_hz 3.5e+09 Hz is outside", "cluster 1 (1e+09 to 3e+09 Hz)"]),
        ({"compute": "cpu", "dvfs": TABLE, "cpu_freq_min_hz": 0.5e9},
         ["cpu_freq_min_hz 5e+08 Hz is outside", "not extrapolated"]),
        ({**MEASURED, "dvfs": None, "cpu_freq_hz": 2e9},
         ["cpu_freq_hz on compute: measured needs a dvfs table"]),
        ({**MEASURED, "measured_power_w": 3.0, "cpu_freq_hz": 2e9},
         ["3.26 W, exceeds measured_power_w 3 W"]),
        ({"compute": "cpu", "dvfs": {**TABLE, "cores_used": 5}},
         ["cores_used 5 exceeds the cluster's 4 cores"]),
        ({"compute": "cpu", "dvfs": {**TABLE, "cluster": 2}}, ["cluster 2 is not in the table"]),
        ({"compute": "cpu", "dvfs": {**TABLE, "clusters": [
            {"cores": 1, "core_speeds_khz": [1e6, 2e6], "core_power_ma": [1.0]}]}},
         ["core_power_ma has 1 values, core_speeds_khz 2"]),
        ({"compute": "cpu", "dvfs": {**TABLE, "clusters": [
            {"cores": 1, "core_speeds_khz": [2e6, 1e6], "core_power_ma": [1.0, 2.0]}]}},
         ["core_speeds_khz must increase"]),
    ],
)  # fmt: skip
def test_a_frequency_or_table_that_does_not_fit_is_one_error(device_class, words):
    with pytest.raises(FedjouleError) as info:
        costs(device_class)
    text = " ".join(str(info.value).split())
    for word in words:
        assert word in text, text


def test_cli_shows_a_profiles_table_and_its_source(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    assert "phone-lte-midrange" in profile_names()
    assert cli.invoke(["profiles", "phone-lte-midrange"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "dvfs.voltage_v 3.7" in out and "modem.controller.voltage" in out
    assert "LineageOS/android_device_google_sunfish" in out and "be5c910a" in out
    # the top speed of cluster 1: (8.4 + 2.2 + 2 x 266.21) mA x 3.7 V = 2.009 W
    assert "dvfs at 2208 MHz 266.21 mA a core; CPU 2.009 W" in out
