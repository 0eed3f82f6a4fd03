"""The min-energy bandwidth allocator: the split of the uplink band that minimises the
round's radiated energy with every upload within its deadline (a convex problem, scipy)."""

import math

import numpy as np
from scipy.optimize import brentq

from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import BISECTION_STEPS, Uplink, share_for_time


class InfeasibleAllocation(FedjouleError):
    """No split of the band lets every selected client upload within its deadline."""


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
    sum_k s_k(lambda) = 1: scipy.optimize.brentq on log lambda (bracketed, so it always
    converges, superlinearly), each s_k(lambda) bisected (the saving falls with the
    share). Linear in m: SLSQP on the same problem took 10 s for 300 clients."""
    least = share_for_time(uplink, deadline_s)
    if not np.all(np.isfinite(least)) or least.sum() > 1.0:
        _refuse(uplink, least, deadline_s)
    if uplink.n == 1:
        return np.ones(1)
    if least.sum() == 1.0:
        return least

    def excess(log_price: float) -> float:
        return float(shares_at_price(uplink, least, math.exp(log_price)).sum()) - 1.0

    cheapest = math.log(float(marginal_saving(uplink, np.ones(uplink.n)).min()))
    dearest = math.log(float(marginal_saving(uplink, least).max()))
    log_price = brentq(excess, cheapest, dearest, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    return within_band(shares_at_price(uplink, least, math.exp(log_price)), least)


def marginal_saving(uplink: Uplink, share: np.ndarray) -> np.ndarray:
    """-dE_k/ds_k = p_k bits_k r_k'(s) / r_k(s)^2 (J per unit of share), which falls as the
    share grows (E_k convex)."""
    rate_bps = uplink.rate_bps(share)
    return uplink.tx_power_w * uplink.bits * uplink.rate_slope_bps(share) / rate_bps**2


def shares_at_price(uplink: Uplink, least: np.ndarray, price: float) -> np.ndarray:
    """Per client the share in [least_k, 1] minimising E_k(s) + price s: where its marginal
    saving falls to the price (least_k where it is below it already), by bisection to
    adjacent floats, the lower end."""
    low, high = least.copy(), np.ones(uplink.n)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        if np.all((mid == low) | (mid == high)):
            break
        worth = marginal_saving(uplink, mid) > price
        low, high = np.where(worth, mid, low), np.where(worth, high, mid)
    return low


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
