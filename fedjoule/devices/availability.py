"""Per-client online/offline models, deterministic given the seed and queryable in any order."""

import csv
import io
import math
from pathlib import Path

import numpy as np

from fedjoule.datafile import read_data_text
from fedjoule.errors import FedjouleError
from fedjoule.rng import stream

MAX_TIME_S = 1e9  # trace times (s): about 32 years, the scenarios' bound on times


def _check_n_clients(n_clients: int) -> int:
    if int(n_clients) != n_clients or n_clients < 0:
        raise FedjouleError(f"the number of clients must be a whole number >= 0, got {n_clients}")
    return int(n_clients)


class AlwaysOn:
    """Every client is online all the time."""

    def __init__(self, n_clients: int) -> None:
        self.n_clients = _check_n_clients(n_clients)

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        return True

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        return math.inf

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        return np.ones(self.n_clients, dtype=bool)


class BernoulliDropout:
    """Each client is offline for a whole round with probability `p_drop`, independently.

    The mask of round r is one draw of size n_clients from stream ("availability", r),
    so it does not depend on which clients are asked about or in which order.
    """

    def __init__(self, p_drop: float, seed: int, n_clients: int) -> None:
        if not 0.0 <= p_drop <= 1.0:
            raise FedjouleError(f"the dropout probability p_drop must be in [0, 1], got {p_drop}")
        self.p_drop = float(p_drop)
        self.seed = seed
        self.n_clients = _check_n_clients(n_clients)
        self._cached_round: int | None = None
        self._cached_mask = np.ones(0, dtype=bool)

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        if round_index != self._cached_round:
            draws = stream(self.seed, "availability", 0, round_index).random(self.n_clients)
            self._cached_mask = draws >= self.p_drop
            self._cached_round = round_index
        return self._cached_mask.copy()

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        self.online_mask(time_s, round_index)
        return bool(self._cached_mask[client])

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        """math.inf for an online client (its state is fixed for the round); else time_s."""
        return math.inf if self.online(client, time_s, round_index) else float(time_s)


class MarkovOnOff:
    """Two-state continuous-time Markov on/off process per client.

    On and off periods are exponential with means `mean_on_s` and `mean_off_s`; the
    state at time 0 is drawn from the stationary law P(on) = mean_on / (mean_on + mean_off).
    Each client's timeline comes from its own stream ("availability", client), generated
    lazily in fixed-size chunks and cached, so any query order gives the same answers.

    So that a query far ahead (a huge round.interval_s against short periods) costs a
    bounded time, the clock is cut into epochs of MARKOV_MAX_CYCLES mean on/off cycles:
    epoch 0 is the timeline above, epoch e > 0 starts afresh from the stationary law with
    its own stream ("availability", 1, client, e). After 65,536 cycles the state has long
    forgotten where it started, so the law is the same; only the draws past the first
    epoch differ from one unbroken timeline.
    """

    _CHUNK = 64  # state changes generated per extension (fixed: it shapes the draws)
    _KEPT_EPOCHS = 2  # timelines cached per client (the current epoch and its neighbour)

    def __init__(self, mean_on_s: float, mean_off_s: float, seed: int, n_clients: int) -> None:
        if not (mean_on_s > 0 and mean_off_s > 0):
            raise FedjouleError(
                f"Markov availability needs mean_on_s > 0 and mean_off_s > 0, got "
                f"{mean_on_s} and {mean_off_s}"
            )
        self.mean_on_s = float(mean_on_s)
        self.mean_off_s = float(mean_off_s)
        self.seed = seed
        self.n_clients = _check_n_clients(n_clients)
        self.epoch_s = MARKOV_MAX_CYCLES * (self.mean_on_s + self.mean_off_s)
        self._timelines: dict[int, dict[int, _Timeline]] = {}

    @property
    def stationary_online_probability(self) -> float:
        return self.mean_on_s / (self.mean_on_s + self.mean_off_s)

    def _timeline(self, client: int, epoch: int = 0) -> "_Timeline":
        client = int(client)
        kept = self._timelines.setdefault(client, {})
        timeline = kept.get(epoch)
        if timeline is None:
            keys = (1, client) if epoch == 0 else (1, client, epoch)
            rng = stream(self.seed, "availability", *keys)
            starts_online = bool(rng.random() < self.stationary_online_probability)
            timeline = _Timeline(rng, starts_online, self.mean_on_s, self.mean_off_s)
            kept[epoch] = timeline
            while len(kept) > self._KEPT_EPOCHS:
                del kept[next(iter(kept))]  # the one cached first
        return timeline

    def _locate(self, client: int, time_s: float) -> tuple["_Timeline", float, int]:
        """The timeline of the epoch holding time_s, time_s within that epoch, the epoch."""
        if not math.isfinite(time_s):
            raise ValueError(f"availability queried at a non-finite time {time_s}")
        epoch = max(0, math.floor(time_s / self.epoch_s))
        if epoch == 0:
            return self._timeline(client), float(time_s), 0
        local_s = min(max(time_s - epoch * self.epoch_s, 0.0), self.epoch_s)
        return self._timeline(client, epoch), local_s, epoch

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        timeline, local_s, _ = self._locate(client, time_s)
        return timeline.state_at(local_s)

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        """The next time > time_s at which an online client goes offline; time_s if offline."""
        timeline, local_s, epoch = self._locate(client, time_s)
        if not timeline.state_at(local_s):
            return float(time_s)
        change_s = timeline.next_change_after(local_s)
        if change_s < self.epoch_s:
            return self._absolute_s(epoch, change_s)
        # online up to the epoch's end: offline then if the next epoch starts offline
        following = self._timeline(client, epoch + 1)
        if not following.starts_online:
            return (epoch + 1) * self.epoch_s
        return self._absolute_s(epoch + 1, following.next_change_after(0.0))

    def _absolute_s(self, epoch: int, local_s: float) -> float:
        """The clock time of `local_s` in `epoch`: the first float that _locate maps at or
        past it (far from 0 the sum rounds, and the flip must be seen at the time given)."""
        if epoch == 0:
            return local_s
        start_s = epoch * self.epoch_s
        time_s = start_s + local_s
        while time_s - start_s < local_s:
            time_s = math.nextafter(time_s, math.inf)
        return time_s

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        return np.array(
            [self.online(k, time_s, round_index) for k in range(self.n_clients)], dtype=bool
        )


