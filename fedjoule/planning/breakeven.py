"""The break-even view of `fedjoule plan`: K* as a function of one number per cell.

When repricing is valid, R(K) (the rounds to the target) does not depend on the channel.
If every round costs K E_step in computation and E_comm = E_tx + E_rx in communication,
E_total(K, cell) = R(K) (K E_step + E_comm(cell)) = E_step R(K) (K + x) with

    x = E_comm per round / E_step (communication energy per round over the energy of one
        local step, J/J: dimensionless),

so K*(x) = argmin over K of R(K) (K + x) (ties: the smaller K): the lower envelope of the
lines x -> R(K) K + R(K) x, a staircase in x. Each K on the envelope's lower convex hull
is K* on one range of x, and the ranges meet where two lines cross. The crossings are
ratios of integers, found here exactly (fractions.Fraction).

A plan's cell has one x, pooled over its reached K (`cell_x`). With equal clients and no
fading every K gives the same ratio and the staircase gives each cell's K* exactly; with
unequal clients, fading or a learnt selection the per-round costs vary a little with K and
the staircase is a summary (the plan reports the cells where it disagrees).
"""

import math
from fractions import Fraction

Segment = tuple[float, float, int]  # (x_low, x_high, K): K* = K for x_low < x <= x_high


def _reached(rounds_by_k: dict[int, float | None]) -> dict[int, Fraction]:
    """The K that reach the target (R(K) not None) and their R(K), validated: K an integer
    >= 1, R(K) a number >= 1 (an integer for one seed, a mean over seeds otherwise),
    kept exact as a Fraction."""
    reached = {}
    for k, rounds in rounds_by_k.items():
        if rounds is None:
            continue
        ok = isinstance(rounds, int | float | Fraction) and math.isfinite(rounds)
        if int(k) != k or k < 1 or not ok or rounds < 1:
            raise ValueError(f"K={k!r}, R(K)={rounds!r}: K must be an integer >= 1, R(K) >= 1")
        reached[int(k)] = Fraction(rounds)
    return reached


def _as_fraction(x: float | Fraction) -> Fraction:
    if isinstance(x, Fraction):
        value = x
    elif isinstance(x, float | int) and math.isfinite(x):
        value = Fraction(x)
    else:
        raise ValueError(f"x={x!r}: must be a finite number >= 0")
    if value < 0:
        raise ValueError(f"x={x!r}: must be >= 0 (an energy ratio)")
    return value


def kstar_of_x(rounds_by_k: dict[int, int | None], x: float) -> int:
    """argmin over the reached K of R(K) (K + x), ties to the smaller K; x = inf gives the K
    of fewest rounds. R(K) None: K does not reach the target and is left out."""
    reached = _reached(rounds_by_k)
    if not reached:
        raise ValueError("no K reaches the target: K* is undefined")
    if x == math.inf:
        return min(reached, key=lambda k: (reached[k], k))
    value = _as_fraction(x)
    return min(reached, key=lambda k: (reached[k] * (k + value), k))


def exact_breakpoints(
    rounds_by_k: dict[int, int | None],
) -> list[tuple[Fraction, Fraction | None, int]]:
    """`breakpoints` with exact bounds (Fraction; None for the last range's infinity)."""
    reached = _reached(rounds_by_k)
    if not reached:
        return []
    segments: list[tuple[Fraction, Fraction | None, int]] = []
    low, current = Fraction(0), kstar_of_x(reached, 0)
    while True:
        r_cur = reached[current]
        crossing = None  # (x, R, K) of the first line to undercut the current one
        for k, rounds in reached.items():
            if rounds < r_cur:  # a shallower line: it crosses the current one once
                x = Fraction(rounds * k - r_cur * current, r_cur - rounds)
                candidate = (x, rounds, k)  # earliest; then the lowest to its right
                crossing = candidate if crossing is None else min(crossing, candidate)
        if crossing is None:
            segments.append((low, None, current))
            return segments
        segments.append((low, crossing[0], current))
        low, current = crossing[0], crossing[2]


def breakpoints(rounds_by_k: dict[int, int | None]) -> list[Segment]:
    """The staircase K*(x) over x >= 0 as (x_low, x_high, K), x increasing: K* = K for
    x_low < x <= x_high (x = 0 in the first range; x_high = inf in the last). At x_high the
    next K costs the same and the smaller K (this one) is reported. K grows and R(K) falls
    from range to range; a K not on the lower convex hull of the lines never appears.
    Empty when no K reaches the target."""
    return [
        (float(low), math.inf if high is None else float(high), k)
        for low, high, k in exact_breakpoints(rounds_by_k)
    ]


def cell_x(rows: list[dict]) -> float | None:
    """One cell's x from its plan rows, pooled over the reached K: communication energy per
    round, sum (E_total - E_compute) / sum R(K) (transmit, receive and the radio's
    promotion, tail and idle energy), over computation energy per local step and round,
    sum E_compute / sum R(K) K. None when no K reaches or nothing is computed."""
    reached = [r for r in rows if r["reached"]]
    rounds = sum(r["rounds_to_target"] for r in reached)
    steps = sum(r["rounds_to_target"] * r["K"] for r in reached)
    compute = sum(r["E_compute_j"] for r in reached)
    if not reached or rounds == 0 or compute <= 0:
        return None
    comm = sum(r["E_total_j"] - r["E_compute_j"] for r in reached)
    return (comm / rounds) / (compute / steps)


X_DEFINITION = (
    "x = communication energy per round / computation energy per local step (J/J), per "
    "cell, pooled over its reached K: (sum (E_total - E_compute) / sum R(K)) / (sum E_compute / "
    "sum R(K) K); K*(x) = argmin_K R(K) (K + x), ties to the smaller K"
)


def plan_breakeven(
    table: list[dict], best: list[dict], rounds_by_k: dict[int, int | None], figure: str
) -> dict:
    """plan.json's `breakeven`: R(K), the staircase's ranges and each cell's x, its K* from
    the energies and K*(x); `off_staircase` names the cells where the two differ."""
    segments = breakpoints(rounds_by_k)
    x_of = {(r["snr_db"], r["bandwidth_hz"]): r["x"] for r in table}
    cells, off = [], []
    for b in best:
        x = x_of[b["snr_db"], b["bandwidth_hz"]]
        k_of_x = kstar_of_x(rounds_by_k, x) if segments and x is not None else None
        cells.append(
            {
                "snr_db": b["snr_db"],
                "bandwidth_hz": b["bandwidth_hz"],
                "x": x,
                "K_star": b["K_star"],
                "K_star_of_x": k_of_x,
            }
        )
        if b["K_star"] != k_of_x:
            off.append(
                f"SNR {b['snr_db']:g} dB, {b['bandwidth_hz']:g} Hz: K* = {b['K_star']} from "
                f"its energies, K*(x = {x if x is None else format(x, '.4g')}) = {k_of_x}"
            )
    return {
        "x_definition": X_DEFINITION,
        "rounds_by_k": {str(k): r for k, r in sorted(rounds_by_k.items())},
        "breakpoints": [
            {"x_low": lo, "x_high": None if hi == math.inf else hi, "K_star": k}
            for lo, hi, k in segments
        ],
        "breakpoints_note": "K* = K_star for x_low < x <= x_high (x = 0 in the first range, "
        "which is x = 0 alone when x_high = 0; x_high null: no upper end); at x_high the "
        "next K costs the same",
        "cells": cells,
        "off_staircase": off,
        "figure": figure,
    }
