"""Client selectors: who takes part in a round, from an Observation. Each is a pure function
(obs, m, gen, **params) -> the selected client ids, sorted, at most m of them; random
draws come from the numpy Generator passed in (a seeded stream, as round_rules; the policy
step passes None to a selector that draws nothing, one not in DRAWING)."""

import math

import numpy as np

from fedjoule.channel.units import db_to_linear
from fedjoule.policies.observation import Observation

# Oort's defaults (Lai et al., OSDI 2021), as its released selector sets them
# (SymbioticLab/Oort core/argParser.py; FedScale's Oort for the penalty): exploration factor
# 0.9 decaying by 0.98 a round down to 0.2, straggler penalty alpha (round_penalty) 2, and
# exploitation among clients within 90 % (cut_off_util) of the cut-off utility.
OORT_EXPLORATION = 0.9
OORT_EXPLORATION_DECAY = 0.98
OORT_EXPLORATION_MIN = 0.2
OORT_ALPHA = 2.0
OORT_CUT_OFF = 0.9


def top(obs: Observation, score: np.ndarray, m: int) -> np.ndarray:
    """The m candidates of highest score, ties to the lower client id, sorted by id."""
    ids, key = obs.client_id, -np.asarray(score, dtype=float)
    if 0 < m < len(key):  # the m-th best: all better, then the lowest ids tied with it
        kth = key.min()  # m or more tied at the best (all never selected, full): no
        if np.count_nonzero(key == kth) < m:  # partition, slow over many equal keys
            kth = np.partition(key, m - 1)[m - 1]
        if not np.isnan(kth):  # (nan: last)
            better, tied = ids[key < kth], ids[key == kth]
            tied = np.partition(tied, m - len(better) - 1)[: m - len(better)]
            return np.sort(np.concatenate([better, tied]))
    return np.sort(ids[np.lexsort((ids, key))[:m]])


def spectral_efficiency(sinr_db: np.ndarray) -> np.ndarray:
    """log2(1 + SINR) in bit/s/Hz: the channel's Shannon rate over 1 Hz (link.shannon_rate_bps
    at B = 1, without its product by 1)."""
    return np.log2(1.0 + db_to_linear(sinr_db))


def mean_spectral_efficiency(obs: Observation) -> np.ndarray:
    """spectral_efficiency(obs.mean_sinr_db): kept by the engine's observation (the mean
    changes only with the world, simulator/observe.py), else computed."""
    kept = getattr(obs, "mean_spectral_efficiency", None)
    return spectral_efficiency(obs.mean_sinr_db) if kept is None else kept


def uniform_draw(
    candidates: np.ndarray, m: int, gen: np.random.Generator, weights: np.ndarray | None = None
) -> np.ndarray:
    """m of the candidates without replacement, uniformly or in proportion to `weights`
    (one per candidate; 0 excludes), sorted: the draw of today's selection
    (round_rules.select_clients, both engines)."""
    p = None
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
        candidates, weights = candidates[weights > 0], weights[weights > 0]
        p = weights / weights.sum()
    if len(candidates) == 0:
        return candidates
    return np.sort(gen.choice(candidates, min(m, len(candidates)), replace=False, p=p))


def select_random(
    obs: Observation, m: int, gen: np.random.Generator, weights: np.ndarray | None = None
) -> np.ndarray:
    """Uniform sampling of m candidates without replacement (or in proportion to `weights`
    over the candidates, 0 excluding), today's draw of round_rules.select_clients bit for
    bit when `gen` is its stream rng.stream(seed, "selection", r, *key) and m its
    selection_size. Bernoulli participation stays in round_rules."""
    return uniform_draw(obs.client_id, m, gen, weights)


