"""The upload times of clients sharing a cell's uplink band by weight (generalised processor
sharing, as the engines play a policy's shares: channel/sharing.fdma_uplink), all starting
together: the min-energy allocator's predictor of a split's energy."""

import math

import numpy as np
from scipy.linalg.lapack import dtrtrs

from fedjoule.channel.sharing import FINISH_TOLERANCE_S
from fedjoule.policies.bandwidth import Uplink

# shared_upload's guesses of the finishing order before it walks the phases.
ORDER_TRIES = 8
# Above this many clients sending, the (m, m) rate matrix (8 m^2 bytes, several alive at
# once: 32 MB at 2,048) gives way to the walk, O(m) in memory.
MOST_FOR_SOLVE = 2048


def shared_upload_time_s(uplink: Uplink, weights: np.ndarray, order=None) -> np.ndarray:
    """Each client's upload time under the weighted sharing (shared_upload's times)."""
    return shared_upload(uplink, weights, order)[0]


def shared_upload(uplink: Uplink, weights: np.ndarray, order=None) -> tuple[np.ndarray, np.ndarray]:
    """Each client's upload time under the weighted sharing the engines play (channel/
    sharing.fdma_uplink, generalised processor sharing, Parekh & Gallager 1993), all
    starting together: phase by phase the clients still sending share the band by weight,
    s_k = w_k / sum of their w_j, at the channel's rate on that share, until the first
    finishes; the band is then re-divided among the rest. inf for a weight of 0.

    Given the order in which they finish, phase j (clients j, j+1, ... of that order still
    sending) lasts tau_j, and client k's bits are sum_{j <= k} tau_j r_k(w_k / W_j) with W_j
    the weight still sending: a lower-triangular linear system in tau, solved at once
    (LAPACK's dtrtrs through scipy). The order is guessed (`order`: the clients of positive
    weight, each once; else by each upload's time on its first phase's share) and, while
    some tau_j comes out negative, the phases before the first in which a client ends early
    are kept, the clients from there on re-sorted by the time each needs to finish at its
    start (the walk's choice there), and only their phases solved again; each try is exact
    for its order, so the first with no negative phase is the sharing's timeline.
    phase_upload_time_s, the phase-by-phase walk, where a few
    tries do not settle the order and above MOST_FOR_SOLVE clients sending."""
    weights = np.asarray(weights, dtype=float)
    bits = np.broadcast_to(np.asarray(uplink.bits, dtype=float), (uplink.n,))
    sending = np.flatnonzero(weights > 0)
    done_s = np.full(uplink.n, np.inf)
    if sending.size == 0:
        return done_s, sending
    if sending.size > MOST_FOR_SOLVE:
        return walked(uplink, weights, sending)
    if order is None:
        first = np.where(weights > 0, weights / weights[sending].sum(), 0.0)
        with np.errstate(divide="ignore"):
            order = sending[np.argsort(bits[sending] / uplink.rate_bps(first)[sending],
                                       kind="stable")]  # fmt: skip
    else:
        order = np.asarray(order)[weights[order] > 0]  # (a copy)
        if order.size != sending.size:
            raise ValueError("shared_upload: `order` must list every client of positive weight")
    w = weights[order]
    still_w = np.cumsum(w[::-1])[::-1]  # W_j: the weight still sending in phase j
    left_bits = bits[order] * rate_unit(uplink)  # (in rate_unit's unit)
    phase_s = np.empty(len(order))
    keep = 0  # phases 0 .. keep - 1 are settled
    with np.errstate(all="ignore"):
        for _ in range(ORDER_TRIES):
            rate = rates_in_phases(uplink, order[keep:], w[keep:], still_w[keep:])
            # LAPACK's triangular solve, reading only the lower triangle (.T: Fortran order)
            phase_s[keep:] = dtrtrs(rate.T, left_bits, lower=0, trans=1)[0]
            end_s = np.cumsum(phase_s)
            if not np.all(np.isfinite(end_s)):  # a rate of 0 on its own last phase
                break
            early = np.flatnonzero(phase_s[keep:] < -1e-12 * end_s[-1])
            if early.size == 0:
                done_s[order] = np.maximum.accumulate(end_s)
                return done_s, order
            # order[j] ends before order[j - 1] (phase j < 0): settle the phases up to
            # d = j - 1, or, where a client's bits were all sent before d (its bits left
            # <= 0), up to the first phase in which one was (before it nobody ended early,
            # so those phases hold). Sort the rest by the time each needs at phase d's
            # rates, the walk's choice there (so each try settles one phase more at least)
            d = max(int(early[0]) - 1, 0)
            left = left_bits[d:] - rate[d:, :d] @ phase_s[keep : keep + d]
            ended = np.flatnonzero(left <= 0.0)
            if ended.size:
                sent = np.cumsum(rate[d + ended, :d] * phase_s[keep : keep + d], axis=1)
                d = int(np.argmax(sent >= left_bits[d + ended, None], axis=1).min())
                left = left_bits[d:] - rate[d:, :d] @ phase_s[keep : keep + d]
            by = np.argsort(left / rate[d:, d], kind="stable")
            left_bits = left
            keep += d
            order[keep:], w[keep:], left_bits = order[keep:][by], w[keep:][by], left_bits[by]
            still_w[keep:] = np.cumsum(w[keep:][::-1])[::-1]
    return walked(uplink, weights, sending)


