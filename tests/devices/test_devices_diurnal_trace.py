"""Diurnal availability with charging, trace replay, and battery charging
(docs/models.md#availability)."""

import math

import numpy as np
import pytest

from fedjoule.devices.availability import DAY_S, Diurnal, TraceReplay
from fedjoule.devices.battery import charge
from fedjoule.errors import FedjouleError
from fedjoule.report.results import read_rounds
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world
from tests.simulator.test_round_accounting import hand_costs, scenario


def test_diurnal_frequency_follows_the_sine():
    model = Diurnal(0.5, 0.4, 2.0, 0.0, 0.0, 8.0, seed=1, n_clients=4000)
    for hour in (2.0, 8.0, 14.0, 20.0):
        t = hour * 3600
        # p(t) = clip(p + A sin(2 pi (t - phi) / 24 h), 0, 1)
        p = 0.5 + 0.4 * math.sin(2 * math.pi * (hour - 2.0) / 24)
        freq = model.online_mask(t, int(hour)).mean()
        assert abs(freq - p) < 4 * math.sqrt(p * (1 - p) / 4000)
    assert model.online_mask(3600.0, 5).tolist() == model.online_mask(3600.0, 5).tolist()


def test_diurnal_charging_window_and_time():
    model = Diurnal(0.5, 0.4, 1.0, 0.0, 22.0, 6.0, seed=0, n_clients=2)  # wraps midnight
    assert model.charging(0, (1.0 + 23.0) * 3600) and not model.charging(0, (1.0 + 12.0) * 3600)
    # two whole days hold 2 x 8 h of charging, wherever they start
    np.testing.assert_allclose(model.charging_time_s(5000.0, 5000.0 + 2 * DAY_S), 16 * 3600.0)
    # from local 20 h to local 23 h: 1 h of charging
    t0 = (1.0 + 20.0) * 3600
    np.testing.assert_allclose(model.charging_time_s(t0, t0 + 3 * 3600), 3600.0)


def test_charging_adds_power_times_time_capped_at_capacity():
    model = Diurnal(0.5, 0.4, 0.0, 0.0, 0.0, 8.0, seed=0, n_clients=2)

    class Pop:
        charge_power_w = np.array([10.0, 10.0])
        battery_capacity_j = np.array([1e6, 100.0])

    battery = np.array([50.0, 50.0])
    charge(battery, Pop, model, 3600.0, 2 * 3600.0)  # 1 h inside the window
    np.testing.assert_allclose(battery, [50.0 + 36_000.0, 100.0])


def write_trace(path, text):
    path.write_text("client,start_s,end_s\n" + text)
    return path


def test_trace_replay_intervals_and_period(tmp_path):
    path = write_trace(tmp_path / "t.csv", "0,10,20\n0,15,30\n1,0,5\n1,90,100\n")
    trace = TraceReplay(path, 3, period_s=100.0)
    assert trace.online(0, 12.0, 0) and trace.next_offline_s(0, 12.0, 0) == 30.0  # merged
    assert not trace.online(0, 35.0, 0) and trace.next_offline_s(0, 35.0, 0) == 35.0
    assert trace.online(0, 125.0, 0) and trace.next_offline_s(0, 125.0, 0) == 130.0
    assert trace.next_offline_s(1, 95.0, 0) == 105.0  # runs on into the next period
    assert not trace.online(2, 1.0, 0)  # not in the file: never online
    np.testing.assert_array_equal(trace.online_mask(12.0, 0), [True, False, False])
    once = TraceReplay(path, 3)
    assert not once.online(0, 115.0, 0)


def test_trace_errors_name_file_and_line(tmp_path):
    with pytest.raises(FedjouleError, match="line 3"):
        TraceReplay(write_trace(tmp_path / "a.csv", "0,1,2\n0,5,x\n"), 2)
    with pytest.raises(FedjouleError, match="not found"):
        TraceReplay(tmp_path / "missing.csv", 2)
    with pytest.raises(FedjouleError, match="client, start_s, end_s"):
        (tmp_path / "b.csv").write_text("id,a,b\n")
        TraceReplay(tmp_path / "b.csv", 2)


def test_trace_client_going_offline_mid_round_is_dropped_then(tmp_path):
    c = hand_costs(scenario())
    down_s = c["bits"] / c["rate_down_bps"]
    end_s = down_s / 2  # client 0 leaves half-way through its download
    rows = "".join(f"{k},0,1e6\n" for k in range(1, 8)) + f"0,0,{end_s!r}\n"
    path = write_trace(tmp_path / "t.csv", rows)
    sim = Simulation(
        build_world(
            scenario("availability.kind=trace", f"availability.trace_file={path}",
                     "training.clients_per_round=8"),
            device="cpu",
        )
    )  # fmt: skip
    out = []
    sim.run(1, out.append)
    (gone,) = [rec for rec in sim.last_records if rec.client == 0]
    assert gone.outcome == "offline" and gone.end_s == pytest.approx(end_s, rel=1e-12)
    assert gone.energy_rx_j == pytest.approx(0.1 * end_s, rel=1e-12)  # spent energy counts
    assert out[0]["dropped_offline"] == 1 and out[0]["arrived"] == 7


def test_diurnal_run_participation_falls_and_rises(tmp_path):
    s = scenario(
        "population.size=60", "availability.kind=diurnal", "availability.diurnal_mean=0.5",
        "availability.diurnal_amplitude=0.45", "round.interval_s=7200", "training.rounds=12",
        "training.eval_every=12",
    )  # fmt: skip
    run_scenario(s, tmp_path, device="cpu")
    online = [row["online"] for row in read_rounds(tmp_path / "rounds.csv")]
    starts = [row["sim_time_start_s"] for row in read_rounds(tmp_path / "rounds.csv")]
    assert starts == [2 * 3600.0 * r for r in range(12)]
    # peak at 6 h (p = 0.95), trough at 18 h (p = 0.05)
    assert online[3] > 45 and online[9] < 12
