"""Availability of all N clients at once for the system engine: masks, stop times and
charging as numpy arrays (no per-client objects or streams at deployment scale)."""

import math

import numpy as np

from fedjoule import rng
from fedjoule.devices.availability import (
    DAY_S,
    MARKOV_MAX_CYCLES,
    AlwaysOn,
    BernoulliDropout,
    Diurnal,
)
from fedjoule.errors import FedjouleError

VECTOR_KINDS = ("always", "bernoulli", "diurnal", "markov")  # trace: per client, see PerClient


class RoundStates:
    """always / bernoulli: a client's state is fixed for a round (the SimPy models' masks)."""

    def __init__(self, model) -> None:
        self.model = model

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        return self.model.online_mask(time_s, round_index)

    def next_offline_s(self, clients: np.ndarray, time_s: float, round_index: int) -> np.ndarray:
        return np.full(len(clients), math.inf)  # online clients stay online for the round

    charging = None
    charging_time_s = None


class DiurnalVector(RoundStates):
    """Diurnal availability with the charging window evaluated for all clients at once."""

    def __init__(self, model: Diurnal) -> None:
        super().__init__(model)

    def charging(self, time_s: float) -> np.ndarray:
        """Plugged in now: (t - phi_k) mod 24 h in [from, to) (wrapping midnight)."""
        local_s = (time_s - self.model.phase_s) % DAY_S
        a, b = self.model.charging_from_s, self.model.charging_to_s
        return (a <= local_s) & (local_s < b) if a <= b else (local_s >= a) | (local_s < b)

    def charging_time_s(self, t0_s: float, t1_s: float) -> np.ndarray:
        """Per client, the time in [t0, t1] inside its daily windows (closed form, all
        clients at once: the SimPy model's own computation)."""
        return self.model.charging_time_s(t0_s, t1_s)


class MarkovVector:
    """Two-state continuous-time Markov on/off, all clients as arrays: the state and the
    time of its next change. Queries go forward in time; at each, the clients whose change
    is due flip and draw their next exponential period (mean on / mean off).

    The same process as the SimPy engine's MarkovOnOff (stationary start, exponential
    periods, so P(online) = on / (on + off) at every time), drawn from different streams:
    ("availability", 2) for the start, ("availability", 3, r) for the changes found at
    round r. Same law, other sample paths; the two engines' rounds differ for markov. A
    jump of more than MARKOV_MAX_CYCLES mean cycles starts afresh from the stationary law
    (stream ("availability", 4, r)), as the SimPy model's epochs do."""

    def __init__(self, mean_on_s: float, mean_off_s: float, seed: int, n_clients: int) -> None:
        if not (mean_on_s > 0 and mean_off_s > 0):
            raise FedjouleError(
                f"availability.mean_on_s and mean_off_s must be > 0, got {mean_on_s} and "
                f"{mean_off_s}"
            )
        self.mean_on_s, self.mean_off_s, self.seed = float(mean_on_s), float(mean_off_s), seed
        gen = rng.stream(seed, "availability", 2)
        p_on = mean_on_s / (mean_on_s + mean_off_s)
        self.state = gen.random(n_clients) < p_on
        # memoryless: the period in progress at time 0 has the full exponential law
        self.next_change_s = gen.exponential(np.where(self.state, mean_on_s, mean_off_s))
        self.time_s = 0.0

    def advance(self, time_s: float, round_index: int) -> None:
        if time_s < self.time_s:
            raise FedjouleError("markov availability is queried forward in time only")
        if time_s - self.time_s > MARKOV_MAX_CYCLES * (self.mean_on_s + self.mean_off_s):
            # a jump of more than 65,536 mean cycles: the state has forgotten where it was;
            # start afresh from the stationary law at time_s (memoryless periods), not
            # flip by flip (unbounded work, and lost in rounding at huge times)
            gen = rng.stream(self.seed, "availability", 4, round_index)
            p_on = self.mean_on_s / (self.mean_on_s + self.mean_off_s)
            self.state = gen.random(len(self.state)) < p_on
            means = np.where(self.state, self.mean_on_s, self.mean_off_s)
            self.next_change_s = time_s + gen.exponential(means)
            self.time_s = time_s
            return
        gen = rng.stream(self.seed, "availability", 3, round_index)
        due = np.flatnonzero(self.next_change_s <= time_s)
        while due.size:
            self.state[due] = ~self.state[due]
            means = np.where(self.state[due], self.mean_on_s, self.mean_off_s)
            self.next_change_s[due] += gen.exponential(means)
            due = due[self.next_change_s[due] <= time_s]
        self.time_s = time_s

    def online_mask(self, time_s: float, round_index: int) -> np.ndarray:
        self.advance(time_s, round_index)
        return self.state.copy()

    def next_offline_s(self, clients: np.ndarray, time_s: float, round_index: int) -> np.ndarray:
        """The end of the current on period of (online) `clients`."""
        return self.next_change_s[clients].copy()

    charging = None
    charging_time_s = None


class PerClient(RoundStates):
    """Any SimPy availability model asked client by client (O(N) Python per round): trace
    replay, or MarkovOnOff when the SimPy engine's exact sample paths are wanted."""

    def next_offline_s(self, clients: np.ndarray, time_s: float, round_index: int) -> np.ndarray:
        return np.array([self.model.next_offline_s(int(k), time_s, round_index) for k in clients])


def vector_availability(section, world):
    """The vectorised availability model of a scenario's `availability:` section."""
    n, seed = world.population.size, world.scenario.seed
    if section.kind == "always":
        return RoundStates(AlwaysOn(n))
    if section.kind == "bernoulli":
        return RoundStates(BernoulliDropout(section.p_drop, seed, n))
    if section.kind == "diurnal":
        return DiurnalVector(world.availability)
    if section.kind == "markov":
        return MarkovVector(section.mean_on_s, section.mean_off_s, seed, n)
    if section.kind == "trace":
        return PerClient(world.availability)
    raise FedjouleError(
        f"availability.kind={section.kind!r} is not vectorised; the numpy engine handles "
        f"{', '.join(VECTOR_KINDS)}"
    )
