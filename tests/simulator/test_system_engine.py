"""The numpy system engine equals the SimPy engine with training skipped (same seed, same
rounds.csv time/energy/bits/arrival columns), and its parts equal their closed forms."""

import math

import numpy as np
import pytest

from fedjoule.data import federated
from fedjoule.data.shapes import client_sample_counts, dataset_shape
from fedjoule.devices.vector_availability import DiurnalVector, MarkovVector, PerClient
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from fedjoule.simulator.world import build_world
from tests.simulator.test_round_accounting import (
    FREQ_HZ,
    SNR_DB,
    STEPS,
    UP_HZ,
    M,
    hand_costs,
)
from tests.simulator.test_round_accounting import scenario as fixed_scenario

COLUMNS = [
    "sim_time_start_s", "sim_time_end_s", "online", "selected", "arrived", "dropped",
    "dropped_deadline", "dropped_offline", "dropped_outage", "dropped_battery",
    "dropped_overcommit", "failed", "energy_compute_j", "energy_tx_j", "energy_rx_j",
    "energy_total_j", "uplink_bits", "uplink_airtime_s", "downlink_airtime_s",
    "compute_time_s", "uplink_attempts", "selected_per_cell", "arrived_per_cell",
]  # fmt: skip

SMALL_BATTERY = (
    "population.device_classes=[{name: p, share: 1.0, battery_j: 1, initial_charge_min: 0.2, "
    "initial_charge_max: 0.215}]"
)
# name: (scenario, overrides, the drop causes (or "attempts") this case must exercise)
CASES = {
    "fdma-overcommit": ("default-theory", ["round.overcommit=1.5", "training.clients_per_round=20"],
                        ["overcommit"]),
    "fdma-deadline": ("default-theory", ["round.deadline_s=0.08"], ["deadline"]),
    "tdma-overcommit": ("default-theory", ["round.overcommit=1.3", "channel.access=tdma",
                                    "round.deadline_s=0.3"], ["overcommit"]),
    "ofdma-outage-retx": ("urban-macro", ["availability.kind=bernoulli", "output.events=false",
                                          "output.timeline_rounds=[]"], ["attempts"]),
    "ofdma-outage-no-retx": ("urban-macro", ["availability.kind=always", "channel.max_retx=0",
                                             "round.overcommit=1", "output.events=false"],
                             ["outage"]),
    "tdma-outage-deadline": ("urban-macro", ["availability.kind=always", "channel.access=tdma",
                                             "round.deadline_s=1.0",
                                             "training.clients_per_round=30"],
                             ["deadline", "attempts"]),
    "fdma-outage-per-transmission": ("urban-macro", ["availability.kind=bernoulli",
                                                     "channel.access=fdma",
                                                     "round.overcommit=1"], ["attempts"]),
    "waterfall": ("rural-iot-low-snr", [], ["outage"]),
    "cells-backhaul": ("dense-small-cells", ["round.deadline_s=0.3"], ["deadline"]),
    "diurnal-charging": ("diurnal-phones", [], []),
    "battery-fdma": ("default-theory", [SMALL_BATTERY, "round.deadline_s=null"], ["battery"]),
    "battery-ofdma": ("default-theory", [SMALL_BATTERY, "round.deadline_s=null",
                                         "channel.access=ofdma", "channel.resource_blocks=2"],
                      ["battery"]),
    "freeloaders-epochs": ("default-theory", ["population.freeloaders.fraction=0.3",
                                       "training.local_epochs=1",
                                       "training.participation=bernoulli",
                                       "round.server_time_s=0.01", "round.interval_s=5"], []),
}  # fmt: skip


def assert_rows_equal(simpy_rows, numpy_rows, columns=COLUMNS):
    assert len(simpy_rows) == len(numpy_rows)
    for a, b in zip(simpy_rows, numpy_rows, strict=True):
        for c in columns:
            if isinstance(a[c], str):
                assert a[c] == b[c], (a["round"], c)
            else:  # same formulas, other summation order: equal to 1e-9
                assert b[c] == pytest.approx(a[c], rel=1e-9, abs=1e-12), (a["round"], c)


