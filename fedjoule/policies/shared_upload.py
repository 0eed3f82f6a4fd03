"""The upload times of clients sharing a cell's uplink band by weight (generalised processor
sharing, as the engines play a policy's shares: channel/sharing.fdma_uplink), all starting
together: the min-energy allocator's predictor of a split's energy."""

import math

import numpy as np
from scipy.linalg.lapack import dtrtrs

from fedjoule.channel.sharing import FINISH_TOLERANCE_S
from fedjoule.policies.bandwidth import Uplink

# A try solves the next phases in a block of at most this many rates (clients still
# sending x phases; 16 MB), so memory stays O(m) per phase: all of them at once up to
# 1,448 clients sending.
BLOCK_RATES = 2**21
# ... and at least this many (a smaller block costs about as much: numpy's overhead), so
# up to 128 clients sending every try takes all the phases left.
LEAST_BLOCK_RATES = 2**14


def shared_upload_time_s(uplink: Uplink, weights: np.ndarray, order=None) -> np.ndarray:
    """Each client's upload time under the weighted sharing (shared_upload's times)."""
    return shared_upload(uplink, weights, order)[0]


def shared_upload(uplink: Uplink, weights: np.ndarray, order=None) -> tuple[np.ndarray, np.ndarray]:
    """Each client's upload time under the weighted sharing the engines play (channel/
    sharing.fdma_uplink, generalised processor sharing, Parekh & Gallager 1993), all
    starting together: phase by phase the clients still sending share the band by weight,
    s_k = w_k / sum of their w_j, at the channel's rate on that share, until the first
    finishes; the band is then re-divided among the rest. inf for a weight of 0. Also the
    clients sending, in the order they finish.

    Given the order in which they finish, phase j (clients j, j+1, ... of that order still
    sending) lasts tau_j, and client k's bits are sum_{j <= k} tau_j r_k(w_k / W_j) with W_j
    the weight still sending: a lower-triangular linear system in tau, solved a block of
    phases at a time (LAPACK's dtrtrs through scipy). The order is guessed (`order`: the
    clients of positive weight, each once; else by each upload's time on its first
    phase's share). A block's phases are kept up to the first that is wrong: one of
    negative length (its client ended before the one before it), or one in which a client
    not due yet sends all its bits. The clients left are then re-sorted by the time each
    needs at the shares of that moment (the walk's choice, so the next block keeps its
    first phase at least), and the next block, twice as many phases as were kept, starts
    there. Each kept phase is exact, and a client within FINISH_TOLERANCE_S of its end
    when a phase ends ends with it, as in the engines (ended_together), so the result is
    the phase-by-phase walk's (phase_upload_time_s, the fallback where a rate is 0)."""
    weights = np.asarray(weights, dtype=float)
    bits = np.broadcast_to(np.asarray(uplink.bits, dtype=float), (uplink.n,))
    sending = np.flatnonzero(weights > 0)
    done_s = np.full(uplink.n, np.inf)
    if sending.size == 0:
        return done_s, sending
    if order is None:
        order = by_time_needed(uplink, weights, bits, sending)
    else:
        order = np.asarray(order)[weights[order] > 0]  # (a copy)
        if order.size != sending.size:
            raise ValueError("shared_upload: `order` must list every client of positive weight")
    w, left_bits = weights[order], bits[order] * rate_unit(uplink)  # (in rate_unit's unit)
    finished, now_s, block, resorted = [], 0.0, order.size, False
    with np.errstate(all="ignore"):
        while order.size:
            block = min(order.size, max(block, LEAST_BLOCK_RATES // order.size),
                        max(BLOCK_RATES // order.size, 1))  # fmt: skip
            still_w = w[::-1].cumsum()[::-1][:block]  # W_j: the weight still sending
            rate = rates_in_phases(uplink, order, w, still_w)  # (clients left, block)
            phase_s, singular = dtrtrs(rate[:block, :block].T, left_bits[:block], lower=0, trans=1)
            end_s = phase_s.cumsum()
            if singular or not np.isfinite(end_s[-1]):  # a rate of 0: the walk
                return walked(uplink, weights, sending)
            start_bits = left_bits
            kept, left_bits = phases_kept(rate, phase_s, now_s, start_bits)
            if kept == 0 and resorted:  # (the first phase is then the walk's: round-off)
                kept, left_bits = 1, start_bits[1:] - rate[1:, 0] * phase_s[0]
            together = np.empty(0, dtype=int)
            if kept:
                kept, together, left_bits = ended_together(
                    rate, phase_s, kept, start_bits, left_bits
                )
                end_s = np.maximum.accumulate(np.maximum(end_s[:kept], 0.0))  # (ties: 0, not -ulp)
                done_s[order[:kept]] = now_s + end_s
                now_s += float(end_s[-1])
                if together.size:
                    ended = np.concatenate([np.arange(kept), kept + together])
                    done_s[order[ended[kept:]]] = now_s
                    finished.append(order[ended])
                    order, w = np.delete(order, ended), np.delete(w, ended)
                else:
                    finished.append(order[:kept])
                    order, w = order[kept:], w[kept:]
            resorted = kept < block and order.size > 0 and together.size == 0
            if resorted:  # a wrong guess: the rest re-sorted at this moment
                by = np.argsort(left_bits / rate[kept:, kept], kind="stable")
                order, w, left_bits = order[by], w[by], left_bits[by]
            block = max(2 * kept, 1)
    return done_s, finished[0] if len(finished) == 1 else np.concatenate(finished)


def phases_kept(rate: np.ndarray, phase_s: np.ndarray, now_s: float, left_bits: np.ndarray):
    """How many of a block's first phases are right (shared_upload), and the bits the
    clients due after them have left then: the phases before the one ending the client
    that precedes the first phase of negative length, and before the first phase in which
    a client due later sends all its bits (beyond round-off; where the block holds every
    client left and no phase is negative, none does: each client still had bits to send
    when the phase before its own ended). Round-off is 1e-13 of the time up to each phase
    (now_s, the block's start, and the lengths of its phases so far: not the block's end,
    which a wrong guess can put anywhere; 1e-12 let a wrong order among clients ending
    1e-12 apart through, its times 1.2e-12 late)."""
    negative = phase_s.min() < 0.0
    if not negative and len(phase_s) == rate.shape[0]:  # the block holds all: all right
        return len(phase_s), left_bits[len(phase_s) :]
    tolerance_s = 1e-13 * (now_s + np.abs(phase_s).cumsum())
    early = (phase_s < -tolerance_s).nonzero()[0] if negative else ()
    kept = len(phase_s) if len(early) == 0 else max(int(early[0]) - 1, 0)
    if kept == rate.shape[0] or kept == 0:
        return kept, left_bits[kept:]
    left = left_bits[kept:] - rate[kept:, :kept] @ phase_s[:kept]
    ended = (left < -rate[kept:, kept - 1] * tolerance_s[kept - 1]).nonzero()[0]
    if ended.size:  # the first phase in which one of them sent its bits
        sent = np.cumsum(rate[kept + ended, :kept] * phase_s[:kept], axis=1)
        kept = int(np.argmax(sent >= left_bits[kept + ended, None], axis=1).min())
        left = left_bits[kept:] - rate[kept:, :kept] @ phase_s[:kept]
    return kept, left


def ended_together(rate, phase_s, kept: int, start_bits: np.ndarray, left_bits: np.ndarray):
    """The engine's rule at a phase's end (channel/sharing.fdma_uplink, as the walk): every
    client with at most FINISH_TOLERANCE_S of sending left at that phase's rate ends with
    the one whose phase it is (its last bits dropped). The phases kept up to the first of
    the `kept` at whose end another ends so, the clients due after them that do (indices
    among those), and the bits the rest have left; else (kept, none, left_bits). Only a
    phase whose next client ends within FINISH_TOLERANCE_S of it is looked at (a client
    ending so ends by then: its rate only grows), or the last where a client after the
    block needs that little."""
    near = (phase_s[1:kept] <= FINISH_TOLERANCE_S).nonzero()[0]  # the gaps between ends
    if kept < rate.shape[0] and (left_bits <= rate[kept:, kept - 1] * FINISH_TOLERANCE_S).any():
        near = np.append(near, kept - 1)
    for j in near:
        rest_bits = start_bits[j + 1 :] - rate[j + 1 :, : j + 1] @ phase_s[: j + 1]
        together = np.flatnonzero(rest_bits <= rate[j + 1 :, j] * FINISH_TOLERANCE_S)
        if together.size:
            return j + 1, together, np.delete(rest_bits, together)
    return kept, np.empty(0, dtype=int), left_bits


def by_time_needed(uplink: Uplink, weights: np.ndarray, bits: np.ndarray, sending: np.ndarray):
    """The clients sending sorted by the time each needs on its share of the first phase."""
    first = np.where(weights > 0, weights / weights[sending].sum(), 0.0)
    with np.errstate(divide="ignore"):
        return sending[np.argsort(bits[sending] / uplink.rate_bps(first)[sending], kind="stable")]


def walked(uplink: Uplink, weights: np.ndarray, sending: np.ndarray):
    """shared_upload by the walk: the times, and the clients sending in finishing order."""
    done_s = phase_upload_time_s(uplink, weights)
    return done_s, sending[np.argsort(done_s[sending], kind="stable")]


def rate_unit(uplink: Uplink) -> float:
    """rates_in_phases' unit per bit/s: ln 2 where it leaves out Shannon's 1 / ln 2."""
    return 1.0 if uplink.linear else math.log(2.0)


def rates_in_phases(uplink: Uplink, order: np.ndarray, w: np.ndarray, still_w: np.ndarray):
    """(clients, phases): client order[k]'s rate in phase j, on the share w_k / W_j (past
    its own phase, unused): b r at a fixed spectral efficiency or SNR, else
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
    within FINISH_TOLERANCE_S of it) ends each phase (a client of rate 0 never: inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _walk(uplink, np.asarray(weights, dtype=float))


def _walk(uplink: Uplink, weights: np.ndarray) -> np.ndarray:
    left_bits = np.array(uplink.bits, dtype=float) * np.ones(uplink.n)
    done_s = np.full(uplink.n, np.inf)
    sending = weights > 0
    now_s = 0.0
    while sending.any():
        share = np.where(sending, weights / weights[sending].sum(), 0.0)
        rate_bps = uplink.rate_bps(share)
        step_s = float(np.min(np.where(sending, left_bits / rate_bps, np.inf)))
        left_bits = np.where(sending, left_bits - rate_bps * step_s, left_bits)
        now_s += step_s
        ends = sending & (left_bits <= rate_bps * FINISH_TOLERANCE_S)
        if not ends.any():  # round-off left the earliest a few bits short (as the engine)
            ends[np.argmin(np.where(sending, left_bits / rate_bps, np.inf))] = True
        done_s[ends] = now_s
        sending &= ~ends
    return done_s
