"""Measured ranges of the radio models (docs/models.md#measured-range): above its range a
radio is charged at the range's top power and counted in summary.json's warnings, the
same in both engines; inside its range its power follows the measurements it was fitted on.
"""

import json
import math

import numpy as np
import pytest

from fedjoule.devices.library import load_profile, profile_names
from fedjoule.devices.radio import NR, receive_power_w, resolve, transmit_power_w
from fedjoule.devices.radio_range import RangeTally
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import RadioSection
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_run import run_system

# The SIGCOMM'21 artifact (Narayanan et al., SIGCOMM 2021, github.com/SIGCOMM21-5G/artifact,
# Data-Transfer-Power/MN-Transfer/data-processed/MN-Transfer_combined.csv, Verizon,
# Monsoon-measured Galaxy S20-series phone), binned by throughput: (bin's mean throughput
# Mbit/s, mean measured phone power W, its standard deviation W), bins of 10 or more
# one-second samples, computed by fedjoule from the published data.
BANDS = {
    ("LTE", "uplink"): [
        (2.04, 3.075, 0.361), (6.27, 3.445, 0.512), (12.35, 3.859, 0.477),
        (16.57, 4.201, 0.432), (22.26, 4.640, 0.212),
    ],
    ("LTE", "downlink"): [
        (9.30, 2.939, 0.321), (30.24, 3.195, 0.309), (49.60, 3.437, 0.318),
        (69.09, 3.591, 0.362), (87.48, 3.820, 0.372),
    ],
    ("NSALow", "uplink"): [
        (1.02, 3.154, 0.454), (10.34, 3.826, 0.265), (20.67, 3.554, 0.168),
        (32.05, 4.247, 0.514), (41.59, 4.621, 0.234),
    ],
    ("NSALow", "downlink"): [
        (7.42, 3.090, 0.558), (35.63, 3.594, 0.352), (57.49, 3.729, 0.361),
        (88.54, 4.117, 0.314), (107.92, 4.092, 0.253),
    ],
}  # fmt: skip
FITTED_ON = {
    "phone-lte-highend": "LTE",
    "phone-lte-midrange": "LTE",
    "phone-lte-lowend": "LTE",
    "phone-5g": "NSALow",
    "phone-5g-sa": "NSALow",  # (SA carries the NSA low-band slopes: no SA transfer data)
}


def profile_radio(name: str):
    section = RadioSection(**load_profile(name).values["radio"])
    return resolve(section, 0.2, 0.1)


def power_w(p, direction: str, rate_bps: float) -> float:
    if direction == "uplink":
        return transmit_power_w(p, rate_bps)
    return receive_power_w(p, rate_bps)


def top_power_w(p, direction: str) -> float:
    """The highest power the fit was measured at: slope x range top + base."""
    if direction == "uplink":
        slope, base, top = p.uplink_w_per_mbps, p.uplink_base_power_w, p.uplink_max_mbps
    else:
        slope, base, top = p.downlink_w_per_mbps, p.base_power_w, p.downlink_max_mbps
    return base if slope == 0 else slope * top + base


@pytest.mark.parametrize("name", FITTED_ON)
@pytest.mark.parametrize("direction", ["uplink", "downlink"])
def test_inside_the_range_power_stays_in_the_measured_band(name, direction):
    """Each bin's mean throughput lies inside the profile's range, and the model's power
    above its power at the first bin is within two standard deviations of the measured
    mean above the first bin's (the fit's intercept, the screen and the rest of the
    phone, is not the radio's: the model's base is Huang et al.'s). The 2012 lte slope's
    own measurements are not public: its band is not tested."""
    p = profile_radio(name)
    bins = BANDS[(FITTED_ON[name], direction)]
    top = p.uplink_max_mbps if direction == "uplink" else p.downlink_max_mbps
    first_mbps, first_w, _ = bins[0]
    for mbps, measured_w, sd_w in bins:
        assert mbps <= top
        model_w = power_w(p, direction, mbps * 1e6) - power_w(p, direction, first_mbps * 1e6)
        assert abs(model_w - (measured_w - first_w)) <= 2 * sd_w, (mbps, model_w)


