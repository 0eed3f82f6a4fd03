"""Deadline allocators of the work: per client the lowest CPU frequency, or the most local
steps, that still let its update arrive by the round deadline."""

import numpy as np

from fedjoule.devices.compute import cpu_step_time_s


def compute_time_s(cycles_per_sample, batch_size, local_steps, freq_hz, cores=1) -> np.ndarray:
    """K local steps at f on n cores: K c B / (n f) (compute.cpu_step_time_s, and
    dvfs.cpu_step's n = cores_used)."""
    step_s = cpu_step_time_s(cycles_per_sample, batch_size, np.asarray(freq_hz) * cores)
    return np.asarray(local_steps, dtype=float) * step_s


def deadline_frequency_hz(
    cycles_per_sample,
    batch_size,
    local_steps,
    comm_time_s,
    deadline_s,
    freq_min_hz,
    freq_max_hz,
    cores=1,
) -> np.ndarray:
    """Per client the lowest CPU frequency of its DVFS range [f_min, f_max] at which
    comm_time_s + K c B / (n f) <= deadline_s (Tran et al., INFOCOM 2019: compute time
    c B K / f; the energy kappa c B K f^2 falls with f, so the lowest that fits is the
    cheapest): f = K c B / (n (deadline - comm)), raised to f_min, then moved by a float
    or two where round-off left it late or one float lower fits. f_max where even f_max
    misses the deadline (the client is as fast as it can be and the deadline drops it,
    as today)."""
    c, batch, steps, comm_s, deadline_s, low, high = (np.asarray(a, dtype=float) for a in (
        cycles_per_sample, batch_size, local_steps, comm_time_s, deadline_s,
        freq_min_hz, freq_max_hz))  # fmt: skip
    shape = np.broadcast(c, batch, steps, comm_s, deadline_s, low, high).shape
    low, high = (a if a.shape == shape else np.broadcast_to(a, shape) for a in (low, high))
    cycles = c * batch  # one step's, c B (compute_time_s: K (c B / (n f)); n f is f at n = 1)
    one_core = np.ndim(cores) == 0 and cores == 1
    slack_s = deadline_s - comm_s
    with np.errstate(divide="ignore", invalid="ignore"):
        work = steps * (cycles if one_core else cycles / (1.0 * np.asarray(cores)))
        freq = np.where(slack_s > 0, work / slack_s, np.inf)
    freq = np.minimum(np.maximum(freq, low), high)

    def late(f):
        spent_s = steps * (cycles / (f if one_core else f * cores))
        return (comm_s + spent_s > deadline_s) & (f < high)

    for _ in range(16):  # round-off: a few floats up while late, down while one lower fits
        lower = np.maximum(np.nextafter(freq, 0), low)
        up, down = late(freq), (lower < freq) & ~late(lower) & (freq < high)
        if not (up | down).any():
            break
        freq = np.where(up, np.minimum(np.nextafter(freq, np.inf), high), freq)
        freq = np.where(down & ~up, lower, freq)
    return freq[()]


def deadline_steps(step_time_s, comm_time_s, deadline_s, max_steps) -> np.ndarray:
    """Per client the most local steps K with comm_time_s + K step_time_s <= deadline_s,
    at least 1 (a client whose one step does not fit still runs it and the deadline drops
    it, as today) and at most max_steps: K = floor((deadline - comm) / step), corrected
    by one where round-off put the product on the wrong side."""
    step_s = np.asarray(step_time_s, dtype=float)
    slack_s = np.asarray(deadline_s, dtype=float) - np.asarray(comm_time_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.floor(slack_s / step_s)
    k = np.where((k == k) & (k > -np.inf), k, 1.0)  # nan and -inf: 1, +inf: max_steps
    k = np.minimum(np.maximum(k, 0), max_steps)
    k = k - (k * step_s > slack_s)  # one less where the product is late
    k = k + ((k + 1) * step_s <= slack_s)  # one more where it still fits
    return np.minimum(np.maximum(k, 1), max_steps).astype(int)[()]