# Markov availability draws every state change up to the time asked; past this many mean
# on/off cycles at once it starts afresh from the stationary law (the same law: the state
# has forgotten its start), so a huge jump of the clock costs a bounded time.
MARKOV_MAX_CYCLES = 2**16


class _Timeline:
    """One client's on/off state changes at times t_1 < t_2 < ... (state flips at each)."""

    def __init__(
        self, rng: np.random.Generator, starts_online: bool, mean_on_s: float, mean_off_s: float
    ) -> None:
        self._rng = rng
        self.starts_online = starts_online
        # Memoryless: the period in progress at time 0 has the same exponential law.
        first, second = (mean_on_s, mean_off_s) if starts_online else (mean_off_s, mean_on_s)
        self._means = np.resize([first, second], MarkovOnOff._CHUNK)
        self.change_times_s = np.zeros(0)

    def _extend_past(self, time_s: float) -> None:
        if not math.isfinite(time_s):
            raise ValueError(f"availability queried at a non-finite time {time_s}")
        if self.change_times_s.size and self.change_times_s[-1] > time_s:
            return
        chunks = [self.change_times_s]
        last_s = self.change_times_s[-1] if self.change_times_s.size else 0.0
        while not chunks[-1].size or last_s <= time_s:  # one copy at the end, not per chunk
            durations_s = self._rng.standard_exponential(MarkovOnOff._CHUNK) * self._means
            chunks.append(last_s + np.cumsum(durations_s))
            last_s = chunks[-1][-1]
        self.change_times_s = np.concatenate(chunks)

    def state_at(self, time_s: float) -> bool:
        self._extend_past(time_s)
        flips = int(np.searchsorted(self.change_times_s, time_s, side="right"))
        return self.starts_online ^ bool(flips % 2)

    def next_change_after(self, time_s: float) -> float:
        self._extend_past(time_s)
        return float(self.change_times_s[np.searchsorted(self.change_times_s, time_s, "right")])


DAY_S = 24 * 3600.0


def accumulated_window_s(x_s, windows):
    """Time inside the daily windows from a fixed origin to local time x_s (a float or an
    array): whole days times the windows' length plus the part of today's windows past."""
    days, local = np.floor(x_s / DAY_S), np.mod(x_s, DAY_S)
    return sum(days * (hi - lo) + np.clip(local - lo, 0.0, hi - lo) for lo, hi in windows)


