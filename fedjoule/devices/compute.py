"""On-device training time and energy: CPU with DVFS, or an accelerator."""

import numpy as np
from numpy.typing import ArrayLike

# Training a sample costs about 3x its forward pass (forward + backward).
TRAINING_FLOPS_PER_FORWARD_FLOP = 3.0


def cycles_per_sample(
    forward_flops_per_sample: ArrayLike, flops_per_cycle: float = 4.0
) -> np.ndarray | float:
    """CPU cycles to train one sample: c = 3 * forward FLOPs / FLOPs per cycle."""
    # WIRELESS.md: c derived from the model rather than a fixed literature constant
    forward = np.asarray(forward_flops_per_sample, dtype=float)
    return TRAINING_FLOPS_PER_FORWARD_FLOP * forward / flops_per_cycle


def cpu_step_time_s(
    cycles_per_sample: ArrayLike, batch_size: ArrayLike, freq_hz: ArrayLike
) -> np.ndarray | float:
    """Time of one local step on a CPU at `freq_hz`: c * B / f."""
    # Tran et al., INFOCOM 2019: t = c B / f
    c = np.asarray(cycles_per_sample, dtype=float)
    return c * np.asarray(batch_size, dtype=float) / np.asarray(freq_hz, dtype=float)


def cpu_step_energy_j(
    cycles_per_sample: ArrayLike,
    batch_size: ArrayLike,
    freq_hz: ArrayLike,
    kappa: float = 1e-28,
) -> np.ndarray | float:
    """Energy of one local step on a CPU: kappa * c * B * f^2."""
    # Yang et al., IEEE TWC 2021 / Tran et al., INFOCOM 2019: E = kappa c B f^2
    c = np.asarray(cycles_per_sample, dtype=float)
    f = np.asarray(freq_hz, dtype=float)
    return kappa * c * np.asarray(batch_size, dtype=float) * f * f


def accelerator_step_time_s(
    forward_flops_per_sample: ArrayLike,
    batch_size: ArrayLike,
    peak_flops: ArrayLike,
    efficiency: ArrayLike,
) -> np.ndarray | float:
    """Time of one local step on an accelerator: 3 * forward FLOPs * B / (eff * peak)."""
    forward = np.asarray(forward_flops_per_sample, dtype=float)
    step_flops = TRAINING_FLOPS_PER_FORWARD_FLOP * forward * np.asarray(batch_size, dtype=float)
    return step_flops / (np.asarray(efficiency, dtype=float) * np.asarray(peak_flops, dtype=float))


def accelerator_step_energy_j(
    step_time_s: ArrayLike, active_power_w: ArrayLike
) -> np.ndarray | float:
    """Energy of one local step on an accelerator: P_active * t_step."""
    return np.asarray(active_power_w, dtype=float) * np.asarray(step_time_s, dtype=float)