CELLULAR_PROFILES = [
    n for n in profile_names() if profile_radio(n).model in ("lte", "nbiot", *NR)
]


def test_every_phone_and_the_sensor_are_cellular():
    assert set(CELLULAR_PROFILES) == {*FITTED_ON, "phone-5g-mmwave", "nbiot-sensor"}


@pytest.mark.parametrize("name", CELLULAR_PROFILES)
def test_no_cellular_profile_draws_above_its_top_power_without_a_warning(name):
    """Rates from 0.1 Mbit/s to 2 Gbit/s, both ways: the power never exceeds the range's
    top power, and the warning collector warns exactly for the rates above the range."""
    p = profile_radio(name)
    for direction in ("uplink", "downlink"):
        top_bps = (p.uplink_max_mbps if direction == "uplink" else p.downlink_max_mbps) * 1e6
        for rate_bps in np.geomspace(1e5, 2e9, 41):
            assert power_w(p, direction, rate_bps) <= top_power_w(p, direction) * (1 + 1e-12)
            tally = RangeTally([name], [p])
            record = ClientRecord(0, spans=[(direction, 0.0, 1.0, 0.0, rate_bps, 0, True)])
            tally.add_records([record], np.zeros(1, dtype=int))
            assert bool(tally.warnings()) == (rate_bps > top_bps), (direction, rate_bps)


def test_the_2012_lte_slope_saturates_at_its_range():
    p = resolve(RadioSection(model="lte"), 0.2, 0.1)
    assert (p.uplink_max_mbps, p.downlink_max_mbps) == (5.0, 20.0)
    # 199 Mbit/s up: 0.43839 x 5 + 1.2 = 3.39195 W, not 0.43839 x 199 + 1.2 = 88.4 W
    assert transmit_power_w(p, 199e6) == pytest.approx(0.43839 * 5 + 1.2, rel=1e-12)
    assert receive_power_w(p, 199e6) == pytest.approx(0.05197 * 20 + 1.2, rel=1e-12)
    # an older paper's unbounded slope: the range set far above any rate
    wide = resolve(RadioSection(model="lte", uplink_max_mbps=1e6), 0.2, 0.1)
    assert transmit_power_w(wide, 199e6) == pytest.approx(0.43839 * 199 + 1.2, rel=1e-12)


# a run above phone-lte-midrange's range: 4 clients share 40 MHz at 30 dB (FDMA, all
# sending at once: B/4 log2(1001) = 99.7 Mbit/s each) and receive 20 MHz (199 Mbit/s)
M, ROUNDS, SNR_DB, UP_HZ, DOWN_HZ = 4, 3, 30.0, 40e6, 20e6


def scenario(snr_db=SNR_DB, up_hz=UP_HZ, down_hz=DOWN_HZ):
    return load_scenario("default-theory", [
    f"population.size={M}",  # all selected each round: the same timeline
    f"training.clients_per_round={M}",
    f"training.rounds={ROUNDS}",
    "training.local_steps=2",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    f"channel.snr_db={snr_db}",
    "channel.fading=none",
    f"channel.uplink_bandwidth_hz={up_hz}",
    f"channel.downlink_bandwidth_hz={down_hz}",
    "channel.access=fdma",
    "population.device_classes=[{name: phone, share: 1.0, profile: phone-lte-midrange}]",
    ])  # fmt: skip


WARNINGS = [
    "radio range: device class phone (lte radio, uplink measured up to 27.7 Mbit/s): 12 "
    "uplink transfers faster, the fastest at 99.67 Mbit/s; charged at the range's top "
    "power 3.325 W (0.0767 W per Mbit/s x 27.7 + 1.2 W), not extrapolated "
    "(docs/models.md#measured-range)",
    "radio range: device class phone (lte radio, downlink measured up to 96.1 Mbit/s): 12 "
    "downlink transfers faster, the fastest at 199.3 Mbit/s; charged at the range's top "
    "power 2.305 W (0.0115 W per Mbit/s x 96.1 + 1.2 W), not extrapolated "
    "(docs/models.md#measured-range)",
]


