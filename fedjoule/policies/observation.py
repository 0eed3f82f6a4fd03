"""What a policy sees (Observation), what it decides (Decision), and the check that refuses
a decision breaking the round's limits (check_decision), naming the policy, client and value."""

from dataclasses import dataclass, fields

import numpy as np

from fedjoule.errors import FedjouleError

# Normalised shares s / sum(s) sum to 1 within a few ulps; this much more is round-off.
SHARE_SUM_SLACK = 1e-9


@dataclass(frozen=True)
class Observation:
    """What the server knows about the round's candidates (online and eligible now), one
    array entry per candidate, in the order of `client_id`. docs/policies.md says when
    each field is known. nan: not known yet (the client never reported it)."""

    round_index: int  # the round (sync), dispatch (async) or edge round, from 0
    n_clients: int  # the population N: client ids are 0 .. N-1
    client_id: np.ndarray  # (n,) int, the candidates
    n_samples: np.ndarray  # (n,) local training samples, known at enrolment
    battery_fraction: np.ndarray  # (n,) last reported state of charge 0..1 (1: mains)
    upload_rate_bps: np.ndarray  # (n,) mean rate of its last upload; nan before one
    round_time_s: np.ndarray  # (n,) dispatch to arrival of its last update; nan before
    loss: np.ndarray  # (n,) its last reported mean training loss over its steps; nan before
    participations: np.ndarray  # (n,) int, updates it delivered so far
    age_rounds: np.ndarray  # (n,) int, rounds since it was last selected (r + 1: never)
    staleness_rounds: np.ndarray  # (n,) int, model versions its last update lagged by
    # Channel state, only with policy.csi last (the previous round's) or oracle (this
    # round's): the SNR, or SINR under co-channel interference, over the whole band (dB),
    # and its mean over fading (path loss and shadowing only), the average PF compares with
    sinr_db: np.ndarray | None = None
    mean_sinr_db: np.ndarray | None = None
    # (n,) the root mean square of the per-sample training losses of its last reported
    # update, over the samples of its local steps, known as `loss` is; the engines always
    # give it (None: an Observation made without it, Oort's utility then takes `loss`)
    loss_rms: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(np.asarray(self.client_id))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("round_index", "n_clients") or value is None:
                continue
            value = np.asarray(value)
            object.__setattr__(self, f.name, value)
            if value.shape != (n,):
                raise ValueError(f"Observation.{f.name} has shape {value.shape}, not ({n},)")

    def needs_csi(self, policy: str) -> None:
        """Refuse a channel-driven policy when the observation carries no channel state."""
        if self.sinr_db is None:
            raise FedjouleError(
                f"policy {policy!r} needs the channel state (SNR/SINR): set policy.csi to "
                "last or oracle"
            )


@dataclass(frozen=True)
class Decision:
    """A policy's choice for one round: the selected clients, and per selected client (in
    the order of `client_id`) what it sets; None leaves the scenario's value."""

    client_id: np.ndarray  # (m,) int, the selected clients
    band_share: np.ndarray | None = None  # (m,) fraction of the cell's uplink band
    cpu_freq_hz: np.ndarray | None = None  # (m,) within each client's DVFS range
    local_steps: np.ndarray | None = None  # (m,) int, at least 1


