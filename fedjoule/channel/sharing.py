"""The shared uplink of one cell solved without SimPy: FDMA processor sharing (equal, or
weighted by a policy's shares) as a sweep over joins and finishes, TDMA/OFDMA as a FIFO
multi-server queue, each client on its own band (a policy's OFDMA blocks or TDMA turn); same
rules as medium.py.

Every client arrives at the medium at `join_s` with up to `n_attempts` uploads of `bits`
each (attempt j at its own rate); it transmits at `tx_power_w` while sending; it is
stopped at `kill_s` (cause `kill_cause`) or when its energy since joining reaches
`budget_j` (cause "battery"), whichever comes first.
"""

import heapq
import math
from dataclasses import dataclass

import numpy as np

# Transfers whose remaining time is below this are done together (medium.py, same value).
FINISH_TOLERANCE_S = 1e-9

UPLOADED = "uploaded"


@dataclass
class UplinkClients:
    """The clients of one cell that reach the uplink, arrays over them."""

    join_s: np.ndarray  # (n,) time the first upload is requested
    n_attempts: np.ndarray  # (n,) attempts made unless stopped (1 + retransmissions)
    succeeds: np.ndarray  # (n,) bool: the last of the n_attempts gets through
    tx_power_w: np.ndarray  # (n,)
    budget_j: np.ndarray  # (n,) energy left before the battery threshold (inf: none)
    kill_s: np.ndarray  # (n,) deadline / offline / over-commit stop (inf: none)
    kill_cause: np.ndarray  # (n,) object: cause of kill_s
    # per attempt (n, A): the fixed SNR (snr given) or p * gain (geometry)
    snr_fixed: np.ndarray | None
    power_gain_w: np.ndarray | None
    noise_psd_w_per_hz: float
    fixed_se_bps_per_hz: float | None = None  # channel.rate=fixed: every attempt at b r
    # (n,) the top of each client's radio's measured range (bit/s; inf: none): an attempt
    # faster on average is charged at this rate (devices/radio.charged_bits) and counted
    max_bps: np.ndarray | None = None

    def rate_bps(self, clients: np.ndarray, attempts: np.ndarray, share_hz) -> np.ndarray:
        """Shannon rate b log2(1 + SNR(b)) of each client's current attempt on `share_hz`
        (one band for all, or one per client; b r at a fixed spectral efficiency r, as
        link.Link.rate_bps)."""
        if self.fixed_se_bps_per_hz is not None:
            return np.full(len(clients), share_hz * self.fixed_se_bps_per_hz)
        if self.snr_fixed is not None:
            snr = self.snr_fixed[clients, attempts]
        else:  # SNR = p gain / (N0 b)
            snr = self.power_gain_w[clients, attempts] / (self.noise_psd_w_per_hz * share_hz)
        return share_hz * np.log2(1.0 + snr)


@dataclass
class UplinkResult:
    """What each client did on the uplink."""

    airtime_s: np.ndarray
    energy_tx_j: np.ndarray
    bits: np.ndarray
    attempts: np.ndarray
    end_s: np.ndarray
    outcome: np.ndarray  # object: "uploaded", "outage", or the cause that stopped it
    charged_bits: np.ndarray  # the bits a measured radio's slope charges (max_bps)
    over_range: np.ndarray  # attempts whose mean rate was above max_bps
    top_rate_bps: np.ndarray  # the highest mean rate of those attempts (0: none)


def _empty_result(n: int) -> UplinkResult:
    return UplinkResult(
        np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=int), np.full(n, np.inf),
        np.full(n, "running", dtype=object), np.zeros(n), np.zeros(n, dtype=int), np.zeros(n),
    )  # fmt: skip


def _attempt_ended(out: UplinkResult, c: UplinkClients, i: int, bits: float, airtime_s: float):
    """An attempt of client i sent `bits` in `airtime_s`: its airtime, its energy at p,
    its bits, and what the measured range makes of it (devices/radio.charged_bits)."""
    out.airtime_s[i] += airtime_s
    out.energy_tx_j[i] += c.tx_power_w[i] * airtime_s  # E_tx = p * airtime
    out.bits[i] += bits
    top_bps = math.inf if c.max_bps is None else float(c.max_bps[i])
    if math.isinf(top_bps) or bits <= top_bps * airtime_s:
        out.charged_bits[i] += bits
        return
    out.charged_bits[i] += top_bps * airtime_s
    out.over_range[i] += 1
    out.top_rate_bps[i] = max(out.top_rate_bps[i], bits / airtime_s)


def _battery_stops(c: UplinkClients, send_start_s: np.ndarray, spent_j: np.ndarray):
    """When constant-power sending from send_start_s exhausts the budget: t0 + left / p."""
    with np.errstate(divide="ignore", invalid="ignore"):
        left_s = np.maximum(0.0, c.budget_j - spent_j) / c.tx_power_w
    return np.where(np.isfinite(c.budget_j) & (c.tx_power_w > 0), send_start_s + left_s, np.inf)


