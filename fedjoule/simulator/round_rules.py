"""The rules of a round that both engines share (docs/round.md): who is selected (uniform,
weighted or Bernoulli participation), how many arrivals the server waits for, the round's
learning rate, and a rounds.csv row's per-cell counts (its energy total: energy_kinds)."""

import math

import numpy as np

from fedjoule import energy_kinds, rng
from fedjoule.energy_kinds import DEVICE_FIELDS, ENERGY_FIELDS
from fedjoule.policies.select import uniform_draw
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.transfers import arrivals_kept, overcommit_count  # noqa: F401

PROBE_LOSS_BITS = 32  # the probe's uploaded loss, one float32
# Bernoulli participation redraws while nobody takes part (FedDyn/FedDC code), at most
# this many times and this many random numbers in all; past that it samples the same law
# (the draw conditioned on somebody taking part) directly: see bernoulli_participants.
BERNOULLI_REDRAWS = 10_000
BERNOULLI_DRAWS = 10_000_000
# (Derived: with the registered energy kinds too)
LEDGER_FIELDS = energy_kinds.Derived(lambda: ("selected", "arrived", *DEVICE_FIELDS))
SUMMED = energy_kinds.Derived(lambda: (*ENERGY_FIELDS, "uplink_bits", "uplink_airtime_s"))


def round_lr(training, r: int) -> float:
    """Round r's learning rate lr x lr_decay^r (inf past the float range, not an error:
    training with it diverges, which the round reports)."""
    try:
        return training.lr * training.lr_decay**r
    except OverflowError:
        return math.inf


def cell_columns(records: list[ClientRecord], n_cells: int) -> dict:
    """Per-cell selected and arrived counts, ';'-joined (one number per cell)."""
    selected, arrived = np.zeros(n_cells, dtype=int), np.zeros(n_cells, dtype=int)
    for rec in records:
        selected[rec.cell] += 1
        arrived[rec.cell] += rec.outcome == "arrived"
    return {
        "selected_per_cell": ";".join(map(str, selected)),
        "arrived_per_cell": ";".join(map(str, arrived)),
    }


def select_clients(
    candidates: np.ndarray, scenario, r: int, weights: np.ndarray | None = None, key=()
) -> np.ndarray:
    """Step 2 of a round (both engines): ceil(overcommit m) clients among the candidates,
    uniformly or in proportion to `weights` over all N clients (DRFA's lambda; 0 excludes,
    as TACO's expelled); or, with bernoulli participation, each with probability p.
    `key`: more stream keys (an edge server's cell)."""
    training = scenario.training
    gen = rng.stream(scenario.seed, "selection", r, *key)
    if weights is not None:
        weights = weights[candidates]
        candidates, weights = candidates[weights > 0], weights[weights > 0]
    if len(candidates) == 0:
        return candidates
    if training.participation == "bernoulli":
        return bernoulli_participants(candidates, training.participation_prob, gen)
    m = selection_size(training.clients_per_round, scenario.round.overcommit, len(candidates))
    return uniform_draw(candidates, m, gen, weights)


def selection_size(clients_per_round: int, overcommit: float, n_candidates: int) -> int:
    """min(ceil(f m), candidates), also for an infinite or huge over-commit factor f."""
    if not overcommit * clients_per_round < n_candidates:  # inf, nan or at least all
        return n_candidates
    return min(overcommit_count(clients_per_round, overcommit), n_candidates)


def bernoulli_participants(
    candidates: np.ndarray, p: float, gen: np.random.Generator
) -> np.ndarray:
    """Each candidate takes part with probability p, redrawn while nobody does (the
    FedDyn/FedDC code). The redraws are bounded: after BERNOULLI_REDRAWS draws (fewer for
    large candidate sets: BERNOULLI_DRAWS random numbers in all) the same law, the draw
    conditioned on somebody taking part, is sampled directly: the first participant from a
    geometric law truncated to the candidates, the ones after it independently with p.
    The bound is far beyond what usual settings reach (p = 0.01 over 10 candidates
    needs more than 10,000 redraws with probability e^-1000), so their draws are unchanged."""
    n = len(candidates)
    for _ in range(max(1, min(BERNOULLI_REDRAWS, BERNOULLI_DRAWS // n))):
        chosen = candidates[gen.random(n) < p]
        if len(chosen):
            return chosen
    # P(first = j | somebody) = (1-p)^j p / (1 - (1-p)^n): inverse CDF, in logs for tiny p
    log_q = math.log1p(-p) if p < 1 else -math.inf
    if log_q == -math.inf:
        first = 0
    elif log_q == 0:  # p below float resolution: the limit law, uniform
        first = int(gen.integers(n))
    else:
        u = gen.random()
        first = math.floor(math.log1p(u * math.expm1(n * log_q)) / log_q)
        first = min(max(first, 0), n - 1)
    rest = first + 1 + np.flatnonzero(gen.random(n - first - 1) < p)
    return candidates[np.concatenate([[first], rest]).astype(int)]
