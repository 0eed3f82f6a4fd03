"""The min-energy bandwidth allocator: the weights of the uplink band's sharing that
minimise the round's radiated energy with every upload within its deadline (a search over
a few candidates, scipy), and the fixed-band optimum (a convex problem, scipy's roots)."""

import math

import numpy as np
from scipy.optimize import brentq, minimize, minimize_scalar

from fedjoule.channel.link import snr_linear
from fedjoule.errors import FedjouleError
from fedjoule.policies.at_deadline import at_deadline_weights
from fedjoule.policies.bandwidth import (
    BISECTION_STEPS,
    ESTIMATE_BRACKET,
    NEWTON_STEPS,
    Uplink,
    equal_shares,
    newton_in,
    share_estimate,
    share_for_time,
)
from fedjoule.policies.shared_upload import shared_upload

# A missed deadline costs the search this many times the energy per unit of relative lateness
# (a penalty, so Nelder-Mead can walk back; only a vector meeting every deadline is returned).
LATENESS_PENALTY = 1e3
# Nelder-Mead's evaluations of the predicted energy; past the families' best they gain a
# few % at m = 10, about 0.1 % at m = 100.
MAX_EVALUATIONS = 300
# Up to this many clients in a cell the search goes on past heSRPT's weights (polished):
# the fixed-band optimum, the path to it and Nelder-Mead (the optimality test's small case).
NELDER_MEAD_CLIENTS = 4
# heSRPT's exponent c = 1 / (1 - e) at most (e = 1: a rate linear in the share); at this
# the weights are one at a time to LEAST_WEIGHT.
MOST_EXPONENT = 1e6
# min-energy's weights must end each upload this much (relative) before its deadline: the
# engines' own arithmetic differs in the last bits (a client on time by 1e-18 s here was
# dropped by the engine).
ON_TIME_MARGIN = 1e-9
# Per-client deadlines: a candidate serving the earliest deadline first, weights e^-30
# apart (nearly one at a time).
EARLIEST_FIRST = 30.0
# turns_candidates' search stops within this in ln a (15 %: its energy is flat there,
# within 0.3 % on default's and default-theory's rounds).
TURNS_STEP = 0.15
# Where that search ends late, it looks down to a_h / 2 e^-NEAR_EQUAL (about equal weights).
NEAR_EQUAL = 12.0

# deadline_led's bisection along its path stops within this (of the path's length 1).
PATH_STEP = 1.0 / 64

# The least weight against the largest (the predictor's shares stay well above underflow).
LEAST_WEIGHT = 1e-30


class InfeasibleAllocation(FedjouleError):
    """No split of the band lets every selected client upload within its deadline."""


