"""A policy's CPU frequency (issue 29, item 1c; devices/frequency.py): the cpu kind's
closed forms (half the frequency: twice the time, a quarter of the energy per step), a
dvfs table's power at f, the nominal frequency giving today's costs exactly, the
refusals, both engines charging the same for an allocated frequency, and the deadline
frequency meeting the deadline in the engine."""

import json

import numpy as np
import pytest

from fedjoule.devices.frequency import (
    clients_dvfs_range_hz,
    clients_step_at,
    dvfs_range_hz,
    step_at_frequency,
)
from fedjoule.devices.population import sample_population, step_costs
from fedjoule.errors import FedjouleError
from fedjoule.policies.deadline import deadline_frequency_hz
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import DeviceClass
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from tests.devices.test_dvfs import MEASURED, POWER_W, TABLE
from tests.simulator.test_system_engine import assert_rows_equal

FORWARD, BATCH = 2.0e6, 8
CYCLES = 3 * FORWARD / 4.0  # flops_per_cycle 4


def scenario(device_classes: list[dict], *sets: str):
    return load_scenario(
        "default-theory",
        [f"population.device_classes={json.dumps(device_classes)}", "population.size=10", *sets],
    )


def test_cpu_kind_half_the_frequency_twice_the_time_a_quarter_of_the_energy():
    cls = DeviceClass(compute="cpu", kappa=1e-28)
    time_s, energy_j = step_at_frequency(cls, FORWARD, BATCH, [2e9, 1e9])
    np.testing.assert_allclose(time_s, [CYCLES * BATCH / 2e9, CYCLES * BATCH / 1e9], rtol=1e-15)
    np.testing.assert_allclose(energy_j, 1e-28 * CYCLES * BATCH * np.array([4e18, 1e18]))
    assert time_s[1] == 2 * time_s[0] and energy_j[1] == pytest.approx(energy_j[0] / 4, 1e-15)
    assert dvfs_range_hz(cls) == (1e9, 2e9)  # cpu_freq_min_hz, cpu_freq_max_hz


@pytest.mark.parametrize(
    "classes",
    [
        [{"name": "phone", "share": 0.8}, {"name": "iot", "share": 0.2, "kappa": 3e-28,
                                           "cpu_freq_min_hz": 0.5e9, "cpu_freq_max_hz": 1e9}],
        [{"compute": "cpu", "dvfs": TABLE, "cpu_freq_min_hz": 1.2e9, "cpu_freq_max_hz": 2.9e9}],
        [{**MEASURED, "cpu_freq_hz": 2.5e9, "compute_spread_sigma": 0.4}],
        [{"profile": "phone-lte-midrange"}],  # measured, run at its table's top speed
    ],
    ids=["cpu", "cpu-table", "measured-table", "measured-top-speed"],
)  # fmt: skip
def test_the_nominal_frequency_gives_todays_step_costs_exactly(classes):
    s = scenario(classes)
    pop = sample_population(s.population, seed=3)
    today = step_costs(s.population, pop, FORWARD, BATCH)
    clients = np.arange(10)
    nominal = np.array([
        pop.cpu_freq_hz[k] if c.compute == "cpu" or c.cpu_freq_hz is not None
        else dvfs_range_hz(c)[1]
        for k, c in ((k, s.population.device_classes[pop.class_index[k]]) for k in clients)
    ])  # fmt: skip
    at = clients_step_at(s.population, pop, FORWARD, BATCH, clients, nominal)
    assert np.array_equal(at[0], today[0]) and np.array_equal(at[1], today[1])


def test_a_dvfs_table_charges_its_power_at_f_between_its_speeds():
    cpu = DeviceClass(compute="cpu", dvfs=TABLE)
    freq = np.array(sorted(POWER_W))
    time_s, energy_j = step_at_frequency(cpu, FORWARD, BATCH, freq)
    step_s = CYCLES * BATCH / (freq * 2)  # on cores_used = 2
    np.testing.assert_allclose(time_s, step_s, rtol=1e-15)
    np.testing.assert_allclose(energy_j, [POWER_W[f] for f in freq] * step_s, rtol=1e-12)
    assert dvfs_range_hz(cpu) == (1e9, 3e9)  # the training cluster's speeds, not 1-2 GHz
    measured = DeviceClass(**MEASURED)
    time_s, energy_j = step_at_frequency(measured, FORWARD, BATCH, freq, slowdown=2.0)
    top_s = 2.0 * 0.5 * (FORWARD / 4.0e6) * BATCH  # measured at 3 GHz, the top speed
    power_w = np.array([5.0 - POWER_W[3e9] + POWER_W[f] for f in freq])
    np.testing.assert_allclose(time_s, top_s * 3e9 / freq, rtol=1e-15)
    np.testing.assert_allclose(energy_j, power_w * top_s * 3e9 / freq, rtol=1e-12)