@pytest.mark.parametrize("engine", ["numpy", "simpy"])
def test_a_run_above_the_range_warns_and_charges_the_top_power(tmp_path, engine):
    s = scenario()
    _, summary = run_system(s, tmp_path, engine=engine, clients_csv=False)
    assert summary["engine"] == engine
    assert summary["warnings"] == WARNINGS
    rate_up = UP_HZ / M * math.log2(1 + 10 ** (SNR_DB / 10))
    for row in read_rounds(tmp_path / "rounds.csv"):
        up_s, down_s = row["uplink_airtime_s"] / M, row["downlink_airtime_s"] / M
        assert row["uplink_bits"] / M / up_s == pytest.approx(rate_up, rel=1e-9)
        assert row["energy_tx_j"] == pytest.approx(M * (0.0767 * 27.7 + 1.2) * up_s, rel=1e-9)
        assert row["energy_rx_j"] == pytest.approx(M * (0.0115 * 96.1 + 1.2) * down_s, rel=1e-9)


def test_a_run_inside_the_range_has_no_range_warning(tmp_path):
    s = scenario(snr_db=10.0, up_hz=1e6, down_hz=20e6)  # 0.87 and 69 Mbit/s
    _, summary = run_system(s, tmp_path, engine="numpy", clients_csv=False)
    assert not [w for w in summary["warnings"] if w.startswith("radio range")]


def test_a_training_run_stopped_and_resumed_warns_the_same(tmp_path):
    """The SimPy engine with training: the count of the rounds before the stop is in the
    checkpoint, so the resumed run's summary.json says all 12 transfers each way."""
    run_scenario(scenario(), tmp_path, device="cpu", stop_after=1)
    _, summary = run_scenario(None, tmp_path, device="cpu", resume=True)
    assert summary["warnings"] == WARNINGS
    assert json.loads((tmp_path / "summary.json").read_text())["warnings"] == WARNINGS


def test_the_count_survives_a_checkpoint():
    p = resolve(RadioSection(model="lte"), 0.2, 0.1)
    tally = RangeTally(["a"], [p])
    tally.add(0, "uplink", 3, 12e6)
    again = RangeTally(["a"], [p])
    again.load_state_dict(tally.state_dict())
    assert again.counts == {(0, "uplink"): [3, 12e6]} and again.warnings() == tally.warnings()


def test_both_engines_charge_and_count_each_attempt_the_same():
    """urban-macro on FDMA with a fresh fade per transmission and retransmissions, its
    phones' range lowered to 2 Mbit/s up and 60 down so that attempts fall on both sides:
    the numpy engine saturates and counts attempt by attempt as the SimPy engine does."""
    from fedjoule.simulator.system import SystemEngine
    from fedjoule.simulator.system_simpy import SimpySystemSimulation
    from fedjoule.simulator.system_world import build_system_world
    from tests.simulator.test_system_engine import assert_rows_equal

    s = load_scenario("urban-macro", [
        "availability.kind=bernoulli", "channel.access=fdma", "round.overcommit=1",
        "population.device_classes=[{profile: phone-lte-midrange, share: 1.0, "
        "radio: {uplink_max_mbps: 2.0, downlink_max_mbps: 60.0}}]",
    ])  # fmt: skip
    simpy_rows, numpy_rows = [], []
    simpy = SimpySystemSimulation(build_system_world(s))
    simpy.run(10, simpy_rows.append)
    vector = SystemEngine(build_system_world(s))
    vector.run(10, numpy_rows.append)
    assert_rows_equal(simpy_rows, numpy_rows)
    a, b = simpy.radios.ranges.counts, vector.radio.ranges.counts
    assert a.keys() == b.keys() == {(0, "uplink"), (0, "downlink")}
    for key in a:
        assert a[key][0] == b[key][0] and b[key][1] == pytest.approx(a[key][1], rel=1e-9)
    attempts = sum(r["uplink_attempts"] for r in numpy_rows)
    assert 0 < a[(0, "uplink")][0] < attempts  # attempts on both sides of the range
    assert attempts > sum(r["selected"] for r in numpy_rows)  # retransmissions
    assert simpy.radios.ranges.warnings() == vector.radio.ranges.warnings()