def min_energy_weights(uplink: Uplink, deadline_s) -> np.ndarray:
    """Weights for the weighted sharing the engines play (shared_upload.py,
    generalised processor sharing) that minimise the round's radiated energy
    sum_k p_k t_k(w) (Yang et al., IEEE TWC 2021) with every upload within its deadline
    (deadline_s: a number or one per client, all starting together), summing to 1.

    The uploads are jobs sharing the band as parallel jobs share servers, each with a
    concave speed-up (its rate on a share s: s log(1 + a/s)), the energy their weighted sum
    of finishes. For equal weights and a speed-up s^e the optimum is in closed form
    (heSRPT: Berg, Vesilo & Harchol-Balter, Perf. Eval. 144, 2020, 102147; arXiv
    1903.09346): finish in size order, the i-th from last always holding a share in
    proportion to i^c - (i-1)^c, c = 1 / (1 - e), a weighted sharing. Here the order is
    Smith's (1956: shortest alone time per watt first, the order for the weighted sum) and
    e the rate's elasticity d ln r / d ln s at the equal share, averaged over the clients
    by their power (1 where the rate is linear in the share: then nearly one at a time,
    Smith's rule itself). Weights theta^rank in Smith's order, whose tail is longer (so
    the last uploads keep more of the band where a deadline binds, and heSRPT's are then
    late), are searched too (turns_candidates; heSRPT's alone spend 7 % more than that
    family's best on one of the tests' 30-client cases). The candidates meeting every
    deadline compete with equal weights on energy (ties: equal, which then plays exactly
    as equal), so where equal weights meet the deadlines the result never spends more. On
    default's rounds this spends within 0.45 % of the Nelder-Mead search it replaced, on
    default-theory's (100 clients) within 0.03 % or up to 0.9 % less, in 7 to 9
    evaluations (docs/policies.md). Where no candidate meets the deadlines, and in the
    small case (up to NELDER_MEAD_CLIENTS clients, as the optimality test's brute force),
    `polished` searches on. Candidates are on time with ON_TIME_MARGIN to spare. With
    deadlines of their own, where all are late, earliest-deadline-first weights are tried,
    then those ending each client at its own deadline (deadline_led).
    InfeasibleAllocation where nothing found meets the deadlines, and at once where a
    client is too slow for its own deadline even on the whole band, or where the
    least shares sending every upload by the last deadline on fixed bands sum over the band
    (then no weighting does either, by Jensen: the rate is concave in the share, so a
    client's mean share over its upload, held, sends at least as much)."""
    deadline_s = np.broadcast_to(np.asarray(deadline_s, dtype=float), (uplink.n,))
    equal = equal_shares(uplink)
    if uplink.n == 1:
        return equal
    alone_s = uplink.upload_time_s(np.ones(uplink.n))
    refused_early(uplink, deadline_s, alone_s)
    smith = np.argsort(alone_s / uplink.tx_power_w, kind="stable")  # Smith's order
    rank = np.argsort(smith, kind="stable")
    guess = [None]  # the last evaluation's finishing order, the next one's guess
    within_s = deadline_s * (1.0 - ON_TIME_MARGIN)  # on time, with room for round-off

    def judged(weights: np.ndarray, fresh: bool = False) -> tuple[bool, float]:
        """(late, energy with lateness penalised): on time first, then the least."""
        time_s, guess[0] = shared_upload(uplink, weights, None if fresh else guess[0])
        late = np.sum(np.maximum(time_s / within_s - 1.0, 0.0))
        energy_j = float(np.sum(uplink.tx_power_w * time_s)) * (1.0 + LATENESS_PENALTY * late)
        return bool(late > 0), energy_j

    ranked = [(judged(equal), 0, equal)]
    exponent = elasticity_exponent(uplink)
    shaped = hesrpt_weights(smith, exponent)
    ranked.append((judged(shaped, fresh=True), 1, shaped))
    guess[0] = smith
    ranked += turns_candidates(lambda a: softmax(-a * rank), judged, exponent, uplink.n)
    best = min(ranked, key=lambda c: (c[0], c[1]))
    if best[0][0] and np.ptp(deadline_s) > 0:  # all late, deadlines of their own:
        order = np.argsort(np.argsort(deadline_s, kind="stable"), kind="stable")
        by_deadline = softmax(-EARLIEST_FIRST * order)  # earliest first, nearly in turn
        ranked.append((judged(by_deadline), 3, by_deadline))
        best = min(ranked, key=lambda c: (c[0], c[1]))
    if uplink.n <= NELDER_MEAD_CLIENTS or best[0][0]:
        best = polished(uplink, deadline_s, best, judged, uplink.n <= NELDER_MEAD_CLIENTS)
    if best[0][0] and np.ptp(deadline_s) > 0:
        best = deadline_led(uplink, deadline_s, best, judged)
    if best[0][0]:
        raise InfeasibleAllocation(
            "min-energy: no split of the band found lets every selected client upload within "
            "its deadline; select fewer clients or allow more time"
        )
    return best[2]


def refused_early(uplink: Uplink, deadline_s: np.ndarray, alone_s: np.ndarray) -> None:
    """InfeasibleAllocation before any O(m^2) evaluation of the sharing: where a client is
    too slow for its own deadline even on the whole band (alone_s, its upload time there),
    or where no fixed split sends every upload by the last deadline (the estimate's sum
    within ulps of share_for_time's, which decides where it is near 1); by Jensen no
    weighting does either (every client must be done by then)."""
    if np.any(alone_s > deadline_s):
        _refuse(uplink, np.where(alone_s > deadline_s, np.inf, 0.0), deadline_s)
    last_s = float(deadline_s.max())
    estimate = share_estimate(uplink, last_s)
    if np.all(np.isfinite(estimate)) and estimate.sum() > 1.0 + 1e-9:
        _refuse(uplink, estimate, last_s)  # (the bisection's sum would be the same to 1e-12)
    if not estimate.sum() < 1.0 - 1e-9:
        least = share_for_time(uplink, last_s)
        if not np.all(np.isfinite(least)) or least.sum() > 1.0:
            _refuse(uplink, least, last_s)