NEEDS = (
    "a frequency policy needs compute: cpu (kappa f^2, or a dvfs table's power), or "
    "compute: measured with a dvfs table"
)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"name": "gpu", "compute": "accelerator"}, "device class 'gpu' (compute: accelerator) "
         "states no power per frequency (an accelerator's fixed active power); "),
        ({"name": "pi", "profile": "rpi4-wifi"}, "device class 'pi' (compute: measured, profile "
         "'rpi4-wifi') states no power per frequency (no dvfs table); "),
        ({"name": "mcu", "profile": "nbiot-sensor"}, "device class 'mcu' (compute: efficiency, "
         "profile 'nbiot-sensor') states no power per frequency (one measured operating "
         "point); "),
    ],
)  # fmt: skip
def test_a_class_without_power_per_frequency_refuses_the_decision(fields, message):
    cls = DeviceClass(**fields)
    for ask in (lambda: dvfs_range_hz(cls), lambda: step_at_frequency(cls, FORWARD, 8, 1e9)):
        with pytest.raises(FedjouleError) as err:
            ask()
        assert str(err.value) == message + NEEDS


def test_a_frequency_outside_the_dvfs_range_is_refused_naming_class_client_and_range():
    s = scenario([{"name": "phone", "share": 0.5},
                  {"name": "tab", "share": 0.5, "compute": "cpu", "dvfs": TABLE}])  # fmt: skip
    pop = sample_population(s.population, seed=3)
    clients = np.arange(10)
    low, high = clients_dvfs_range_hz(s.population, pop, clients)
    phone = pop.class_index == 0
    assert np.all(low[phone] == 1e9) and np.all(high[phone] == 2e9)
    assert np.all(low[~phone] == 1e9) and np.all(high[~phone] == 3e9)
    freq = np.where(phone, 2e9, 3e9)
    clients_step_at(s.population, pop, FORWARD, BATCH, clients, freq)  # the top: allowed
    k = int(np.flatnonzero(phone)[1])
    with pytest.raises(FedjouleError) as err:
        clients_step_at(
            s.population, pop, FORWARD, BATCH, clients, np.where(clients == k, 2.5e9, freq)
        )
    assert str(err.value) == (
        f"device class 'phone': client {k}'s CPU frequency 2.5e+09 Hz is outside the class's "
        "DVFS range, 1e+09 to 2e+09 Hz (cpu_freq_min_hz to cpu_freq_max_hz)"
    )
    t = int(np.flatnonzero(~phone)[0])
    with pytest.raises(FedjouleError) as err:
        clients_step_at(s.population, pop, FORWARD, BATCH, [t], [np.nan])
    assert str(err.value) == (
        f"device class 'tab': client {t}'s CPU frequency nan Hz is outside the class's DVFS "
        "range, 1e+09 to 3e+09 Hz (the dvfs table's speeds of cluster 1)"
    )


def test_a_capacity_trace_refuses_the_decision():
    trace = "package:fedscale-small-capacity.json"
    s = scenario([{"name": "phone"}], f"population.capacity_trace={{file: {trace}, power_w: 3}}")
    pop = sample_population(s.population, seed=3)
    with pytest.raises(FedjouleError) as err:
        clients_step_at(s.population, pop, FORWARD, BATCH, [0], [1.5e9])
    assert str(err.value) == (
        f"population.capacity_trace {trace!r} states no power per frequency (FedScale's traces "
        f"give a time per sample and one power_w); {NEEDS}, without a capacity trace"
    )


class FirstClients:
    """A toy selection in the kernel's steps: the first m candidates."""

    def select(self, candidates, r, key=()):
        return candidates[: self.world.scenario.training.clients_per_round]


class AtFrequency(FirstClients):
    """A toy policy: the first m candidates, each at the frequency `self.frequency(clients)`
    gives (Allocation.cpu_freq_hz)."""

    def allocate(self, selected, r):
        allocation = super().allocate(selected, r)
        allocation.cpu_freq_hz = self.frequency(allocation.clients)
        return allocation


