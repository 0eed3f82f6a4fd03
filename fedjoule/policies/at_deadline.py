"""Weights under which the clients sharing the band by weight end one after the other in
earliest-deadline order, each at its own deadline: min-energy's candidate where deadlines
of their own leave its families all late."""

import math

import numpy as np
from scipy.optimize import brentq

from fedjoule.policies.bandwidth import Uplink


def at_deadline_weights(uplink: Uplink, deadline_s: np.ndarray) -> np.ndarray | None:
    """Weights (summing to 1) of the weighted sharing (shared_upload.py) under which, in
    earliest-deadline order, each client ends at its deadline, the last by it; None where
    some client cannot (this order and these ends do not fit: another weighting may).

    In that order client k still sends in phases 0..k, phase j lasting d_j = D_j - D_(j-1),
    and holds the share u_k F_j in phase j: u_k = w_k / W_k, its share in its own last
    phase (W_k the weight still sending then), and F_j = prod_(j <= i < k) (1 - u_i), as
    W_(i+1) = W_i (1 - u_i). The bits it sends, sum_j d_j r_k(u_k F_j), rise with u_k, so
    u_k is their root at its bits (scipy's brentq), one client after the other; each u_k
    must stay below 1 (the rest must keep some band), and the last client, alone in its
    last phase (u = 1), must only send its bits by its deadline. Then w_k = u_k W_k with
    W_0 = 1, computed in logs (1 - u_k can be tiny)."""
    m = uplink.n
    order = np.argsort(deadline_s, kind="stable")
    phase_s = np.diff(deadline_s[order], prepend=0.0)
    bits = np.broadcast_to(np.asarray(uplink.bits, dtype=float), (m,))[order]
    u, factor = np.ones(m), np.zeros(0)
    for k, client in enumerate(order):
        factor = np.append(factor, 1.0)  # F_j, j = 0..k

        def sent_bits(share: float, client=client, factor=factor, k=k) -> float:
            return float(phase_s[: k + 1] @ uplink.rate_bps(share * factor, client))

        whole = sent_bits(1.0)
        if k == m - 1:
            return weights_from(order, u) if whole >= bits[k] else None
        if not whole > bits[k]:
            return None
        u[k] = brentq(lambda s, b=bits[k]: sent_bits(s) - b, 0.0, 1.0, xtol=1e-300, rtol=1e-15)
        factor = factor * (1.0 - u[k])
    return None  # (m = 0)


def weights_from(order: np.ndarray, u: np.ndarray) -> np.ndarray:
    """w_(order[k]) = u_k W_k, W_(k+1) = W_k (1 - u_k), W_0 = 1, normalised in logs."""
    with np.errstate(divide="ignore"):
        log_still = np.concatenate(([0.0], np.cumsum(np.log1p(-u[:-1]))))
        log_w = np.log(u) + log_still
    weights = np.empty(len(u))
    weights[order] = np.exp(log_w - np.max(log_w))
    return weights / math.fsum(weights)