def walked(uplink: Uplink, weights: np.ndarray, sending: np.ndarray):
    """shared_upload by the walk: the times, and the clients sending in finishing order."""
    done_s = phase_upload_time_s(uplink, weights)
    return done_s, sending[np.argsort(done_s[sending], kind="stable")]


def rate_unit(uplink: Uplink) -> float:
    """rates_in_phases' unit per bit/s: ln 2 where it leaves out Shannon's 1 / ln 2."""
    return 1.0 if uplink.linear else math.log(2.0)


def rates_in_phases(uplink: Uplink, order: np.ndarray, w: np.ndarray, still_w: np.ndarray):
    """(m, m): client order[k]'s rate in phase j, on the share w_k / W_j (the upper
    triangle, past its finish, unused): b r at a fixed spectral efficiency or SNR, else
    b ln(1 + P_rx / (N0 b)) on b = W w_k / W_j (Shannon's rate times ln 2, rate_unit)."""
    band_hz = np.multiply.outer(w * uplink.bandwidth_hz, 1.0 / still_w)
    if uplink.fixed_se_bps_per_hz is not None:
        return band_hz * uplink.fixed_se_bps_per_hz
    if uplink.rx_power_w is None:
        return band_hz * np.log2(1.0 + uplink.snr[order])[:, None]
    noise = np.asarray(uplink.noise_psd_w_per_hz, dtype=float)
    noise = noise[order] if noise.ndim else noise
    rate = (uplink.rx_power_w[order] / noise)[:, None] / band_hz
    np.log1p(rate, out=rate)
    rate *= band_hz
    return rate


def phase_upload_time_s(uplink: Uplink, weights: np.ndarray) -> np.ndarray:
    """shared_upload_time_s walked phase by phase, as the engine: the first to finish (all
    within FINISH_TOLERANCE_S of it) ends each phase."""
    weights = np.asarray(weights, dtype=float)
    left_bits = np.array(uplink.bits, dtype=float) * np.ones(uplink.n)
    done_s = np.full(uplink.n, np.inf)
    sending = weights > 0
    now_s = 0.0
    while sending.any():
        share = np.where(sending, weights / weights[sending].sum(), 0.0)
        rate_bps = uplink.rate_bps(share)
        with np.errstate(divide="ignore", invalid="ignore"):
            step_s = float(np.min(np.where(sending, left_bits / rate_bps, np.inf)))
        left_bits = np.where(sending, left_bits - rate_bps * step_s, left_bits)
        now_s += step_s
        ends = sending & (left_bits <= rate_bps * FINISH_TOLERANCE_S)
        if not ends.any():  # round-off left the earliest a few bits short (as the engine)
            ends[np.argmin(np.where(sending, left_bits / rate_bps, np.inf))] = True
        done_s[ends] = now_s
        sending &= ~ends
    return done_s
