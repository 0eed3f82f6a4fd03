"""Seeds as an axis: parsing `--seeds`, and the mean, standard deviation and 95 %
confidence interval of a figure over the seeds of a repeated run (docs/seeds.md).

The interval is Student's t over seeds: mean +- t(0.975, n - 1) s / sqrt(n), with s the
sample standard deviation (ddof = 1); `<field>_ci95` is its half-width. It assumes the
per-seed figures are independent draws (they are: each seed spawns its own streams,
fedjoule/rng.py) and roughly normal; with n = 1 the spread is undefined (None).
"""

import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats


def parse_seeds(text: str | None, option: str = "--seeds") -> list[int] | None:
    """`--seeds N` (seeds 0..N-1) or `--seeds 3,7,11` (those seeds, in that order); None
    or empty: no seeds axis. Checked as the API's seeds are (fedjoule/arguments.py)."""
    from fedjoule.arguments import seeds_text

    return seeds_text(text, option)


def _numbers(values: Iterable) -> list[float]:
    """The finite numbers among `values` (bools as 0/1; None, NaN and text left out)."""
    out = []
    for v in values:
        if isinstance(v, bool | np.bool_):
            v = float(v)
        if isinstance(v, int | float | np.integer | np.floating) and math.isfinite(float(v)):
            out.append(float(v))
    return out


def t_ci95(values: Sequence[float]) -> float | None:
    """Half-width of the 95 % Student-t interval of the mean of `values` (None: n < 2)."""
    n = len(values)
    if n < 2:
        return None
    s = float(np.std(values, ddof=1))
    return float(stats.t.ppf(0.975, n - 1) * s / math.sqrt(n))


def describe(values: Iterable) -> dict[str, float | int | None]:
    """mean, std (ddof 1), ci95 (half-width) and n of the finite numbers in `values`."""
    xs = _numbers(values)
    n = len(xs)
    return {
        "mean": float(np.mean(xs)) if n else None,
        "std": float(np.std(xs, ddof=1)) if n >= 2 else None,
        "ci95": t_ci95(xs),
        "n": n,
    }


def aggregate_rows(rows: Sequence[dict], fields: Iterable[str]) -> dict:
    """`<field>_mean`, `_std`, `_ci95`, `_n` over `rows` (the per-seed summaries) of each
    of `fields`; a field absent or None in a seed's row is left out of its statistics."""
    out = {}
    for name in fields:
        for stat, value in describe(row.get(name) for row in rows).items():
            out[f"{name}_{stat}"] = value
    return out


def indistinguishable(means: dict, ci95: dict, best) -> list:
    """The keys whose mean lies within the CIs of `best`'s: |mean_k - mean_best| <=
    ci95_k + ci95_best (a missing CI counts as 0). `best` is always in the set."""
    m0, c0 = means[best], ci95.get(best) or 0.0
    return [
        k for k, m in means.items() if m is not None and abs(m - m0) <= (ci95.get(k) or 0.0) + c0
    ]