def turns_candidates(turns, judged, exponent: float, m: int) -> list[tuple]:
    """theta^rank in Smith's order (turns(a), theta = e^-a), whose tail is longer than
    heSRPT's power law (the least weight e^-(m-1)a, not about m^-(c-1)), so the last
    uploads keep more of the band: a searched in ln a on [a_h / 2, 8 a_h] by scipy's
    bounded Brent method (minimize_scalar) to within TURNS_STEP, lateness a penalty (so it
    ends at the deadline's edge where the best is beyond it), a_h = (c - 1) / m the ratio
    of heSRPT's first two weights (ln of (m^c - (m-1)^c) / ((m-1)^c - (m-2)^c), large m).
    Where its best is late but a near-equal a is not, the largest a in time below the
    interval, by bisection. (judged, tie order, weights) of each."""
    a_h = max(exponent - 1.0, 1e-3) / m
    seen = {}  # ln a: ((late, energy), weights), each evaluated once

    def energy_j(x: float) -> float:
        weights = turns(math.exp(x))
        seen[x] = (judged(weights), weights)
        return seen[x][0][1]

    def late(x: float) -> bool:
        if x not in seen:
            energy_j(x)
        return seen[x][0][0]

    along = minimize_scalar(
        energy_j,
        bounds=(math.log(a_h / 2.0), math.log(8.0 * a_h)),
        method="bounded",
        options={"xatol": TURNS_STEP},
    )
    found = [(seen[along.x][0], 2, seen[along.x][1])]
    low, high = math.log(a_h / 2.0) - NEAR_EQUAL, math.log(a_h / 2.0)
    if late(along.x) and not late(low):
        # all late: the deadline binds below a_h / 2, toward equal (a -> 0); the largest
        # a in time by bisection in ln a (the energy falls as a grows up to its best)
        while high - low > TURNS_STEP:
            middle = 0.5 * (low + high)
            low, high = (low, middle) if late(middle) else (middle, high)
        found.append((seen[low][0], 4, seen[low][1]))
    return found


def elasticity_exponent(uplink: Uplink) -> float:
    """heSRPT's c = 1 / (1 - e), e the rate's elasticity at the equal share 1/m averaged by
    power: s log(1 + a/s) has e = 1 - x / ((1 + x) ln(1 + x)), x = a m the SNR on that
    share; e = 1 at a rate linear in the share (c capped at MOST_EXPONENT)."""
    if uplink.linear:
        return MOST_EXPONENT
    x = snr_linear(uplink.rx_power_w, uplink.noise_psd_w_per_hz, uplink.bandwidth_hz) * uplink.n
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(x > 1e-8, 1.0 - x / ((1.0 + x) * np.log1p(x)), x / 2)  # (x -> 0: x/2)
    e = float(np.average(e, weights=uplink.tx_power_w))
    return min(1.0 / max(1.0 - e, 0.0), MOST_EXPONENT) if e < 1.0 else MOST_EXPONENT


def hesrpt_weights(order: np.ndarray, exponent: float) -> np.ndarray:
    """Weights i^c - (i-1)^c for the client order[m - i] (the last in `order` i = 1),
    computed in logs, c ln i + ln(1 - ((i-1)/i)^c), then onto the simplex (softmax)."""
    m = len(order)
    i = np.arange(m, 0, -1, dtype=float)  # order[0]: i = m
    with np.errstate(divide="ignore"):
        log_w = exponent * np.log(i) + np.log1p(-np.exp(exponent * np.log((i - 1.0) / i)))
    weights = np.empty(m)
    weights[order] = softmax(log_w)
    return weights