def fdma_uplink(
    c: UplinkClients, bits: float, bandwidth_hz: float, weights: np.ndarray | None = None
) -> UplinkResult:
    """Processor sharing (docs/models.md#fdma): the n clients sending at a moment each get
    bandwidth_hz / n, or with a policy's `weights` w (n,) bandwidth_hz w_k / sum of the
    sending w_j (generalised processor sharing, Parekh & Gallager 1993; medium.FdmaMedium);
    a retransmission follows its failed attempt at once. Event by event: the next finish
    (min remaining/rate), join or stop; at each, bits sent are brought up to date and the
    rates recomputed."""
    n = len(c.join_s)
    out = _empty_result(n)
    if n == 0:
        return out
    order = np.argsort(c.join_s, kind="stable")
    stop_s = np.minimum(c.kill_s, _battery_stops(c, c.join_s, np.zeros(n)))  # sends throughout
    stop_cause = np.where(c.kill_s <= stop_s, c.kill_cause, "battery")
    active = np.zeros(n, dtype=bool)
    remaining = np.zeros(n)
    attempt = np.zeros(n, dtype=int)
    attempt_start = np.zeros(n)
    pointer, now = 0, float(c.join_s[order[0]])
    act = np.zeros(0, dtype=int)
    rates = np.zeros(0)
    sending_w = SendingWeight(weights)
    weight_hz = None if weights is None else bandwidth_hz * weights
    while True:
        if act.size:
            if weights is None:
                rates = c.rate_bps(act, attempt[act], bandwidth_hz / act.size)
            else:  # B w_k / sum_j w_j over the clients sending now
                rates = c.rate_bps(act, attempt[act], weight_hz[act] / sending_w.total(act))
            with np.errstate(divide="ignore"):
                left_s = np.where(rates > 0, np.maximum(remaining[act], 0.0) / rates, np.inf)
            finish_s = now + float(left_s.min())
            next_stop_s = float(stop_s[act].min())
        else:
            finish_s = next_stop_s = math.inf
        join_s = float(c.join_s[order[pointer]]) if pointer < n else math.inf
        t = min(finish_s, join_s, next_stop_s)
        if t == math.inf:
            break  # nothing left (or only zero-rate transfers with no stop: they never end)
        if act.size and t > now:
            remaining[act] -= rates * (t - now)
        now = t
        if act.size and t == finish_s:
            done = (rates > 0) & (remaining[act] <= rates * FINISH_TOLERANCE_S)
            if not done.any():  # round-off left the earliest finisher a few bits short
                done[np.argmin(left_s)] = True
            for i in act[done]:
                _attempt_ended(out, c, i, bits, t - attempt_start[i])
                if attempt[i] + 1 < c.n_attempts[i]:  # the retransmission starts at once
                    attempt[i] += 1
                    remaining[i] = bits
                    attempt_start[i] = t
                    out.attempts[i] += 1
                else:
                    active[i] = False
                    out.end_s[i] = t
                    out.outcome[i] = UPLOADED if c.succeeds[i] else "outage"
                    sending_w.leaves(i)
        for i in np.flatnonzero(active & (stop_s <= t)):
            _attempt_ended(out, c, i, bits - remaining[i], t - attempt_start[i])
            active[i] = False
            sending_w.leaves(i)
            out.end_s[i] = t
            out.outcome[i] = stop_cause[i]
        while pointer < n and c.join_s[order[pointer]] <= t:
            i = order[pointer]
            pointer += 1
            if stop_s[i] <= t:  # stopped on arrival (the stop comes first)
                out.end_s[i], out.outcome[i] = t, stop_cause[i]
                continue
            active[i] = True
            remaining[i] = bits
            attempt_start[i] = t
            out.attempts[i] = 1
            sending_w.joins(i)
        act = np.flatnonzero(active)
    return out


class SendingWeight:
    """The sum of the weights of the clients sending (fdma_uplink's generalised processor
    sharing), kept as they join and leave rather than summed at every event, and summed
    anew over them where it has fallen below half its largest since (a cancellation: a
    weight of 1e-30 left beside the round-off of a 1 that left), so its relative error
    stays within a few hundred ulps. Without weights (equal sharing) it keeps nothing."""

    def __init__(self, weights: np.ndarray | None):
        self.weights = weights
        self.sum = self.largest = 0.0

    def joins(self, i: int) -> None:
        if self.weights is not None:
            self.sum += float(self.weights[i])
            self.largest = max(self.largest, self.sum)

    def leaves(self, i: int) -> None:
        if self.weights is not None:
            self.sum -= float(self.weights[i])

    def total(self, sending: np.ndarray) -> float:
        """The sum over the clients `sending` (those joined and not left)."""
        if self.sum < 0.5 * self.largest:
            self.sum = self.largest = float(self.weights[sending].sum())
        return self.sum


def queued_uplink(c: UplinkClients, bits: float, bandwidth_hz: float, channels: int):
    """TDMA (channels=1) or OFDMA (channels=R): `channels` sub-bands of bandwidth_hz /
    channels, granted first come first served; a failed attempt queues again behind those
    waiting; a stopped client leaves the queue or frees its sub-band at once."""
    return _Queue(c, bits, bandwidth_hz / channels, channels).run()


