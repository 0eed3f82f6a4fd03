"""Per-client online/offline models, deterministic given the seed and queryable in any order."""

import math

import numpy as np

from fedjoule.errors import FedjouleError
from fedjoule.rng import stream


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
    """

    _CHUNK = 64  # state changes generated per extension (fixed: it shapes the draws)

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
        self._timelines: dict[int, _Timeline] = {}

    @property
    def stationary_online_probability(self) -> float:
        return self.mean_on_s / (self.mean_on_s + self.mean_off_s)

    def _timeline(self, client: int) -> "_Timeline":
        client = int(client)
        timeline = self._timelines.get(client)
        if timeline is None:
            rng = stream(self.seed, "availability", 1, client)
            starts_online = bool(rng.random() < self.stationary_online_probability)
            timeline = _Timeline(rng, starts_online, self.mean_on_s, self.mean_off_s)
            self._timelines[client] = timeline
        return timeline

    def online(self, client: int, time_s: float, round_index: int) -> bool:
        return self._timeline(client).state_at(time_s)

    def next_offline_s(self, client: int, time_s: float, round_index: int) -> float:
        """The next time > time_s at which an online client goes offline; time_s if offline."""
        timeline = self._timeline(client)
        if not timeline.state_at(time_s):
            return float(time_s)
        return timeline.next_change_after(time_s)

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        return np.array(
            [self.online(k, time_s, round_index) for k in range(self.n_clients)], dtype=bool
        )


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
        while self.change_times_s.size == 0 or self.change_times_s[-1] <= time_s:
            last_s = self.change_times_s[-1] if self.change_times_s.size else 0.0
            durations_s = self._rng.standard_exponential(MarkovOnOff._CHUNK) * self._means
            self.change_times_s = np.concatenate(
                [self.change_times_s, last_s + np.cumsum(durations_s)]
            )

    def state_at(self, time_s: float) -> bool:
        self._extend_past(time_s)
        flips = int(np.searchsorted(self.change_times_s, time_s, side="right"))
        return self.starts_online ^ bool(flips % 2)

    def next_change_after(self, time_s: float) -> float:
        self._extend_past(time_s)
        return float(self.change_times_s[np.searchsorted(self.change_times_s, time_s, "right")])
