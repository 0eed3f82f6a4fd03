"""A local step at a CPU frequency a policy chose (issue 29, item 1c): each device class's
DVFS range, the step's time and energy there, and the refusals
(docs/models.md#a-policys-cpu-frequency)."""

import numpy as np
from numpy.typing import ArrayLike

from fedjoule.devices import dvfs
from fedjoule.devices.compute import (
    cpu_step_energy_j,
    cpu_step_time_s,
    cycles_per_sample,
    measured_step_energy_j,
    measured_step_time_s,
)
from fedjoule.errors import FedjouleError

NEEDS = (
    "a frequency policy needs compute: cpu (kappa f^2, or a dvfs table's power), or "
    "compute: measured with a dvfs table"
)


def _label(cls) -> str:
    profile = f", profile {cls.profile!r}" if cls.profile else ""
    return f"device class {cls.name!r} (compute: {cls.compute}{profile})"


def no_power_per_frequency(cls) -> str | None:
    """Why a class takes no CPU frequency decision (its compute states no power per
    frequency), or None when it takes one."""
    if cls.compute == "cpu" or (cls.compute == "measured" and cls.dvfs is not None):
        return None
    what = "no dvfs table" if cls.compute == "measured" else "one measured operating point"
    if cls.compute == "accelerator":
        what = "an accelerator's fixed active power"
    return f"{_label(cls)} states no power per frequency ({what}); {NEEDS}"


def dvfs_range_hz(cls) -> tuple[float, float]:
    """A class's DVFS range (lowest, highest Hz): its dvfs table's speeds of the training
    cluster (dvfs.freq_range_hz); without a table, the cpu kind's [cpu_freq_min_hz,
    cpu_freq_max_hz]. A FedjouleError for a class that states no power per frequency."""
    refusal = no_power_per_frequency(cls)
    if refusal is not None:
        raise FedjouleError(refusal)
    if cls.dvfs is not None:
        return dvfs.freq_range_hz(cls.dvfs)
    return float(cls.cpu_freq_min_hz), float(cls.cpu_freq_max_hz)


def range_source(cls) -> str:
    """Where the class's DVFS range comes from, for a message."""
    if cls.dvfs is not None:
        return f"the dvfs table's speeds of cluster {dvfs.training_cluster(cls.dvfs)}"
    return "cpu_freq_min_hz to cpu_freq_max_hz"


def step_at_frequency(
    cls, forward_flops: float, batch_size: int, freq_hz: ArrayLike, slowdown: ArrayLike = 1.0
):
    """(time s, energy J) of one local step of class `cls` at freq_hz (the range unchecked):
    - cpu: t = c B / f, E = kappa c B f^2 (Tran et al., INFOCOM 2019; Yang et al., IEEE
      TWC 2021); with a dvfs table t = c B / (n f) and E = P_table(f) t (dvfs.cpu_step);
    - measured with a dvfs table: the measured step (its `slowdown` applied) scaled by
      f_max / f, its CPU's share of the power following the table (dvfs.measured_at).
    The class's nominal frequency gives exactly population.step_costs' values."""
    refusal = no_power_per_frequency(cls)
    if refusal is not None:
        raise FedjouleError(refusal)
    f = np.asarray(freq_hz, dtype=float)
    if cls.compute == "cpu":
        cycles = cycles_per_sample(forward_flops, cls.flops_per_cycle)
        if cls.dvfs is not None:
            return dvfs.cpu_step(cls.dvfs, cycles, batch_size, f)
        time_s = cpu_step_time_s(cycles, batch_size, f)
        return time_s, cpu_step_energy_j(cycles, batch_size, f, cls.kappa)
    step_s = np.asarray(slowdown, dtype=float) * measured_step_time_s(
        forward_flops, batch_size, cls.reference_seconds_per_sample,
        cls.reference_flops_per_sample,
    )  # fmt: skip
    time_s, power_w = dvfs.measured_at(cls.dvfs, cls.measured_power_w, step_s, f)
    return time_s, measured_step_energy_j(time_s, power_w)


def clients_dvfs_range_hz(section, population, clients: ArrayLike):
    """(lowest, highest) Hz arrays over `clients`: each one's class's DVFS range
    (dvfs_range_hz); a FedjouleError when a class of theirs, or the population's capacity
    trace, states no power per frequency."""
    clients = np.asarray(clients, dtype=int)
    _refuse_capacity_trace(section)
    low, high = np.empty(len(clients)), np.empty(len(clients))
    index = population.class_index[clients]
    for i in np.unique(index):
        rows = index == i
        low[rows], high[rows] = dvfs_range_hz(section.device_classes[i])
    return low, high


def clients_step_at(section, population, forward_flops, batch_size, clients, freq_hz):
    """(time s, energy J) arrays of one local step of each of `clients` at its freq_hz
    (step_at_frequency by class). A FedjouleError naming the class, the client, the value
    and the range for a frequency outside its class's DVFS range, or naming the class and
    its profile when it states no power per frequency."""
    clients = np.asarray(clients, dtype=int)
    freq = np.broadcast_to(np.asarray(freq_hz, dtype=float), clients.shape)
    low, high = clients_dvfs_range_hz(section, population, clients)
    bad = np.flatnonzero(~((freq >= low) & (freq <= high)))  # nan too
    if bad.size:
        i = bad[0]
        cls = section.device_classes[population.class_index[clients[i]]]
        raise FedjouleError(
            f"device class {cls.name!r}: client {clients[i]}'s CPU frequency {freq[i]:g} Hz "
            f"is outside the class's DVFS range, {low[i]:g} to {high[i]:g} Hz "
            f"({range_source(cls)})"
        )
    time_s, energy_j = np.empty(len(clients)), np.empty(len(clients))
    slowdown = population.compute_slowdown
    index = population.class_index[clients]
    for i in np.unique(index):
        rows = index == i
        spread = 1.0 if slowdown is None else slowdown[clients[rows]]
        time_s[rows], energy_j[rows] = step_at_frequency(
            section.device_classes[i], forward_flops, batch_size, freq[rows], spread
        )
    return time_s, energy_j


def _refuse_capacity_trace(section) -> None:
    trace = getattr(section, "capacity_trace", None)
    if trace is not None:
        raise FedjouleError(
            f"population.capacity_trace {trace.file!r} states no power per frequency "
            f"(FedScale's traces give a time per sample and one power_w); {NEEDS}, without "
            "a capacity trace"
        )