def check_decision(
    decision: Decision,
    policy: str,
    candidates: np.ndarray,
    freq_range_hz: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Refuse a decision that selects an unknown client or one twice, gives a negative or
    not-a-number share or shares summing to more than the band, a CPU frequency outside the
    client's DVFS range (freq_range_hz: lowest and highest, arrays over `candidates`), or
    fewer than 1 local step: a FedjouleError naming the policy, the client and the value."""
    ids = np.asarray(decision.client_id)
    rows = _rows_among(policy, ids, np.asarray(candidates))
    for name in ("band_share", "cpu_freq_hz", "local_steps"):
        value = getattr(decision, name)
        if value is not None and np.shape(value) != ids.shape:
            raise FedjouleError(
                f"policy {policy!r} gave {np.size(value)} values of {name} for "
                f"{len(ids)} selected clients"
            )
    if decision.band_share is not None:
        _check_shares(policy, ids, np.asarray(decision.band_share, dtype=float))
    if decision.cpu_freq_hz is not None:
        if freq_range_hz is None:
            raise FedjouleError(f"policy {policy!r} set CPU frequencies, but no DVFS range")
        low, high = (np.asarray(r, dtype=float)[rows] for r in freq_range_hz)
        _check_frequencies(policy, ids, np.asarray(decision.cpu_freq_hz, dtype=float), low, high)
    if decision.local_steps is not None:
        _check_steps(policy, ids, np.asarray(decision.local_steps))


def _rows_among(policy: str, ids: np.ndarray, candidates: np.ndarray) -> np.ndarray | slice:
    """Each selected client's index among the candidates (a slice of all where they are
    the candidates, an allocation's check); refuses the first (in the decision's order)
    that is not among them or is selected again."""
    if ids is candidates and ids.dtype.kind in "iu" and (ids[1:] > ids[:-1]).all():
        return slice(None)  # the candidates themselves, increasing: each once, in order
    if ids.dtype.kind in "biuf":  # numbers: sorted look-ups, no loop over the candidates
        order = np.argsort(candidates, kind="stable")
        at = np.searchsorted(candidates[order], ids, side="right") - 1
        rows = order[np.maximum(at, 0)] if len(candidates) else np.zeros(len(ids), int)
        known = (at >= 0) & (candidates[rows] == ids)
        first = np.zeros(len(ids), dtype=bool)
        first[np.unique(ids, return_index=True)[1]] = True
    else:  # other objects: Python's equality, one by one
        position = {int(c): i for i, c in enumerate(candidates)}
        listed = ids.tolist()
        known = np.array([c in position for c in listed], dtype=bool)
        rows = np.array([position.get(c, 0) for c in listed], dtype=int)
        first = np.array([listed.index(c) == i for i, c in enumerate(listed)], dtype=bool)
    bad = np.flatnonzero(~known | ~first)
    if bad.size:
        i = int(bad[0])
        c = ids.tolist()[i]
        if not known[i]:
            raise FedjouleError(
                f"policy {policy!r} selected client {c}, which is not among the round's "
                f"{len(set(candidates.tolist()))} candidates (online and eligible)"
            )
        raise FedjouleError(f"policy {policy!r} selected client {c} more than once")
    return rows


def _check_shares(policy: str, ids: np.ndarray, shares: np.ndarray) -> None:
    bad = np.flatnonzero(~(shares >= 0))  # negative or nan
    if bad.size:
        i = bad[0]
        raise FedjouleError(
            f"policy {policy!r}: client {ids[i]}'s band share is {shares[i].item()!r}; a share is "
            "a fraction of the band, at least 0"
        )
    total = float(shares.sum())
    if total > 1 + SHARE_SUM_SLACK:
        i = int(np.argmax(shares))
        raise FedjouleError(
            f"policy {policy!r}: the band shares of the {len(ids)} selected clients sum to "
            f"{total!r}, more than the whole band (1); the largest is client {ids[i]}'s "
            f"{shares[i].item()!r}"
        )


def _check_frequencies(policy, ids, freq_hz, low_hz, high_hz) -> None:
    bad = np.flatnonzero(~((freq_hz >= low_hz) & (freq_hz <= high_hz)))
    if bad.size:
        i = bad[0]
        raise FedjouleError(
            f"policy {policy!r}: client {ids[i]}'s CPU frequency {freq_hz[i]:g} Hz is outside "
            f"its DVFS range, {low_hz[i]:g} to {high_hz[i]:g} Hz"
        )


def _check_steps(policy: str, ids: np.ndarray, steps: np.ndarray) -> None:
    if steps.dtype.kind in "iu":  # whole numbers
        bad = np.flatnonzero(~(steps >= 1))
    else:
        as_float = steps.astype(float)
        bad = np.flatnonzero(~((as_float >= 1) & (as_float == np.floor(as_float))))
    if bad.size:
        i = bad[0]
        raise FedjouleError(
            f"policy {policy!r}: client {ids[i]}'s local steps are {steps[i].item()!r}; "
            "allowed: a whole number, at least 1"
        )