def both_engines(s, rounds=20, per_client_availability=False):
    simpy_rows, numpy_rows = [], []
    SimpySystemSimulation(build_system_world(s)).run(rounds, simpy_rows.append)
    engine = SystemEngine(build_system_world(s))
    if per_client_availability:  # the SimPy engine's own model, asked client by client
        engine.availability = PerClient(engine.world.availability)
    engine.run(rounds, numpy_rows.append)
    return simpy_rows, numpy_rows


@pytest.mark.parametrize("case", CASES)
def test_numpy_engine_equals_simpy_engine(case):
    name, overrides, exercised = CASES[case]
    simpy_rows, numpy_rows = both_engines(load_scenario(name, overrides))
    assert_rows_equal(simpy_rows, numpy_rows)
    for what in exercised:  # the case does exercise what it is named for
        if what == "attempts":
            assert sum(r["uplink_attempts"] for r in numpy_rows) > sum(
                r["selected"] - r["dropped_overcommit"] for r in numpy_rows
            ) // 2 and any(r["uplink_attempts"] > r["selected"] for r in numpy_rows)
        else:
            assert sum(r[f"dropped_{what}"] for r in numpy_rows) > 0, what
    assert sum(r["arrived"] for r in numpy_rows) > 0


def test_offline_drops_equal_with_the_simpy_markov_process():
    s = load_scenario(
        "default-theory",
        ["availability.kind=markov", "availability.mean_on_s=0.5", "availability.mean_off_s=0.5",
         "round.deadline_s=null"],
    )  # fmt: skip
    simpy_rows, numpy_rows = both_engines(s, per_client_availability=True)
    assert_rows_equal(simpy_rows, numpy_rows)
    assert sum(r["dropped_offline"] for r in numpy_rows) > 0


def test_trace_availability_runs_per_client(tmp_path):
    trace = tmp_path / "trace.csv"
    rows = ["client,start_s,end_s"] + [f"{k},0,{0.002 + 0.0002 * k}" for k in range(0, 100, 2)]
    trace.write_text("\n".join(rows) + "\n")
    s = load_scenario(
        "default-theory", ["availability.kind=trace", f"availability.trace_file={trace}",
                    "availability.trace_period_s=1", "round.interval_s=1"],
    )  # fmt: skip
    simpy_rows, numpy_rows = both_engines(s, rounds=5)
    assert_rows_equal(simpy_rows, numpy_rows)
    assert all(r["online"] <= 50 for r in numpy_rows)
    assert sum(r["dropped_offline"] for r in numpy_rows) > 0


def test_skipping_training_changes_no_time_or_energy():
    """The SimPy engine with and without training: the same rounds (system streams only)."""
    s = load_scenario("default-theory", ["training.rounds=3"])
    trained = []
    Simulation(build_world(s, device="cpu")).run(3, trained.append)
    skipped = []
    SimpySystemSimulation(build_system_world(s)).run(3, skipped.append)
    for a, b in zip(trained, skipped, strict=True):
        for c in COLUMNS:
            assert a[c] == b[c], c


def test_fdma_round_time_is_the_closed_form():
    """Equal devices, fixed SNR, no fading: m uploads share B and all end at
    down + K t_step + m S / (B log2(1 + snr))."""
    s = fixed_scenario()
    c = hand_costs(s)
    engine = SystemEngine(build_system_world(s))
    rows = []
    engine.run(2, rows.append)
    up_s = M * c["bits"] / (UP_HZ * math.log2(1 + 10 ** (SNR_DB / 10)))
    round_s = c["bits"] / c["rate_down_bps"] + STEPS * c["step_s"] + up_s
    assert rows[0]["sim_time_end_s"] == pytest.approx(round_s, rel=1e-12)
    assert rows[1]["sim_time_end_s"] == pytest.approx(2 * round_s, rel=1e-12)
    assert rows[0]["uplink_airtime_s"] == pytest.approx(M * up_s, rel=1e-12)
    assert rows[0]["energy_compute_j"] == pytest.approx(M * STEPS * c["step_j"], rel=1e-12)
    assert engine.world.step_time_s[0] * FREQ_HZ == pytest.approx(c["step_s"] * FREQ_HZ)