def engines(s, frequency):
    """Both engines with the toy policy, 4 rounds: [(SimPy engine, rows), (numpy, rows)]."""
    played = []
    for engine_class in (SimpySystemSimulation, SystemEngine):
        policy = type("Policy", (AtFrequency, engine_class), {"frequency": staticmethod(frequency)})
        engine, rows = policy(build_system_world(s)), []
        engine.run(4, rows.append)
        played.append((engine, rows))
    return played


def without_wall_time(rows):
    return [{key: v for key, v in row.items() if key != "wall_time_s"} for row in rows]


SETS = ["population.size=12", "training.local_steps=3", "availability.kind=always"]


def test_both_engines_charge_the_allocated_frequency_alike():
    s = load_scenario("default-theory", [*SETS, "round.deadline_s=null"])
    world = build_system_world(s)
    low, high = clients_dvfs_range_hz(s.population, world.population, np.arange(12))

    def quarter(clients):  # a quarter of the way up each class's range
        return low[clients] + 0.25 * (high[clients] - low[clients])

    (simpy, simpy_rows), (numpy_engine, numpy_rows) = engines(s, quarter)
    assert_rows_equal(simpy_rows, numpy_rows)
    m = s.training.clients_per_round
    k = np.arange(m)
    kappa = np.array(
        [s.population.device_classes[i].kappa for i in world.population.class_index[k]]
    )
    c, b, f = 3 * world.forward_flops / 4.0, s.training.batch_size, quarter(k)
    for engine in (simpy, numpy_engine):  # 4 rounds of 3 steps at f: 12 kappa c B f^2
        assert engine.ledger["selected"].tolist() == [4.0] * m + [0.0] * (12 - m)
        expected_j = 12 * kappa * c * b * f**2
        np.testing.assert_allclose(engine.ledger["energy_compute_j"][k], expected_j, rtol=1e-12)
    total_s = sum(row["compute_time_s"] for row in numpy_rows)
    assert total_s == pytest.approx(12 * float(np.sum(c * b / f)), rel=1e-12)
    # each client at its own frequency: the rows of a run without the decision, exactly
    plain_rows = []
    type("Plain", (FirstClients, SystemEngine), {})(world).run(4, plain_rows.append)
    for _, rows in engines(s, lambda clients: world.population.cpu_freq_hz[clients]):
        assert without_wall_time(rows) == without_wall_time(plain_rows)


def test_the_deadline_frequency_meets_the_deadline_in_the_engine():
    """policies.deadline.deadline_frequency_hz with each client's communication time as the
    engine's timelines give it (OFDMA with a block per client, no fading: the same every
    round) gives frequencies at which every client arrives, spending less than at f_max."""
    sets = [
        *SETS,
        "channel.fading=none",
        "channel.access=ofdma",
        "channel.resource_blocks=10",
        "model.forward_flops_per_sample=3e6",
    ]  # steps of 10-70 ms, uploads of 3-30 ms
    s = load_scenario("default-theory", [*sets, "round.deadline_s=null"])
    world = build_system_world(s)
    low, high = clients_dvfs_range_hz(s.population, world.population, np.arange(12))
    (_, (fast, _)) = engines(s, lambda clients: high[clients])
    k = np.flatnonzero(fast.ledger["selected"])
    allocation = fast.allocate(k, 0)
    allocation.cpu_freq_hz = high[k]
    timelines = SystemEngine(world).play_clients(0, 0.0, allocation)
    comm_s = timelines.end_s - timelines.compute_time_s  # downlink and upload
    c = 3 * world.forward_flops / 4.0
    work_cycles = s.training.local_steps * c * s.training.batch_size
    deadline_s = float(np.max(comm_s + work_cycles / (0.5 * (low[k] + high[k]))))
    # aimed a billionth short: aimed exactly, a client dropped by the deadline in round 2,
    # its end (the round's start time plus its times) a few ulps past start + deadline
    aim_s = deadline_s * (1 - 1e-9)
    freq = deadline_frequency_hz(
        c, s.training.batch_size, s.training.local_steps, comm_s, aim_s, low[k], high[k]
    )
    assert np.all(freq < high[k]) and np.any(freq > low[k])
    chosen = np.zeros(12)
    chosen[k] = freq
    s = load_scenario("default-theory", [*sets, f"round.deadline_s={deadline_s!r}"])
    played = engines(s, lambda clients: chosen[clients])
    assert_rows_equal(played[0][1], played[1][1])
    for engine, rows in played:
        assert [(row["arrived"], row["dropped_deadline"]) for row in rows] == [(len(k), 0)] * 4
        assert np.all(engine.ledger["energy_compute_j"][k] < fast.ledger["energy_compute_j"][k])
