"""Deadline frequency: the lowest DVFS frequency that meets the deadline, checked against
the closed form and one float below; deadline steps: the largest count that fits."""

import numpy as np
import pytest

from fedjoule.devices.compute import cpu_step_energy_j
from fedjoule.policies.deadline import compute_time_s, deadline_frequency_hz, deadline_steps

C, B, K = 2.0e6, 32, 10  # cycles per sample, batch size, local steps: 6.4e8 cycles
LOW_HZ, HIGH_HZ = 0.3e9, 2.0e9


def test_deadline_frequency_is_the_lowest_that_meets_the_deadline():
    comm_s = np.array([0.2, 0.5, 1.5, 1.9, 0.0])
    freq = deadline_frequency_hz(C, B, K, comm_s, 2.0, LOW_HZ, HIGH_HZ)
    # 6.4e8 cycles in 1.8 s: 3.556e8 Hz; in 1.5 s: 4.267e8; in 0.5 s: 1.28e9; in 0.1 s:
    # 6.4e9 > f_max, so f_max; in 2 s: 3.2e8
    expected = np.array([6.4e8 / 1.8, 6.4e8 / 1.5, 1.28e9, HIGH_HZ, 3.2e8])
    assert np.allclose(freq, expected, rtol=1e-15)
    meets = comm_s + compute_time_s(C, B, K, freq) <= 2.0
    assert meets.tolist() == [True, True, True, False, True]  # f_max cannot save client 3
    below = np.nextafter(freq, 0)  # one float lower misses the deadline (or the range)
    late = comm_s + compute_time_s(C, B, K, below) > 2.0
    assert np.all(late[meets] | (below[meets] < LOW_HZ))
    # and it saves compute energy against the fastest speed (kappa c B f^2, lower f)
    assert np.all(cpu_step_energy_j(C, B, freq) <= cpu_step_energy_j(C, B, HIGH_HZ))


def test_deadline_frequency_is_raised_to_the_lowest_speed_and_counts_the_cores():
    assert deadline_frequency_hz(C, B, K, 0.0, 100.0, LOW_HZ, HIGH_HZ) == LOW_HZ
    # 4 cores share the cycles: 6.4e8 / 4 in 0.5 s
    freq = deadline_frequency_hz(C, B, K, 1.5, 2.0, LOW_HZ, HIGH_HZ, cores=4)
    assert freq == pytest.approx(3.2e8, rel=1e-15)


def test_deadline_frequency_meets_the_deadline_despite_round_off():
    gen = np.random.default_rng(0)
    comm_s = gen.uniform(0.0, 1.0, 10_000)
    steps = gen.integers(1, 100, 10_000)
    freq = deadline_frequency_hz(1.3e5, 20, steps, comm_s, 1.7, 1e6, 1e10)
    assert np.all(comm_s + compute_time_s(1.3e5, 20, steps, freq) <= 1.7)
    assert np.all(comm_s + compute_time_s(1.3e5, 20, steps, np.nextafter(freq, 0)) > 1.7)


def test_deadline_steps_is_the_largest_count_that_fits():
    step_s = np.array([0.1, 0.3, 0.7, 0.05, 2.0])
    comm_s = np.array([0.5, 0.2, 0.1, 0.0, 0.5])
    steps = deadline_steps(step_s, comm_s, 2.0, max_steps=30)
    # 1.5 / 0.1 = 15 (round-off puts 1.5 / 0.1 at 14.999...), 1.8 / 0.3 = 6, 1.9 / 0.7 = 2,
    # 2 / 0.05 = 40 capped at 30, 1.5 / 2 = 0 raised to 1
    assert steps.tolist() == [15, 6, 2, 30, 1]
    fits = comm_s + steps * step_s <= 2.0
    assert fits.tolist() == [True, True, True, True, False]
    assert np.all((comm_s + (steps + 1) * step_s > 2.0) | (steps == 30))
