"""Seeds as an axis: parsing `--seeds`, and the mean, standard deviation and 95 %
confidence interval of a figure over the seeds of a repeated run (docs/seeds.md).

The interval is Student's t over seeds: mean +- t(0.975, n - 1) s / sqrt(n), with s the
sample standard deviation (ddof = 1); `<field>_ci95` is its half-width. It assumes the
per-seed figures are independent draws (they are: each seed spawns its own streams,
fedjoule/rng.py) and roughly normal; with n = 1 the spread is undefined (None).
"""

import inspect
import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats

from fedjoule.arguments import seeds_text


def parse_seeds(text: str | None, option: str = "--seeds") -> list[int] | None:
    """`--seeds N` (seeds 0..N-1) or `--seeds 3,7,11` (those seeds, in that order); None
    or empty: no seeds axis. Checked as the API's seeds are (fedjoule/arguments.py)."""
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


# ---------------------------------------------------------------- intervals (--ci)

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # the resampling is seeded: the same seeds give the same interval
FEW_SEEDS = 3  # a CI over fewer seeds than this is warned about


def physical_range(name: str) -> tuple[float, float]:
    """The range a figure can take, from its name: accuracies, fractions and detection
    rates [0, 1]; energies, times, losses, rounds, counts and spreads [0, inf); any other
    figure is unbounded."""
    key = name.lower()
    if "accuracy" in key or key.endswith(("fraction", "_tpr", "_fpr")) or key == "meets":
        return 0.0, 1.0
    nonnegative = (
        "energy", "time", "loss", "round", "_j", "_s", "_hz", "bits", "total", "dropped",
        "selected", "arrived", "online", "clients", "attempts", "_std", "per_hour", "probed",
        "drain", "observations",
    )  # fmt: skip
    if key.endswith(nonnegative) or any(word in key for word in ("energy", "time", "round")):
        return 0.0, math.inf
    return -math.inf, math.inf


# scipy >= 1.15 names the generator `rng`, older versions `random_state`
_RNG_KEYWORD = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


def bootstrap_bounds(xs: Sequence[float]) -> tuple[float, float]:
    """The 95 % percentile-bootstrap interval of the mean of `xs` (BOOTSTRAP_RESAMPLES
    resamples, seeded with BOOTSTRAP_SEED; scipy.stats.bootstrap)."""
    if min(xs) == max(xs):  # every resample has the same mean
        return float(xs[0]), float(xs[0])
    result = stats.bootstrap(
        (np.asarray(xs, dtype=float),),
        np.mean,
        confidence_level=0.95,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        **{_RNG_KEYWORD: np.random.default_rng(BOOTSTRAP_SEED)},
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def interval(values: Iterable, method: str = "t", name: str = "") -> dict:
    """mean, the 95 % CI of the mean as bounds (`lo`, `hi`) clipped to the figure's
    physical range (physical_range(name)), `half` (the unclipped half-width: Student t's
    t(0.975, n-1) s / sqrt(n), or half the bootstrap interval's width), `clipped` (True
    where a bound was cut at the range) and n. With n < 2: no interval (None)."""
    xs = _numbers(values)
    n = len(xs)
    out = {"mean": float(np.mean(xs)) if n else None, "lo": None, "hi": None, "half": None}
    out.update(n=n, clipped=False)
    if n < 2:
        return out
    mean = out["mean"]
    if method == "bootstrap":
        lo, hi = bootstrap_bounds(xs)
    else:
        half = t_ci95(xs)
        lo, hi = mean - half, mean + half
    low, high = physical_range(name)
    out.update(
        half=(hi - lo) / 2,
        lo=max(lo, low),
        hi=min(hi, high),
        clipped=lo < low or hi > high,
    )
    return out


def clip_band(name: str, lo, hi):
    """Band bounds (arrays) cut at the physical range of the figure `name`."""
    low, high = physical_range(name)
    return np.clip(np.asarray(lo, dtype=float), low, high), np.clip(
        np.asarray(hi, dtype=float), low, high
    )


def interval_text(mean, lo, hi, half, fmt: str = "{:.4g}", clipped: bool = False) -> str:
    """A mean and its CI as printed: `mean ± half` for a symmetric interval; `mean [lo,
    hi]` where the interval was cut at a physical limit or is not symmetric (bootstrap)."""
    text = fmt.format(mean)
    if lo is None or hi is None:
        return text
    symmetric = half is not None and math.isclose(hi - mean, mean - lo, abs_tol=1e-12)
    if symmetric and not clipped:
        return f"{text} ± {half:.2g}"
    return f"{text} [{lo:.3g}, {hi:.3g}]"
