"""On-device training time and energy: CPU with DVFS, or an accelerator."""

import numpy as np
from numpy.typing import ArrayLike

# Training a sample costs about 3x its forward pass (forward + backward).
TRAINING_FLOPS_PER_FORWARD_FLOP = 3.0


def cycles_per_sample(
    forward_flops_per_sample: ArrayLike, flops_per_cycle: float = 4.0
) -> np.ndarray | float:
    """CPU cycles to train one sample: c = 3 * forward FLOPs / FLOPs per cycle."""
    # c derived from the model rather than a fixed literature constant
    # (docs/models.md#cycles-per-sample)
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


# Measured compute models (issue 12): closed forms over a measured figure instead of the
# DVFS constant kappa. The training FLOPs of a step are 3 x forward FLOPs x batch, as above.


def efficiency_step_time_s(
    forward_flops_per_sample: ArrayLike, batch_size: ArrayLike, flops_per_s: ArrayLike
) -> np.ndarray | float:
    """Time of one local step at a measured training throughput: 3 * F * B / (FLOP/s)."""
    step_flops = (
        TRAINING_FLOPS_PER_FORWARD_FLOP
        * np.asarray(forward_flops_per_sample, dtype=float)
        * np.asarray(batch_size, dtype=float)
    )
    return step_flops / np.asarray(flops_per_s, dtype=float)


def efficiency_step_energy_j(
    forward_flops_per_sample: ArrayLike, batch_size: ArrayLike, flops_per_joule: ArrayLike
) -> np.ndarray | float:
    """Energy of one local step at a measured training efficiency: 3 * F * B / (FLOP/J).

    The energy per FLOP is the device's measured figure, so it does not depend on how
    fast a particular client runs (a slower client at the same FLOP/J draws less power)."""
    step_flops = (
        TRAINING_FLOPS_PER_FORWARD_FLOP
        * np.asarray(forward_flops_per_sample, dtype=float)
        * np.asarray(batch_size, dtype=float)
    )
    return step_flops / np.asarray(flops_per_joule, dtype=float)


def measured_step_time_s(
    forward_flops_per_sample: ArrayLike,
    batch_size: ArrayLike,
    reference_seconds_per_sample: ArrayLike,
    reference_flops_per_sample: ArrayLike,
) -> np.ndarray | float:
    """Time of one local step scaled from a measured reference model:
    t = s_ref * (F / F_ref) * B.

    s_ref is the measured training time per sample (forward and backward) of a reference
    model whose forward pass costs F_ref FLOPs per sample (e.g. ResNet-18 at 224x224); a
    model of F forward FLOPs takes F / F_ref as long per sample, as FedScale scales its
    device traces' per-sample latency (Lai et al., ICML 2022)."""
    ratio = np.asarray(forward_flops_per_sample, dtype=float) / np.asarray(
        reference_flops_per_sample, dtype=float
    )
    return (
        np.asarray(reference_seconds_per_sample, dtype=float)
        * ratio
        * np.asarray(batch_size, dtype=float)
    )


def measured_step_energy_j(
    step_time_s: ArrayLike, measured_power_w: ArrayLike
) -> np.ndarray | float:
    """Energy of one local step of the measured model: P_measured * t_step."""
    return np.asarray(measured_power_w, dtype=float) * np.asarray(step_time_s, dtype=float)


def lognormal_spread(gen: np.random.Generator, n: int, sigma: float) -> np.ndarray:
    """n per-client slowdown factors exp(sigma * z), z ~ N(0, 1): median 1, so a profile's
    measured figure is the median device. FedScale's get_completion_time_lognormal draws
    client speed from a log-normal with sigma ("tail_skew") 0.6, after the PAPAYA and GFL
    papers (its docstring). sigma = 0 gives ones and draws nothing."""
    if sigma <= 0:
        return np.ones(n)
    return np.exp(sigma * gen.standard_normal(n))
