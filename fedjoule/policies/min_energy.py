"""The min-energy bandwidth allocator: the split of the uplink band that minimises the
round's radiated energy with every upload within its deadline (a convex problem, scipy)."""

import numpy as np
from scipy.optimize import minimize

from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import Uplink, share_for_time


class InfeasibleAllocation(FedjouleError):
    """No split of the band lets every selected client upload within its deadline."""


def min_energy_shares(uplink: Uplink, deadline_s) -> np.ndarray:
    """Shares minimising the radiated energy sum_k p_k bits_k / r_k(s_k) with every upload
    within its deadline (deadline_s: a number or one per client, from a common start) and
    sum_k s_k <= 1 (after Yang et al., IEEE TWC 2021, the bandwidth part of their problem).

    Convex: the rate r_k is positive and concave in s_k, so 1 / r_k is convex, and a
    deadline is the bound s_k >= share_for_time(deadline). Feasible iff those least shares
    sum to at most 1, else InfeasibleAllocation. Solved with scipy.optimize.minimize's
    SLSQP: it takes the bounds and the one linear constraint as they are, with the
    analytic gradient -p_k bits_k r_k'(s_k) / r_k^2; a convex problem's KKT point is its
    global minimum, and m (tens of clients) keeps its dense steps cheap. The start spreads
    the band left over the least shares evenly; the answer is never worse than it."""
    least = share_for_time(uplink, deadline_s)
    if not np.all(np.isfinite(least)) or least.sum() > 1.0:
        _refuse(uplink, least, deadline_s)
    start = least + (1.0 - least.sum()) / uplink.n
    scale = float(uplink.tx_energy_j(start).sum())

    def energy(s):
        return float(uplink.tx_energy_j(s).sum()) / scale

    def gradient(s):
        rate = uplink.rate_bps(s)
        return -uplink.tx_power_w * uplink.bits * uplink.rate_slope_bps(s) / rate**2 / scale

    solved = minimize(
        energy, start, jac=gradient, method="SLSQP",
        bounds=list(zip(least, np.ones(uplink.n), strict=True)),
        constraints=[{"type": "ineq", "fun": lambda s: 1.0 - s.sum(),
                      "jac": lambda s: -np.ones_like(s)}],
        options={"ftol": 1e-15, "maxiter": 500},
    )  # fmt: skip
    shares = within_band(np.clip(solved.x, least, 1.0), least)
    return shares if energy(shares) <= energy(start) else start


def within_band(shares: np.ndarray, least: np.ndarray) -> np.ndarray:
    """Shares a solver left a few ulps over the band, brought within it: what is spare
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