def window_time_s(t0_s: float, t1_s: float, shift_s, windows):
    """Length of [t0, t1] inside the daily windows [lo, hi) shifted by shift_s (a float or
    an array, one per client), in closed form: no loop over the days, whatever the span.
    An empty span gives 0, an endless one the windows' daily share of it; rounding at huge
    times is kept inside [0, t1 - t0]."""
    none = 0.0 * shift_s
    if not t1_s > t0_s:
        return none
    if not (math.isfinite(t0_s) and math.isfinite(t1_s)):
        daily_s = sum(hi - lo for lo, hi in windows)
        return none + ((t1_s - t0_s) * daily_s / DAY_S if daily_s > 0 else 0.0)
    gained = accumulated_window_s(t1_s - shift_s, windows) - accumulated_window_s(
        t0_s - shift_s, windows
    )
    return np.clip(gained, 0.0, t1_s - t0_s)


class Diurnal:
    """Each round, client k is online with probability clip(p + A sin(2 pi (t - phi_k)/24 h),
    0, 1), independently, at the round's start time t; it charges while (t - phi_k) mod 24 h
    lies in the daily window [charging_from_h, charging_to_h) (which may wrap midnight).

    Phases phi_k = phase_h + U(0, spread_h) come from stream ("diurnal", 0); the online draws
    of round r from stream ("diurnal", 1, r). The state is fixed for the round.
    """

    def __init__(
        self,
        mean: float,
        amplitude: float,
        phase_h: float,
        phase_spread_h: float,
        charging_from_h: float,
        charging_to_h: float,
        seed: int,
        n_clients: int,
    ) -> None:
        self.mean, self.amplitude = float(mean), float(amplitude)
        self.seed = seed
        self.n_clients = _check_n_clients(n_clients)
        spread = stream(seed, "diurnal", 0).uniform(0.0, phase_spread_h, self.n_clients)
        self.phase_s = (phase_h + spread) * 3600.0
        self.charging_from_s = charging_from_h * 3600.0
        self.charging_to_s = charging_to_h * 3600.0
        self._cached: tuple[int, float] | None = None
        self._mask = np.ones(0, dtype=bool)

    def probability(self, time_s: float) -> np.ndarray:
        """Every client's online probability at `time_s`."""
        # docs/models.md#diurnal: clip(p + A sin(2 pi (t - phi_k) / 24 h), 0, 1)
        angle = 2.0 * np.pi * (time_s - self.phase_s) / DAY_S
        return np.clip(self.mean + self.amplitude * np.sin(angle), 0.0, 1.0)

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        if self._cached != (round_index, time_s):
            draws = stream(self.seed, "diurnal", 1, round_index).random(self.n_clients)
            self._mask = draws < self.probability(time_s)
            self._cached = (round_index, time_s)
        return self._mask.copy()

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        return bool(self.online_mask(time_s, round_index)[client])

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        return math.inf if self.online(client, time_s, round_index) else float(time_s)

    def charging_windows_s(self) -> list[tuple[float, float]]:
        """The daily charging window as [lo, hi) spans of local time (two when it wraps
        midnight)."""
        a, b = self.charging_from_s, self.charging_to_s
        return [(a, b)] if a <= b else [(0.0, b), (a, DAY_S)]

    def charging(self, client: int, time_s: float) -> bool:
        local_s = (time_s - self.phase_s[client]) % DAY_S
        a, b = self.charging_from_s, self.charging_to_s
        return a <= local_s < b if a <= b else (local_s >= a or local_s < b)

    def charging_time_s(self, t0: float, t1: float) -> np.ndarray:
        """Per client, the time in [t0, t1] spent charging (s)."""
        return window_time_s(t0, t1, self.phase_s, self.charging_windows_s())


def _excerpt(value, limit: int = 60) -> str:
    """A short one-line excerpt of a value read from a file, for messages (a trace_file
    that is not a trace must not be echoed)."""
    if isinstance(value, list | tuple):
        items = [_excerpt(v, 20) for v in value[:3]]
        text = "[" + ", ".join(items) + (", ...]" if len(value) > 3 else "]")
    else:
        text = repr(value if not isinstance(value, str) else value[: limit + 1])
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class IntervalReplay:
    """Availability from online intervals: a subclass gives `_interval_end(client, t)`, the
    end of the interval holding t (None: offline), and `n_clients`."""

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        return self._interval_end(int(client), time_s) is not None

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        end = self._interval_end(int(client), time_s)
        return float(time_s) if end is None else end

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        return np.array([self.online(k, time_s, round_index) for k in range(self.n_clients)])