def polished(
    uplink: Uplink, deadline_s: np.ndarray, best: tuple, judged, nelder_mead: bool
) -> tuple:
    """The small case's search (and the late case's): the fixed-band optimum (which
    refuses where no fixed split meets the deadlines: then, for a common deadline, no
    weighting does either, by Jensen, the rate concave in the share), the geometric path
    from equal to it on a grid of 17 refined by minimize_scalar, then Nelder-Mead in
    log-weights from the best, of MAX_EVALUATIONS evaluations (`nelder_mead`). Where the
    fixed-band optimum refuses deadlines of their own, `best` as it is (a weighting may
    meet them where no fixed split does: deadline_led looks on)."""
    try:
        fixed = min_energy_shares(uplink, deadline_s)
    except InfeasibleAllocation:
        if best[0][0] and not np.ptp(deadline_s) > 0:
            raise  # a common deadline: no weighting meets it either
        return best  # deadlines of their own: a weighting may, where no fixed split does
    equal = equal_shares(uplink)
    ranked = [best, (judged(softmax(np.log(fixed))), 20, softmax(np.log(fixed)))]

    def path(a: float) -> np.ndarray:  # equal^(1-a) fixed^a, normalised
        return softmax(a * np.log(fixed / equal))

    grid = np.linspace(0.0, 1.0, 17)
    at = int(np.argmin([judged(path(a))[1] for a in grid]))
    along = minimize_scalar(
        lambda a: judged(path(a))[1],
        bounds=(grid[max(at - 1, 0)], grid[min(at + 1, 16)]),
        method="bounded",
        options={"xatol": 1e-3},
    )
    ranked += [(judged(path(x)), 21 + i, path(x)) for i, x in enumerate((grid[at], along.x))]
    best = min(ranked, key=lambda c: (c[0], c[1]))
    if not nelder_mead:
        return best
    searched = minimize(
        lambda z: judged(softmax(z))[1],
        np.log(best[2]),
        method="Nelder-Mead",
        options={"maxfev": MAX_EVALUATIONS, "xatol": 1e-6, "fatol": 0.0},
    )
    found = (judged(softmax(searched.x)), 23, softmax(searched.x))
    return min((best, found), key=lambda c: (c[0], c[1]))


def deadline_led(uplink: Uplink, deadline_s: np.ndarray, late: tuple, judged) -> tuple:
    """Where every candidate is late with deadlines of their own: the weights under which
    each client ends at its deadline in earliest-deadline order (at_deadline.py; room left
    for round-off), then along the geometric path from them to the late best candidate,
    the furthest point in time by bisection (to PATH_STEP; its energy falls along the
    path), the better of the two. `late` where no such weights exist."""
    weights = at_deadline_weights(uplink, deadline_s * (1.0 - 2.0 * ON_TIME_MARGIN))
    if weights is None:
        return late
    found = (judged(weights, fresh=True), 5, weights)
    if found[0][0]:
        return late
    start, end = np.log(weights), np.log(late[2])
    low, high = 0.0, 1.0  # the path's point low is on time, high late
    while high - low > PATH_STEP:
        middle = 0.5 * (low + high)
        point = softmax((1.0 - middle) * start + middle * end)
        judged_point = judged(point)
        if judged_point[0]:
            high = middle
        else:
            low, found = middle, min(found, (judged_point, 6, point), key=lambda c: c[0])
    return found


def softmax(log_weights: np.ndarray) -> np.ndarray:
    """exp(z_k) / sum_j exp(z_j): log-weights onto the simplex."""
    weights = np.maximum(np.exp(log_weights - np.max(log_weights)), LEAST_WEIGHT)
    return weights / weights.sum()