def select_round_robin(obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
    """Round robin (Yang, Liu, Quek, Poor, IEEE Trans. Commun. 2020, arXiv 1908.06287): the
    N clients in groups of m scheduled in turn. Round r walks the ring of ids 0 .. N-1 from
    (r m) mod N and takes the first m candidates it meets, so with every client online each
    client is selected exactly once in each N/m rounds (N a multiple of m)."""
    ids, n = obs.client_id, obs.n_clients
    start = (obs.round_index * m) % n
    if len(ids) and ids[0] >= 0 and ids[-1] < n and np.all(ids[1:] > ids[:-1]):
        split = int(np.searchsorted(ids, start))  # ids sorted: the walk is a rotation
        return np.sort(np.concatenate([ids[split:], ids[:split]])[:m])
    distance = (ids - start) % n
    return np.sort(ids[np.argsort(distance, kind="stable")[:m]])


def select_best_channel(obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
    """Best channel (max-SNR scheduling): the m candidates of highest SNR/SINR,
    argmax_k SINR_k (known_sinr_db). Needs policy.csi last or oracle."""
    obs.needs_csi("best-channel")
    return top(obs, known_sinr_db(obs), m)


def select_proportional_fair(obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
    """Proportional fair (Yang, Liu, Quek, Poor, IEEE Trans. Commun. 2020, arXiv
    1908.06287): the m candidates of highest instantaneous over average rate,
    log2(1 + SINR_k(t)) / log2(1 + mean SINR_k), the mean over fading. A client is
    chosen when its channel is good for it, not when it is good in absolute terms.
    Needs policy.csi last or oracle; a SINR not known yet counts at its mean
    (known_sinr_db: a ratio of 1)."""
    obs.needs_csi("proportional-fair")
    if obs.mean_sinr_db is None:
        raise ValueError("proportional-fair needs Observation.mean_sinr_db with the CSI")
    ratio = spectral_efficiency(known_sinr_db(obs)) / mean_spectral_efficiency(obs)
    return top(obs, ratio, m)


def select_age(obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
    """Age of update (Yang, Arafa, Quek, Poor, ICASSP 2020, arXiv 1910.14648): the server
    favours the clients whose last update is oldest, jointly with their channel. Priority
    age_k (rounds since selected), times log2(1 + SINR_k) when the CSI is observed: the
    product form of that joint rule, not the paper's derived index (known_sinr_db)."""
    priority = obs.age_rounds.astype(float)
    if obs.sinr_db is not None:
        priority = priority * spectral_efficiency(known_sinr_db(obs))
    return top(obs, priority, m)


def known_sinr_db(obs: Observation) -> np.ndarray:
    """The SINR the selectors rank by: the observed one, and where it is not known yet
    (csi last, a client never heard from: nan) its mean SINR, as the allocators take it
    (observe.Observer.known_snr_db), so a client not yet heard from is neither first nor
    never chosen."""
    sinr_db = obs.sinr_db
    if obs.mean_sinr_db is None or not np.isnan(sinr_db).any():
        return sinr_db
    return np.where(np.isnan(sinr_db), obs.mean_sinr_db, sinr_db)


def oort_exploration(round_index: int) -> float:
    """Oort's exploration factor at a round: max(0.2, 0.9 x 0.98^r)."""
    return max(OORT_EXPLORATION_MIN, OORT_EXPLORATION * OORT_EXPLORATION_DECAY**round_index)


def oort_utility(obs: Observation, preferred_round_time_s: float, alpha: float = OORT_ALPHA):
    """Oort's utility of each candidate (Lai et al., OSDI 2021, Algorithm 1): the
    statistical utility |B_k| sqrt(mean of its sample losses^2), n_samples x the root mean
    square of the per-sample losses it reported (obs.loss_rms; its mean loss where that is
    not known: an Observation without it, a checkpoint that predates it;
    docs/policies.md#the-training-loss), plus sqrt(0.1 ln R / L_k) for a client last
    selected in round L_k of R (1-based), times (T / t_k)^alpha when its last round time
    t_k exceeds the preferred round time T. nan for a client never explored (no loss
    reported)."""
    rounds = obs.round_index + 1
    last = np.maximum(rounds - obs.age_rounds, 1)
    rms = obs.loss if obs.loss_rms is None else obs.loss_rms
    rms = np.where(np.isnan(rms), obs.loss, rms)
    utility = obs.n_samples * rms + np.sqrt(0.1 * math.log(rounds) / last)
    t = obs.round_time_s
    slow = np.isfinite(t) & (t > preferred_round_time_s)
    with np.errstate(divide="ignore"):
        penalty = np.where(slow, (preferred_round_time_s / t) ** alpha, 1.0)
    explored = (obs.participations > 0) & np.isfinite(obs.loss)
    return np.where(explored, utility * penalty, np.nan)


def select_oort(
    obs: Observation,
    m: int,
    gen: np.random.Generator,
    preferred_round_time_s: float,
    alpha: float = OORT_ALPHA,
    cut_off: float = OORT_CUT_OFF,
) -> np.ndarray:
    """Oort (Lai, Zhu, Madhyastha, Chowdhury, OSDI 2021): exploitation of the explored
    clients by utility (oort_utility), exploration of the others, epsilon-greedy.
    (1 - eps) m clients (eps = oort_exploration) are exploited: those whose utility is at
    least `cut_off` x the ((1 - eps) m)-th highest, sampled in proportion to utility; the
    rest are explored, uniformly among clients never explored (Oort samples them by
    reported speed, unknown here), then topped up with the next highest utilities."""
    utility = oort_utility(obs, preferred_round_time_s, alpha)
    explored = np.flatnonzero(np.isfinite(utility))
    unexplored = np.flatnonzero(~np.isfinite(utility))
    n_exploit = min(int(m * (1.0 - oort_exploration(obs.round_index))), len(explored))
    chosen = np.zeros(0, dtype=int)
    if n_exploit > 0:
        kth = -np.partition(-utility[explored], n_exploit - 1)[n_exploit - 1]
        admitted = explored[utility[explored] >= cut_off * kth]  # ranked, below
        admitted = admitted[np.lexsort((obs.client_id[admitted], -utility[admitted]))]
        total = utility[admitted].sum()  # 0 only when every utility is 0: uniform
        weights = utility[admitted] / total if total > 0 else None
        chosen = gen.choice(admitted, n_exploit, replace=False, p=weights)
    n_explore = min(m - len(chosen), len(unexplored))
    if n_explore > 0:
        chosen = np.concatenate([chosen, gen.choice(unexplored, n_explore, replace=False)])
    if len(chosen) < m:  # too few unexplored: the highest utilities not chosen yet
        rest = explored[~np.isin(explored, chosen)]
        rest = rest[np.lexsort((obs.client_id[rest], -utility[rest]))]
        chosen = np.concatenate([chosen, rest[: m - len(chosen)]])
    return np.sort(obs.client_id[chosen.astype(int)])


def select_power_of_choice(
    obs: Observation, m: int, gen: np.random.Generator, d: int | None = None
) -> np.ndarray:
    """Power-of-choice (Cho, Wang, Joshi, AISTATS 2022): d candidates sampled without
    replacement in proportion to their data fraction p_k = n_k / sum n, then the m of them
    with the highest local loss win. The loss is the last reported one, the mean of the
    minibatch losses of the client's last local training (the paper's rpow-d; its pow-d
    asks the d candidates for their loss at the current model); never reported counts as
    highest, so unseen candidates go first. d defaults to 2m here (the paper sweeps
    m <= d <= K)."""
    n = len(obs.client_id)
    p = obs.n_samples / obs.n_samples.sum()
    d = min(2 * m if d is None else d, np.count_nonzero(p))
    sampled = gen.choice(n, d, replace=False, p=p)
    loss = np.where(np.isnan(obs.loss[sampled]), np.inf, obs.loss[sampled])
    order = np.lexsort((obs.client_id[sampled], -loss))
    return np.sort(obs.client_id[sampled[order[:m]]])


def select_battery(
    obs: Observation, m: int, gen: np.random.Generator, weighted: bool = False
) -> np.ndarray:
    """Battery-aware selection, after EAFL (Arouj and Abdelmoniem, "Towards Energy-Aware
    Federated Learning on Battery-Powered Clients", FedEdge 2022), which favours clients
    with more charge left: the m candidates of highest reported battery fraction, or with
    `weighted` m sampled without replacement in proportion to it (empty ones excluded)."""
    if not weighted:
        return top(obs, obs.battery_fraction, m)
    level = obs.battery_fraction
    keep = np.flatnonzero(level > 0)
    if len(keep) == 0:
        return keep
    picked = gen.choice(keep, min(m, len(keep)), replace=False, p=level[keep] / level[keep].sum())
    return np.sort(obs.client_id[picked])


# the selectors that draw from the round's stream (the others are given None for it)
DRAWING = ("random", "oort", "power-of-choice", "battery")
SELECTORS = {
    "random": select_random,
    "round-robin": select_round_robin,
    "best-channel": select_best_channel,
    "proportional-fair": select_proportional_fair,
    "age": select_age,
    "oort": select_oort,
    "power-of-choice": select_power_of_choice,
    "battery": select_battery,
}
