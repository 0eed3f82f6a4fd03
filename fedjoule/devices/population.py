"""The client population: each client's device class, compute speed, radio and battery."""

from dataclasses import dataclass

import numpy as np

from fedjoule import rng
from fedjoule.channel.units import dbm_to_w
from fedjoule.devices.compute import (
    accelerator_step_energy_j,
    accelerator_step_time_s,
    efficiency_step_energy_j,
    efficiency_step_time_s,
    measured_step_energy_j,
    measured_step_time_s,
)
from fedjoule.devices.fedscale import load_capacity
from fedjoule.devices.frequency import step_at_frequency


@dataclass
class Population:
    """Per-client device attributes as arrays over the N clients."""

    class_names: list[str]
    class_index: np.ndarray  # (N,) index into class_names
    cpu_freq_hz: np.ndarray
    tx_power_w: np.ndarray
    rx_power_w: np.ndarray
    battery_capacity_j: np.ndarray
    battery_initial_j: np.ndarray
    battery_threshold_j: np.ndarray
    charge_power_w: np.ndarray | None = None
    # per-client step-time factor of the efficiency and measured compute kinds (1: as
    # measured); None: all ones
    compute_slowdown: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.class_index)


def class_counts(shares: list[float], n: int) -> np.ndarray:
    """Exact head counts from shares by the largest-remainder rule."""
    raw = np.asarray(shares) * n
    counts = np.floor(raw).astype(int)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: n - counts.sum()]] += 1
    return counts


def sample_population(section, seed: int) -> Population:
    """Assign device classes (exact shares, random order) and draw per-client values."""
    gen = rng.stream(seed, "population")
    classes = section.device_classes
    counts = class_counts([c.share for c in classes], section.size)
    class_index = gen.permutation(np.repeat(np.arange(len(classes)), counts))

    def per_client(values):
        return np.asarray(values, dtype=float)[class_index]

    def uniform(low, high):
        return gen.uniform(per_client(low), per_client(high))

    capacity = per_client([c.battery_j for c in classes])
    charge = uniform(
        [c.initial_charge_min for c in classes], [c.initial_charge_max for c in classes]
    )
    return Population(
        class_names=[c.name for c in classes],
        class_index=class_index,
        cpu_freq_hz=fixed_frequencies(
            classes,
            class_index,
            uniform([c.cpu_freq_min_hz for c in classes], [c.cpu_freq_max_hz for c in classes]),
        ),
        tx_power_w=per_client([dbm_to_w(c.tx_power_dbm) for c in classes]),
        rx_power_w=per_client([c.rx_power_w for c in classes]),
        battery_capacity_j=capacity,
        battery_initial_j=capacity * charge,
        battery_threshold_j=capacity * per_client([c.battery_threshold for c in classes]),
        charge_power_w=per_client([c.charge_power_w for c in classes]),
        compute_slowdown=compute_slowdown(classes, class_index, seed),
    )


def fixed_frequencies(classes, class_index: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """The drawn CPU frequencies with every client of a class with a fixed cpu_freq_hz at
    that frequency (drawn all the same, so that the draws after these stay as they were)."""
    for index, cls in enumerate(classes):
        if cls.cpu_freq_hz is not None:
            drawn[class_index == index] = cls.cpu_freq_hz
    return drawn


def compute_slowdown(classes, class_index: np.ndarray, seed: int) -> np.ndarray | None:
    """Each client's log-normal step-time factor (DeviceClass.compute_spread_sigma), from
    its own random stream so that scenarios without a spread draw exactly as before;
    None when no class has a spread."""
    sigmas = [c.compute_spread_sigma if c.compute != "cpu" else 0.0 for c in classes]
    if not any(s > 0 for s in sigmas):
        return None
    z = rng.stream(seed, "compute_spread").standard_normal(len(class_index))
    return np.exp(np.asarray(sigmas, dtype=float)[class_index] * z)  # as lognormal_spread


def step_costs(
    section, population: Population, forward_flops: float, batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Time (s) and energy (J) of one local step of every client (docs/models.md#compute-energy)."""
    time_s = np.empty(population.size)
    energy_j = np.empty(population.size)
    for index, cls in enumerate(section.device_classes):
        rows = population.class_index == index
        spread = population.compute_slowdown
        slowdown = 1.0 if spread is None else spread[rows]
        if cls.compute == "cpu" or (cls.compute == "measured" and cls.cpu_freq_hz is not None):
            # at the client's frequency: kappa f^2, or the dvfs table's power at f (measured:
            # below f_max, where it was measured); frequency.step_at_frequency
            time_s[rows], energy_j[rows] = step_at_frequency(
                cls, forward_flops, batch_size, population.cpu_freq_hz[rows], slowdown
            )
        elif cls.compute == "accelerator":
            step = accelerator_step_time_s(
                forward_flops, batch_size, cls.peak_flops, cls.efficiency
            )
            time_s[rows] = step
            energy_j[rows] = accelerator_step_energy_j(step, cls.active_power_w)
        else:  # measured figures, each client's step time spread log-normally
            if cls.compute == "efficiency":
                time_s[rows] = slowdown * efficiency_step_time_s(
                    forward_flops, batch_size, cls.flops_per_s
                )
                energy_j[rows] = efficiency_step_energy_j(
                    forward_flops, batch_size, cls.flops_per_joule
                )
            else:
                step = slowdown * measured_step_time_s(
                    forward_flops,
                    batch_size,
                    cls.reference_seconds_per_sample,
                    cls.reference_flops_per_sample,
                )
                time_s[rows] = step
                energy_j[rows] = measured_step_energy_j(step, cls.measured_power_w)
    capacity = getattr(section, "capacity_trace", None)
    if capacity is not None:  # FedScale's trace: the measured kind at its ms per sample

        seconds_per_sample, _ = load_capacity(capacity.file).for_clients(population.size)
        # FedScale's rule: training time = 3 x batch x steps x ms per sample; the model is
        # the one the trace was measured on, so the FLOPs ratio of the measured kind is 1
        time_s = measured_step_time_s(forward_flops, batch_size, seconds_per_sample, forward_flops)
        energy_j = measured_step_energy_j(time_s, capacity.power_w)
    return time_s, energy_j