def min_energy_shares(uplink: Uplink, deadline_s) -> np.ndarray:
    """Shares minimising the radiated energy sum_k E_k(s_k), E_k = p_k bits_k / r_k(s_k),
    with every upload within its deadline (deadline_s: a number or one per client, from a
    common start) and sum_k s_k <= 1 (after Yang et al., IEEE TWC 2021, the bandwidth part
    of their problem).

    Convex: the rate r_k is positive and concave in s_k, so 1 / r_k is convex, and a
    deadline is the bound s_k >= share_for_time(deadline). Feasible iff those least shares
    sum to at most 1, else InfeasibleAllocation. Its KKT conditions are a water-filling:
    each client above its least share has the same marginal saving -E_k'(s_k) = lambda
    (the band's price), a client at its least saves less there, and the band is used up.
    The total share falls as lambda rises, so lambda is the one root of
    sum_k s_k(lambda) = 1, in log lambda over Newton estimates of each s_k(lambda)
    (share_estimate_at_price): scipy's Newton method (root_scalar, with the sum's
    derivative log_slope gives), else scipy.optimize.brentq between the cheapest and
    dearest prices (bracketed, so it always converges); then each s_k at that lambda is
    bisected from a bracket around its estimate (the saving falls with the share). Linear
    in m: SLSQP on the same problem took 10 s for 300 clients."""
    least = share_for_time(uplink, deadline_s)
    if not np.all(np.isfinite(least)) or least.sum() > 1.0:
        _refuse(uplink, least, deadline_s)
    if uplink.n == 1:
        return np.ones(1)
    if least.sum() == 1.0:
        return least

    start = [None]  # each estimate's Newton starts from the last one's shares

    def excess(log_price: float, estimate: bool = False) -> float:
        if not estimate:
            return float(shares_at_price(uplink, least, math.exp(log_price)).sum()) - 1.0
        start[0] = share_estimate_at_price(uplink, least, math.exp(log_price), start[0])
        return float(start[0].sum()) - 1.0

    cheapest = math.log(float(marginal_saving(uplink, np.ones(uplink.n)).min()))
    dearest = math.log(float(marginal_saving(uplink, least).max()))
    tolerance = {"xtol": 1e-14, "rtol": 4 * np.finfo(float).eps}

    def excess_and_slope(log_price: float) -> tuple[float, float]:
        excess(log_price, estimate=True)  # d s_k / d ln lambda = s_k / (d ln m_k / d ln s_k)
        shares = start[0]
        free = (shares > least) & (shares < 1.0)
        slope = np.sum(shares[free] / log_slope(uplink, shares[free], free))
        return float(shares.sum()) - 1.0, float(slope)

    # the shares fall about as lambda^(-1/2) (exactly at a fixed SNR): Newton starts there
    middle = 0.5 * (cheapest + dearest)
    total = excess(middle, True) + 1.0
    begin = middle + 2.0 * math.log(total) if total > 0 else middle
    log_price = newton_in(excess_and_slope, begin, cheapest, dearest, tolerance)
    if log_price is None:
        try:  # on the estimate (a few ulps from the bisection's shares, without it)
            log_price = brentq(excess, cheapest, dearest, args=(True,), **tolerance)
        except ValueError:  # the estimate did not change sign: the bisection's shares
            log_price = brentq(excess, cheapest, dearest, **tolerance)
    return within_band(shares_at_price(uplink, least, math.exp(log_price)), least)


def marginal_saving(uplink: Uplink, share: np.ndarray) -> np.ndarray:
    """-dE_k/ds_k = p_k bits_k r_k'(s) / r_k(s)^2 (J per unit of share), which falls as the
    share grows (E_k convex)."""
    rate_bps = uplink.rate_bps(share)
    return uplink.tx_power_w * uplink.bits * uplink.rate_slope_bps(share) / rate_bps**2


def shares_at_price(uplink: Uplink, least: np.ndarray, price: float) -> np.ndarray:
    """Per client the share in [least_k, 1] minimising E_k(s) + price s: where its marginal
    saving falls to the price (least_k where it is below it already), by bisection to
    adjacent floats, the lower end, from a bracket around share_estimate_at_price that the
    test confirms (a few halvings), else from [least_k, 1]."""
    guess = share_estimate_at_price(uplink, least, price)
    low = np.maximum(guess * (1.0 - ESTIMATE_BRACKET), least)
    high = np.minimum(guess * (1.0 + ESTIMATE_BRACKET), 1.0)
    with np.errstate(invalid="ignore"):
        confirmed = (low == least) | (marginal_saving(uplink, low) > price)
        confirmed &= (high == 1.0) | ~(marginal_saving(uplink, high) > price)
    low, high = np.where(confirmed, low, least), np.where(confirmed, high, 1.0)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        if np.all((mid == low) | (mid == high)):
            break
        worth = marginal_saving(uplink, mid) > price
        low, high = np.where(worth, mid, low), np.where(worth, high, mid)
    return low