class TraceReplay(IntervalReplay):
    """Online intervals read from a CSV with columns client, start_s, end_s.

    With `period_s` the trace repeats every period_s seconds. Clients not in the file are
    never online.
    """

    def __init__(self, path, n_clients: int, period_s: float | None = None) -> None:
        self.n_clients = _check_n_clients(n_clients)
        self.period_s = period_s
        path = Path(path)
        shown = str(path) if len(str(path)) <= 200 else str(path)[:197] + "..."
        try:
            found = path.exists()
        except OSError as exc:  # a name too long, a path the system refuses
            raise FedjouleError(
                f"availability.trace_file: {shown}: {exc.strerror or exc}; give the path of a "
                "CSV with columns client, start_s, end_s"
            ) from None
        if not found:
            raise FedjouleError(
                f"availability.trace_file: {shown} not found; give a CSV with columns "
                "client, start_s, end_s"
            )
        where = f"availability.trace_file {shown}"
        intervals: dict[int, list[tuple[float, float]]] = {}
        reader = None
        text = read_data_text(path, "availability.trace_file", "trace")
        try:
            with io.StringIO(text, newline="") as f:
                reader = csv.DictReader(f)
                if reader.fieldnames is None or not {"client", "start_s", "end_s"} <= set(
                    reader.fieldnames
                ):
                    # quote at most a short excerpt: the file may not be a trace at all
                    raise FedjouleError(
                        f"{where}: the first line must name the columns client, start_s, "
                        f"end_s; it has {_excerpt(reader.fieldnames)}"
                    )
                for row in reader:
                    line = reader.line_num
                    values = [row.get("client"), row.get("start_s"), row.get("end_s")]
                    try:
                        k, t0, t1 = int(values[0]), float(values[1]), float(values[2])
                    except (TypeError, ValueError):
                        raise FedjouleError(
                            f"{where}, line {line}: expected an integer client and numbers "
                            f"start_s <= end_s, got {_excerpt(values)}"
                        ) from None
                    bounded = -MAX_TIME_S <= t0 <= t1 <= MAX_TIME_S  # False for NaN
                    if not (0 <= k < self.n_clients and bounded):
                        raise FedjouleError(
                            f"{where}, line {line}: client must be in [0, {self.n_clients}) "
                            f"and start_s <= end_s, both finite and within +-{MAX_TIME_S:g} s, got "
                            f"{_excerpt(values)}"
                        )
                    if period_s is not None and t1 > period_s:
                        raise FedjouleError(
                            f"{where}, line {line}: end_s {t1:g} is past trace_period_s "
                            f"{period_s:g}"
                        )
                    intervals.setdefault(k, []).append((t0, t1))
        except csv.Error as exc:
            line = reader.line_num if reader is not None else 1
            raise FedjouleError(
                f"{where}, line {line}: not a readable CSV ({_excerpt(str(exc), 60)})"
            ) from None
        self._starts, self._ends = {}, {}
        for k, spans in intervals.items():  # merge overlapping intervals
            merged: list[list[float]] = []
            for t0, t1 in sorted(spans):
                if merged and t0 <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], t1)
                else:
                    merged.append([t0, t1])
            self._starts[k] = np.array([m[0] for m in merged])
            self._ends[k] = np.array([m[1] for m in merged])

    def _local(self, time_s: float) -> tuple[float, float]:
        """Time within the period and the period's start (the time itself without a period)."""
        if self.period_s is None:
            return time_s, 0.0
        base = math.floor(time_s / self.period_s) * self.period_s
        return time_s - base, base

    def _interval_end(self, client: int, time_s: float) -> float | None:
        """End of the online interval holding time_s (None if offline then)."""
        if client not in self._starts:
            return None
        local, base = self._local(time_s)
        i = int(np.searchsorted(self._starts[client], local, side="right")) - 1
        if i >= 0 and local < self._ends[client][i]:
            end = base + float(self._ends[client][i])
            if self.period_s is not None and self._ends[client][i] >= self.period_s:
                if self._starts[client][0] <= 0 and len(self._starts[client]) == 1:
                    return math.inf  # online over the whole period, for ever
                nxt = self._interval_end(client, base + self.period_s)  # runs into next period
                return end if nxt is None else max(end, nxt)
            return end
        return None