def test_world_needs_no_data(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the system world must not load or generate data")

    monkeypatch.setattr(federated, "build_federated_data", refuse)
    for name in ("default-theory", "mnist-dirichlet"):
        world = build_system_world(load_scenario(name, ["training.local_epochs=2"]))
        assert world.client_steps.min() >= 1


@pytest.mark.parametrize("name", ["default-theory", "mnist-dirichlet"])
def test_shapes_sizes_and_model_match_the_loaded_data(name):
    s = load_scenario(name, ["population.size=20"])
    data = federated.build_federated_data(s.dataset, 20, s.seed)
    assert dataset_shape(s.dataset) == (data.input_shape, data.n_classes)
    np.testing.assert_array_equal(client_sample_counts(s.dataset, 20, s.seed), data.client_samples)
    world = build_world(s, device="cpu")
    system = build_system_world(s)
    assert system.n_params == world.model.n_params
    assert system.uplink_bits == world.uplink_bits
    np.testing.assert_array_equal(system.step_energy_j, world.step_energy_j)


def test_diurnal_charging_vectorised_equals_the_per_client_loop():
    world = build_system_world(load_scenario("diurnal-phones"))
    vec = DiurnalVector(world.availability)
    for t0, t1 in [(0.0, 3600.0), (5000.0, 200_000.0), (80_000.0, 80_001.0)]:
        np.testing.assert_allclose(
            vec.charging_time_s(t0, t1), world.availability.charging_time_s(t0, t1), atol=1e-6
        )
        expected = [world.availability.charging(k, t1) for k in range(world.population.size)]
        np.testing.assert_array_equal(vec.charging(t1), expected)


def test_vector_markov_has_the_stationary_law():
    """P(online) = on / (on + off) at any time; on periods are exponential with mean on."""
    on_s, off_s, n = 30.0, 10.0, 200_000
    chain = MarkovVector(on_s, off_s, 0, n)
    for r, t in enumerate([0.0, 7.0, 100.0, 1000.0]):
        assert chain.online_mask(t, r).mean() == pytest.approx(0.75, abs=0.005)
    online = np.flatnonzero(chain.state)
    residual = chain.next_offline_s(online, 1000.0, 3) - 1000.0
    assert residual.min() > 0 and residual.mean() == pytest.approx(on_s, rel=0.02)


def test_no_train_run_folder_holds_the_engine_rounds(tmp_path):
    from fedjoule.report.results import read_rounds
    from fedjoule.simulator.system_run import run_system

    s = load_scenario("default-theory", ["training.rounds=5"])
    out, summary = run_system(s, tmp_path / "run")
    rows = []
    SystemEngine(build_system_world(s)).run(5, rows.append)
    written = read_rounds(out / "rounds.csv")
    assert_rows_equal(rows, written, [c for c in COLUMNS if "per_cell" not in c])
    assert summary["energy_total_j"] == pytest.approx(sum(r["energy_total_j"] for r in rows))
    assert summary["engine"] == "numpy" and (out / "clients.csv").exists()


def test_events_fall_back_to_simpy_or_refuse():
    from fedjoule.errors import FedjouleError
    from fedjoule.simulator.system_run import choose_engine

    s = load_scenario("urban-macro")
    engine, notices = choose_engine(s, "auto")
    assert engine == "simpy" and any("falling back" in n for n in notices)
    with pytest.raises(FedjouleError, match="output.events=true"):
        choose_engine(s, "numpy")
    with pytest.raises(FedjouleError, match="allowed: auto, numpy, simpy"):
        choose_engine(s, "fast")