def share_estimate_at_price(
    uplink: Uplink, least: np.ndarray, price: float, start: np.ndarray | None = None
) -> np.ndarray:
    """shares_at_price to a few ulps, without bisection: the share where the marginal
    saving m(s) = p bits r'(s) / r(s)^2 equals the price, within [least, 1]. Linear rate:
    m = p bits / (r(1) s^2), s = sqrt(p bits / (r(1) price)). SNR over the share (x = a/s,
    l = ln(1 + x), q = l - x / (1 + x)): m = p bits q ln 2 / (W s^2 l^2), by Newton's
    method on ln m against ln s from s = 1 (or the shares `start`), its slope
    -x^2 / ((1 + x)^2 q) - 2 + 2 x / ((1 + x) l), until its steps fall below 1e-14."""
    if uplink.linear:
        whole_bps = uplink.rate_bps(np.ones(uplink.n))
        return np.clip(np.sqrt(uplink.tx_power_w * uplink.bits / (whole_bps * price)), least, 1)
    a = snr_linear(uplink.rx_power_w, uplink.noise_psd_w_per_hz, uplink.bandwidth_hz)
    scale = uplink.tx_power_w * uplink.bits * math.log(2.0) / uplink.bandwidth_hz
    log_s = np.zeros(uplink.n) if start is None else np.log(start)
    with np.errstate(all="ignore"):
        for _ in range(2 * NEWTON_STEPS):
            s = np.exp(log_s)
            x = a / s
            ln1x = np.log1p(x)
            q = ln1x - x / (1.0 + x)
            slope = -(x**2) / ((1.0 + x) ** 2 * q) - 2.0 + 2.0 * x / ((1.0 + x) * ln1x)
            gap = np.log(scale * q / (s * s * ln1x**2)) - math.log(price)
            step = np.maximum(gap / slope, log_s)  # at most to s = 1
            log_s = log_s - step
            if not np.max(np.abs(step)) > 1e-14:
                break
    return np.clip(np.exp(log_s), least, 1.0)


def log_slope(uplink: Uplink, shares: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """d ln m / d ln s, the marginal saving's elasticity, at the shares of clients `rows`:
    -2 at a rate linear in the share, else share_estimate_at_price's slope."""
    if uplink.linear:
        return np.full(len(shares), -2.0)
    a = snr_linear(uplink.rx_power_w[rows], uplink.noise_psd_w_per_hz, uplink.bandwidth_hz)
    x = a / shares
    ln1x = np.log1p(x)
    q = ln1x - x / (1.0 + x)
    return -(x**2) / ((1.0 + x) ** 2 * q) - 2.0 + 2.0 * x / ((1.0 + x) * ln1x)


def within_band(shares: np.ndarray, least: np.ndarray) -> np.ndarray:
    """Shares the root finder left a few ulps over the band, brought within it: what is spare
    above the least shares shrunk in proportion, then the largest spare trimmed by the
    round-off left."""
    if shares.sum() > 1.0:
        spare = shares - least
        shares = least + spare * ((1.0 - least.sum()) / spare.sum())
    for _ in range(4):
        over = shares.sum() - 1.0
        if over <= 0:
            break
        k = int(np.argmax(shares - least))
        shares[k] = max(least[k], shares[k] - max(over, float(np.spacing(shares[k]))))
    return shares


def _refuse(uplink: Uplink, least: np.ndarray, deadline_s) -> None:
    deadline_s = np.broadcast_to(np.asarray(deadline_s, dtype=float), (uplink.n,))
    alone = np.flatnonzero(~np.isfinite(least))
    if alone.size:
        k = alone[0]
        raise InfeasibleAllocation(
            f"min-energy: selected client {k} cannot upload {uplink.bits[k]:g} bits within "
            f"{deadline_s[k]:g} s even on the whole band"
        )
    raise InfeasibleAllocation(
        f"min-energy: the least shares of the band that meet the deadlines sum to "
        f"{least.sum():.6g}, more than the whole band (1); select fewer clients or allow "
        "more time"
    )