def own_band_uplink(c: UplinkClients, bits: float, bandwidth_hz: np.ndarray) -> UplinkResult:
    """Each client on its own fixed band bandwidth_hz[i] (a policy's OFDMA blocks, a TDMA
    turn; medium.py's OwnBand): the queue's rules with a sub-band per client, so nobody
    waits and nobody's rate changes when others finish."""
    return _Queue(c, bits, np.asarray(bandwidth_hz, dtype=float), len(c.join_s)).run()


class _Queue:
    """The sub-bands of queued_uplink and the clients waiting for them, played event by
    event: (time, rank, sequence, kind, client, token), at one instant finishes before
    requests before stops; a token tells a client's current attempt from ended ones."""

    def __init__(self, c: UplinkClients, bits: float, share_hz, channels: int):
        n = len(c.join_s)
        self.c, self.bits, self.free = c, bits, channels
        self.share_hz = np.broadcast_to(np.asarray(share_hz, dtype=float), (n,))  # per client
        self.out = _empty_result(n)
        self.spent_j = np.zeros(n)  # energy since joining (radio only: waiting costs nothing)
        self.queue: list[int] = []  # FIFO of waiting clients
        self.sending: dict = {}  # client -> (start_s, rate_bps, token)
        self.token_of = np.zeros(n, dtype=int)
        self.running = np.ones(n, dtype=bool)
        self.events: list = []
        self.sequence = 0
        for i in np.argsort(c.join_s, kind="stable"):
            self.events.append((float(c.join_s[i]), 1, self.sequence, "request", int(i), 0))
            self.sequence += 1
            if c.kill_s[i] < math.inf:
                self.events.append((float(c.kill_s[i]), 2, self.sequence, "kill", int(i), 0))
                self.sequence += 1
        heapq.heapify(self.events)

    def run(self):
        while self.events:
            now, _, _, kind, i, token = heapq.heappop(self.events)
            if not self.running[i]:
                continue
            if kind == "request":
                self.out.attempts[i] += 1  # counted when asked for, as the SimPy client does
                self.request(i, now)
            elif kind == "kill":
                self.stop(i, now, self.c.kill_cause[i])
            elif token == self.token_of[i] and kind == "battery":
                self.stop(i, now, "battery")
            elif token == self.token_of[i]:  # finish of the current attempt
                self.finish(i, now)
        return self.out

    def push(self, time_s, kind, i, token=0):
        rank = 0 if kind == "finish" else 2
        heapq.heappush(self.events, (time_s, rank, self.sequence, kind, i, token))
        self.sequence += 1

    def request(self, i, now):
        if self.free and not self.queue:
            self.grant(i, now)
        else:
            self.queue.append(i)

    def grant(self, i, now):
        """Client i sends on a free sub-band from `now`: its finish, and the instant its
        battery budget would run out while sending if that comes first."""
        c = self.c
        self.free -= 1
        attempt = np.array([self.out.attempts[i] - 1])
        rate = float(c.rate_bps(np.array([i]), attempt, float(self.share_hz[i]))[0])
        self.token_of[i] += 1
        self.sending[i] = (now, rate, self.token_of[i])
        end_s = now + self.bits / rate if rate > 0 else math.inf
        self.push(end_s, "finish", i, self.token_of[i])
        hit_s = math.inf  # the budget runs out at now + left / p while sending
        if math.isfinite(c.budget_j[i]) and c.tx_power_w[i] > 0:
            hit_s = now + max(0.0, c.budget_j[i] - self.spent_j[i]) / c.tx_power_w[i]
        if hit_s < end_s:
            self.push(hit_s, "battery", i, self.token_of[i])

    def release(self, now):
        self.free += 1
        while self.free and self.queue:
            self.grant(self.queue.pop(0), now)

    def stop(self, i, now, cause):
        self.running[i] = False
        self.out.end_s[i], self.out.outcome[i] = now, cause
        if i in self.sending:
            start_s, rate, _ = self.sending.pop(i)
            airtime_s = now - start_s
            _attempt_ended(self.out, self.c, i, min(self.bits, rate * airtime_s), airtime_s)
            self.token_of[i] += 1
            self.release(now)
        elif i in self.queue:
            self.queue.remove(i)

    def finish(self, i, now):
        """Client i's attempt ends: the sub-band goes to the next waiting; i queues again
        for its next attempt, or is done."""
        c, out = self.c, self.out
        start_s, _, _ = self.sending.pop(i)
        airtime_s = now - start_s
        _attempt_ended(out, c, i, self.bits, airtime_s)
        self.spent_j[i] += c.tx_power_w[i] * airtime_s
        self.token_of[i] += 1
        self.release(now)
        if out.attempts[i] < c.n_attempts[i]:  # queue again, behind those waiting
            out.attempts[i] += 1
            self.request(i, now)
        else:
            self.running[i] = False
            out.end_s[i] = now
            out.outcome[i] = UPLOADED if c.succeeds[i] else "outage"
