"""CPU power at each DVFS frequency, from a measured table in the form of Android's
power_profile.xml (docs/models.md#cpu-power-per-frequency).

A table (DeviceClass.dvfs) holds, per CPU cluster, the frequencies (kHz) and the current
one core draws at each (mA), the cluster's own current and the CPU's active current, all
measured at the battery. Android's battery accounting (AOSP
frameworks/base/core/java/com/android/internal/os/PowerProfile.java and its CPU power
calculator, the cluster keys of power_profile.xml) adds them:
I(f) = cpu.active + cpu.cluster_power.clusterK + n x cpu.core_power.clusterK(f)
for n cores of cluster K running at f. Power is I(f) x the table's voltage_v. Between two
table speeds the core current is linear in f; outside the table nothing is extrapolated:
the scenario check refuses such a frequency.
"""

import numpy as np
from numpy.typing import ArrayLike

KHZ = 1e3
MA = 1e-3


def training_cluster(table) -> int:
    """The index of the cluster training runs on: the table's `cluster`, else the one with
    the highest top speed (the last of equals)."""
    if table.cluster is not None:
        return table.cluster
    tops = [c.core_speeds_khz[-1] for c in table.clusters]
    return max(range(len(tops)), key=lambda k: (tops[k], k))


def cores_used(table) -> int:
    """The cores training runs on in its cluster: the table's `cores_used`, else all."""
    if table.cores_used is not None:
        return table.cores_used
    return table.clusters[training_cluster(table)].cores


def freq_range_hz(table) -> tuple[float, float]:
    """The lowest and highest speed (Hz) of the training cluster."""
    speeds = table.clusters[training_cluster(table)].core_speeds_khz
    return speeds[0] * KHZ, speeds[-1] * KHZ


def out_of_table(table, freq_hz: float) -> str:
    """The message for a frequency outside the training cluster's speeds."""
    low, high = freq_range_hz(table)
    return (
        f"{freq_hz:g} Hz is outside the dvfs table's speeds of cluster "
        f"{training_cluster(table)} ({low:g} to {high:g} Hz); the table is not extrapolated"
    )


def cpu_power_w(table, freq_hz: ArrayLike) -> np.ndarray | float:
    """CPU power (W) of the training cluster's cores_used cores at freq_hz:
    V x (active + cluster + n x core(f)), core(f) linear between table speeds.
    ValueError for a frequency outside the table."""
    cluster = table.clusters[training_cluster(table)]
    f = np.asarray(freq_hz, dtype=float)
    low, high = freq_range_hz(table)
    if np.any(f < low) or np.any(f > high):
        outside = f[(f < low) | (f > high)].flat[0]
        raise ValueError(out_of_table(table, float(outside)))
    speeds_hz = np.asarray(cluster.core_speeds_khz, dtype=float) * KHZ
    core_ma = np.interp(f, speeds_hz, np.asarray(cluster.core_power_ma, dtype=float))
    current_ma = table.active_ma + cluster.cluster_power_ma + cores_used(table) * core_ma
    return table.voltage_v * current_ma * MA


def cpu_step(table, cycles: ArrayLike, batch_size: ArrayLike, freq_hz: ArrayLike):
    """(time s, energy J) of one local step of the cpu kind on a table: the time
    c x B / (f x n) on n = cores_used cores, the energy the table's power at f times it."""
    f = np.asarray(freq_hz, dtype=float)
    time_s = np.asarray(cycles, dtype=float) * np.asarray(batch_size, dtype=float)
    time_s = time_s / (f * cores_used(table))
    return time_s, cpu_power_w(table, f) * time_s


def measured_at(table, measured_power_w: float, step_time_s: ArrayLike, freq_hz: ArrayLike):
    """(time s, power W) of the measured kind at freq_hz instead of the table's highest
    speed, where it was measured: the time scales by f_max / f, the CPU's share of the
    measured power follows the table and the rest of the device stays:
    P(f) = measured_power_w + P_cpu(f) - P_cpu(f_max)."""
    high = freq_range_hz(table)[1]
    f = np.asarray(freq_hz, dtype=float)
    power_w = measured_power_w + (cpu_power_w(table, f) - cpu_power_w(table, high))
    return np.asarray(step_time_s, dtype=float) * (high / f), power_w


def table_rows(table, sources: dict) -> list[tuple[str, object, str]]:
    """(field, value, source) rows of `fedjoule profiles NAME` for a dvfs table: its
    fields, then each speed of the training cluster with its current and CPU power."""
    k, n = training_cluster(table), cores_used(table)
    cluster = table.clusters[k]

    def source(field: str) -> str:
        return sources.get(f"dvfs.{field}") or "default (docs/scenario-reference.md)"

    rows: list[tuple[str, object, str]] = [
        ("dvfs.voltage_v", table.voltage_v, source("voltage_v")),
        ("dvfs.active_ma", table.active_ma, source("active_ma")),
        ("dvfs.clusters", ", ".join(
            f"{c.cores} x {c.core_speeds_khz[0] / KHZ:g}-{c.core_speeds_khz[-1] / KHZ:g} MHz"
            for c in table.clusters), source("clusters")),
        ("dvfs.cluster", k, source("cluster")),
        ("dvfs.cores_used", n, source("cores_used")),
    ]  # fmt: skip
    for khz, core_ma in zip(cluster.core_speeds_khz, cluster.core_power_ma, strict=True):
        power_w = float(cpu_power_w(table, khz * KHZ))
        shown = f"{core_ma:g} mA a core; CPU {power_w:.4g} W"
        rows.append((f"dvfs at {khz / KHZ:g} MHz", shown, f"cluster {k}, {n} cores"))
    return rows
