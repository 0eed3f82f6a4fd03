"""The min-energy bandwidth allocator: the split of the uplink band that minimises the
round's radiated energy with every upload within its deadline (a convex problem, scipy)."""

import math

import numpy as np
from scipy.optimize import brentq, minimize, minimize_scalar

from fedjoule.channel.link import snr_linear
from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import (
    BISECTION_STEPS,
    ESTIMATE_BRACKET,
    NEWTON_STEPS,
    Uplink,
    equal_shares,
    newton_in,
    share_for_time,
    shared_upload_time_s,
)

# A missed deadline costs the search this many times the energy per unit of relative lateness
# (a penalty, so Nelder-Mead can walk back; only a vector meeting every deadline is returned).
LATENESS_PENALTY = 1e3
# Nelder-Mead's evaluations of the predicted energy (each O(m^2)); past the two families'
# best they gain a few % at m = 10, about 0.1 % at m = 100 (300 there: 0.6 s a cell).
MAX_EVALUATIONS = 300
# Above this many clients the evaluations fall as (10 / m)^2, so the search's cost stays
# about that of 10 clients (the families keep their grids, which find the most past that).
NELDER_MEAD_CLIENTS = 10
# The least weight against the largest (the predictor's shares stay well above underflow).
LEAST_WEIGHT = 1e-30


class InfeasibleAllocation(FedjouleError):
    """No split of the band lets every selected client upload within its deadline."""


def min_energy_weights(uplink: Uplink, deadline_s) -> np.ndarray:
    """Weights for the weighted sharing the engines play (bandwidth.shared_upload_time_s,
    generalised processor sharing) that minimise the round's radiated energy
    sum_k p_k t_k(w) (Yang et al., IEEE TWC 2021) with every upload within its deadline
    (deadline_s: a number or one per client, all starting together), summing to 1.

    t_k(w) is piecewise smooth (a kink wherever two finishes swap order), so the search is
    derivative-free: the best that meets the deadlines of equal weights, the fixed-band
    optimum (min_energy_shares, which refuses where no fixed split meets them), two
    one-parameter families (the geometric path from equal to that optimum, and weights
    theta^rank in Smith's order, from equal to nearly one at a time), each on a grid then
    refined by scipy.optimize.minimize_scalar (bounded), and last scipy's Nelder-Mead in
    log-weights (softmax onto the simplex, so no constraint; lateness a penalty), which
    needs no gradient, unlike SLSQP, whose gradients jump at the kinks. Ties keep the
    earlier candidate, so where nothing beats equal weights they are returned (then it
    plays exactly as equal) and, where those meet the deadlines, the result never spends
    more. InfeasibleAllocation where no candidate meets them (min_energy_shares' where it
    refuses)."""
    deadline_s = np.broadcast_to(np.asarray(deadline_s, dtype=float), (uplink.n,))
    equal = equal_shares(uplink)
    if uplink.n == 1:
        return equal
    # where no fixed split meets the deadlines, no weighting does either for a common
    # deadline (Jensen: the rate is concave in the share, so each client's mean share over
    # the round on a fixed band sends at least as much): min_energy_shares refuses
    fixed = min_energy_shares(uplink, deadline_s)

    def cost(weights: np.ndarray) -> float:
        time_s = shared_upload_time_s(uplink, weights)
        late = np.sum(np.maximum(time_s / deadline_s - 1.0, 0.0))
        return float(np.sum(uplink.tx_power_w * time_s)) * (1.0 + LATENESS_PENALTY * late)

    def rank(weights: np.ndarray) -> tuple[bool, float]:  # on time first, then the least
        late = np.any(shared_upload_time_s(uplink, weights) > deadline_s)
        return bool(late), cost(weights)

    def path(a: float) -> np.ndarray:  # equal^(1-a) fixed^a, normalised
        log_w = a * np.log(fixed / equal)
        return softmax(log_w)

    # Smith's rule (1956) for the weighted sum of finishes sum_k p_k t_k: shortest alone
    # time per watt first; the weights theta^rank run from equal (a = 0) to nearly in turn
    alone_s = uplink.upload_time_s(np.ones(uplink.n)) / uplink.tx_power_w
    order = np.argsort(np.argsort(alone_s, kind="stable"), kind="stable")

    def turns(a: float) -> np.ndarray:
        return softmax(-a * order)

    best = min((equal, softmax(np.log(fixed))), key=rank)
    # each family on a grid of 17 (turns: theta = e^-a, a from 1e-3 to 10 geometrically),
    # then refined around the grid's best
    for family, grid in ((path, np.linspace(0.0, 1.0, 17)), (turns, np.geomspace(1e-3, 10, 17))):
        at = int(np.argmin([cost(family(a)) for a in grid]))
        bounds = (grid[max(at - 1, 0)], grid[min(at + 1, 16)])
        along = minimize_scalar(
            lambda a, family=family: cost(family(a)),
            bounds=bounds,
            method="bounded",
            options={"xatol": 1e-3},
        )
        best = min((best, family(grid[at]), family(along.x)), key=rank)
    evaluations = int(MAX_EVALUATIONS * min(1.0, (NELDER_MEAD_CLIENTS / uplink.n) ** 2))
    searched = minimize(
        lambda z: cost(softmax(z)),
        np.log(best),
        method="Nelder-Mead",
        options={"maxfev": evaluations, "xatol": 1e-6, "fatol": 0.0},
    )
    best = min((best, softmax(searched.x)), key=rank)
    if rank(best)[0]:
        raise InfeasibleAllocation(
            "min-energy: no split of the band found lets every selected client upload within "
            "its deadline; select fewer clients or allow more time"
        )
    return best


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
