"""Repetitions over seeds: runs that differ only in their seed grouped, and each group's
summary figures and curves as mean, standard deviation and 95 % CI (fedjoule/seeds.py),
in aggregate.csv, aggregate.json and band plots (docs/seeds.md).
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from fedjoule.planning import pareto
from fedjoule.planning.grid import point_label
from fedjoule.report import figures
from fedjoule.report.results import read_rounds, write_json
from fedjoule.report.table import write_table
from fedjoule.seeds import FEW_SEEDS, clip_band, interval

AGGREGATE_CSV, AGGREGATE_JSON = "aggregate.csv", "aggregate.json"
# summary fields that describe the run rather than measure it: not averaged
NOT_MEASURED = ("seed", "target_value")


@dataclass
class SeedGroup:
    """Runs of one scenario that differ only in their seed."""

    label: str  # the grid values without the seed, e.g. local_steps=5 ("all": no grid)
    values: dict[str, str]  # those grid values
    seeds: list[int]
    run_dirs: list[Path]

    def summaries(self) -> list[dict]:
        return [json.loads((d / "summary.json").read_text()) for d in self.run_dirs]


def interval_columns(rows: list[dict], fields, method: str = "t") -> dict:
    """`<field>_mean`, `_std`, `_ci95` (the half-width), `_ci95_lo`, `_ci95_hi` (the
    interval's bounds, clipped to the field's physical range: seeds.physical_range) and
    `_n` over `rows` (the per-seed summaries) of each of `fields`; a field absent or None
    in a seed's row is left out of its statistics."""
    out = {}
    for name in fields:
        values = [row.get(name) for row in rows]
        ci = interval(values, method, name)
        std = None
        if ci["n"] >= 2:
            std = float(np.std([float(v) for v in values if _finite(v)], ddof=1))
        out.update(
            {
                f"{name}_mean": ci["mean"],
                f"{name}_std": std,
                f"{name}_ci95": ci["half"],
                f"{name}_ci95_lo": ci["lo"],
                f"{name}_ci95_hi": ci["hi"],
                f"{name}_n": ci["n"],
            }
        )
    return out


def _finite(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    return math.isfinite(float(value))


def summary_row(group: SeedGroup, method: str = "t") -> dict:
    """One aggregate.csv row: the group's grid values, its seeds and `<field>_mean`,
    `_std`, `_ci95`, `_ci95_lo`, `_ci95_hi`, `_n` of every numeric summary field (`method`:
    the CI, t or bootstrap)."""
    summaries = group.summaries()
    fields = []
    for s in summaries:
        for key, value in s.items():
            if key in NOT_MEASURED or key in fields:
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                fields.append(key)
    return {
        "group": group.label,
        **group.values,
        "seeds": ",".join(map(str, group.seeds)),
        "runs": len(summaries),
        **interval_columns(summaries, fields, method),
    }


def mean_curve(run_dirs: list[Path], column: str, method: str = "t") -> dict[str, np.ndarray]:
    """`column` of rounds.csv per round over the runs: round, mean, lo, hi (the 95 % CI by
    `method`, t or bootstrap, clipped to the column's physical range: accuracy to [0, 1],
    energy to >= 0; mean alone where fewer than two runs have the round) and n. Rounds
    without a value in a run (no evaluation that round) are left out of that round's
    statistics."""
    by_round: dict[int, list[float]] = {}
    for d in run_dirs:
        for row in read_rounds(d / "rounds.csv"):
            value = row.get(column)
            if value is None or value == "" or not math.isfinite(float(value)):
                continue
            by_round.setdefault(int(row["round"]), []).append(float(value))
    rounds = sorted(by_round)
    stats = [interval(by_round[r], method, column) for r in rounds]
    mean = np.array([s["mean"] for s in stats], dtype=float)
    lo = np.array([m if s["lo"] is None else s["lo"] for m, s in zip(mean, stats, strict=True)])
    hi = np.array([m if s["hi"] is None else s["hi"] for m, s in zip(mean, stats, strict=True)])
    lo, hi = clip_band(column, lo, hi)
    return {
        "round": np.array(rounds, dtype=int),
        "mean": mean,
        "lo": lo,
        "hi": hi,
        "n": np.array([s["n"] for s in stats], dtype=int),
    }


def aggregate_fronts(rows: list[dict], objective: pareto.Objective) -> list[dict]:
    """Pareto marks over the groups' means (never over single seeds' points)."""
    means = [
        {
            objective.accuracy: row.get(f"{objective.accuracy}_mean"),
            **{
                objective.cost(kind): row.get(f"{objective.cost(kind)}_mean")
                for kind in pareto.COSTS
            },
        }
        for row in rows
    ]
    marked = pareto.mark_fronts(means, objective)
    return [
        {**row, **{f"pareto_{kind}": m[f"pareto_{kind}"] for kind in pareto.COSTS}}
        for row, m in zip(rows, marked, strict=True)
    ]


def write_aggregate(
    out: Path, groups: list[SeedGroup], objective: pareto.Objective, method: str = "t"
) -> list[dict]:
    """aggregate.csv and aggregate.json in `out`; the rows."""
    rows = aggregate_fronts([summary_row(g, method) for g in groups], objective)
    write_table(Path(out) / AGGREGATE_CSV, rows)
    write_json(
        Path(out) / AGGREGATE_JSON,
        {
            "statistics": STATISTICS[method],
            "ci": method,
            "groups": [
                {
                    "group": g.label,
                    "values": g.values,
                    "seeds": g.seeds,
                    "runs": [str(d) for d in g.run_dirs],
                }
                for g in groups
            ],
            "rows": rows,
            "warnings": few_seeds_warnings(groups, [AGGREGATE_CSV], method),
        },
    )
    return rows


STATISTICS = {
    "t": "mean; std: sample standard deviation (ddof 1); ci95: half-width of the 95 % "
    "Student-t confidence interval of the mean over seeds, t(0.975, n-1) std / sqrt(n); "
    "ci95_lo, ci95_hi: the interval's bounds, clipped to the figure's physical range "
    "(accuracy [0, 1], energy, time, rounds >= 0); n: the seeds with a value (a run that "
    "never reached its target has no rounds_to_target)",
    "bootstrap": "mean; std: sample standard deviation (ddof 1); ci95_lo, ci95_hi: the 95 % "
    "percentile-bootstrap confidence interval of the mean over seeds (scipy.stats.bootstrap, "
    "2000 resamples, seeded), clipped to the figure's physical range (accuracy [0, 1], "
    "energy, time, rounds >= 0); ci95: half its unclipped width; n: the seeds with a value",
}


def few_seeds_warnings(groups: list[SeedGroup], names: list[str], method: str = "t") -> list[str]:
    """A warning naming the figures (files `names`) whose confidence intervals rest on
    fewer than FEW_SEEDS seeds: how many, and what that does to the interval."""
    counts = [len(g.seeds) for g in groups if g.seeds]
    if not counts or min(counts) >= FEW_SEEDS:
        return []
    n = min(counts)
    if n < 2:
        why = "1 seed gives no interval (none is drawn)"
    elif method == "t":
        why = (
            f"{n} seeds: Student t(0.975, {n - 1}) = {stats.t.ppf(0.975, n - 1):.3g} makes the "
            "95 % CI wide; it is clipped at the physical limits"
        )
    else:
        why = f"{n} seeds: a bootstrap of {n} values has at most {2**n - 1} distinct means"
    return [
        f"{', '.join(names)}: CIs from fewer than {FEW_SEEDS} seeds ({why}); use --seeds 3 or more"
    ]


def group_label(values: dict[str, str]) -> str:
    """A seed group's label: its grid point's label without the seed ("all": no other
    value)."""
    return point_label({k: v for k, v in values.items() if k != "seed"}) or "all"


def group_by_seed(named_runs: list[tuple[dict[str, str], Path]]) -> list[SeedGroup]:
    """Groups of runs whose grid values agree but for `seed`, in order of first
    appearance; `named_runs`: (grid values, run folder) of finished runs."""
    groups: dict[str, SeedGroup] = {}
    for values, run_dir in named_runs:
        rest = {k: v for k, v in values.items() if k != "seed"}
        label = group_label(values)  # `fedprox mu=0.1, local_steps=5`
        key = json.dumps(rest, sort_keys=True)
        group = groups.setdefault(key, SeedGroup(label, rest, [], []))
        group.seeds.append(int(values["seed"]))
        group.run_dirs.append(Path(run_dir))
    return list(groups.values())


BAND_CURVES = (  # (file, rounds.csv column, y label, step: changes only at aggregation)
    ("accuracy_vs_round_mean.png", "accuracy", "test accuracy", True),
    ("energy_vs_round_mean.png", "cumulative_energy_j", "cumulative energy (J)", False),
)


@dataclass
class SeedOutputs:
    """What write_seed_outputs wrote: aggregate.csv's rows, the files, and a warning per
    figure whose CIs rest on fewer than FEW_SEEDS seeds."""

    rows: list[dict]
    files: list[Path]
    warnings: list[str]


def write_seed_outputs(
    out: Path,
    groups: list[SeedGroup],
    objective: pareto.Objective,
    fronts: bool = True,
    method: str = "t",
) -> SeedOutputs:
    """Everything written for runs repeated over seeds (sweep --seeds, report): aggregate.csv
    and .json, the band plots and, with `fronts` and more than one group, the fronts of
    the means; `method`: the CI, t or bootstrap."""
    rows = write_aggregate(out, groups, objective, method)
    files = [Path(out) / AGGREGATE_CSV, Path(out) / AGGREGATE_JSON]
    files += plot_bands(out, groups, method)
    if fronts and len(groups) > 1:  # one group (run --seeds) has no front to draw
        files += plot_mean_fronts(out, rows, objective, groups, method)
    figures_ = [f.name for f in files if f.suffix == ".png"] + [AGGREGATE_CSV]
    return SeedOutputs(rows, files, few_seeds_warnings(groups, figures_, method))


CI_NAMES = {"t": "Student t", "bootstrap": "percentile bootstrap"}


def _context(groups: list[SeedGroup]):
    return [figures.PlotContext.from_folder(g.run_dirs[0]) for g in groups if g.run_dirs]


def plot_bands(out: Path, groups: list[SeedGroup], method: str = "t") -> list[Path]:
    """Per group, the mean over seeds of each BAND_CURVES column against the round, with
    its 95 % CI as a band clipped to the column's physical range (accuracy as steps); the
    target line where one is set. Groups whose means coincide are drawn so that each is
    visible (figures.coincide_styles)."""
    plt = figures.plt
    contexts = _context(groups)
    n = max((len(g.seeds) for g in groups), default=0)
    files = []
    for name, column, ylabel, step in BAND_CURVES:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        curves = [(g, mean_curve(g.run_dirs, column, method)) for g in groups]
        curves = [(g, c) for g, c in curves if len(c["round"])]
        low = [float(np.min(c["lo"])) for _, c in curves]
        high = [float(np.max(c["hi"])) for _, c in curves]
        styles = figures.coincide_styles(
            [g.label for g, _ in curves],
            [(c["round"], c["mean"]) for _, c in curves],
            span=(max(high) - min(low)) if curves else None,  # the plot's height, bands too
        )
        for (_, curve), style in zip(curves, styles, strict=True):
            figures.plot_band(
                ax,
                curve["round"],
                curve["mean"],
                curve["lo"],
                curve["hi"],
                label=style["label"],
                step=step,
                ls=style["ls"],
                zorder=style["zorder"],
            )
        if column == "accuracy":
            figures.add_target_lines(ax, contexts, ["accuracy"])
        figures.integer_ticks(ax)
        ax.set_xlabel(figures.round_label(contexts))
        ax.set_ylabel(ylabel)
        what = f"{ylabel}: mean over {n} seeds, band = 95 % CI ({CI_NAMES[method]})"
        files.append(_finish(fig, ax, what, contexts, bool(groups), Path(out) / name))
    return files


def _error(rows: list[dict], key: str) -> list[list[float]]:
    """Asymmetric error bars [below, above] of each row's `key` from its clipped CI bounds
    (`_ci95_lo`, `_ci95_hi`; none where there is no interval)."""
    below, above = [], []
    for r in rows:
        mean, lo, hi = (r.get(f"{key}_{s}") for s in ("mean", "ci95_lo", "ci95_hi"))
        below.append(0.0 if lo is None or lo == "" else max(float(mean) - float(lo), 0.0))
        above.append(0.0 if hi is None or hi == "" else max(float(hi) - float(mean), 0.0))
    return [below, above]


def plot_mean_fronts(
    out: Path, rows: list[dict], objective: pareto.Objective, groups=(), method: str = "t"
):
    """pareto_<kind>_mean.png: every group's mean cost against its mean accuracy with 95 %
    CI whiskers on both (clipped to the physical range: accuracy [0, 1], costs >= 0); the
    front's members filled, numbered and joined, the others hollow; the numbers keyed to
    the groups in the legend (groups at the same spot share one label, '1, 3')."""
    plt = figures.plt
    contexts = _context(list(groups))
    acc = objective.accuracy
    files = []
    for kind, (_, _, xlabel) in pareto.COSTS.items():
        cost = objective.cost(kind)
        fig, ax = plt.subplots(figsize=(7, 4.2))
        shown = [
            r
            for r in rows
            if r.get(f"{cost}_mean") is not None and r.get(f"{acc}_mean") is not None
        ]
        for on, style in (
            (1, dict(fmt="o", color="C3", label="on the front (mean ± 95 % CI)")),
            (0, dict(fmt="o", mfc="none", color="C7", label="dominated (mean ± 95 % CI)")),
        ):
            part = [r for r in shown if r[f"pareto_{kind}"] == on]
            if part:
                ax.errorbar(
                    [r[f"{cost}_mean"] for r in part],
                    [r[f"{acc}_mean"] for r in part],
                    xerr=_error(part, cost),
                    yerr=_error(part, acc),
                    capsize=3,
                    **style,
                )
        front = sorted((r for r in shown if r[f"pareto_{kind}"]), key=lambda r: r[f"{cost}_mean"])
        if len(front) > 1:
            ax.plot(
                [r[f"{cost}_mean"] for r in front],
                [r[f"{acc}_mean"] for r in front],
                color="C3",
                alpha=0.5,
                label="front",
            )
        for i, r in enumerate(shown, 1):  # the numbers keyed in the legend
            ax.plot([], [], ls="none", marker=f"${i}$", color="black", label=f"{i}: {r['group']}")
        figures.log_axis_if_spans(ax, [r[f"{cost}_mean"] for r in shown])
        ax.set_xlabel(xlabel.replace(" (", " to target (") if objective.to_target else xlabel)
        ax.set_ylabel(acc.replace("_", " "))

        def numbers(ax=ax, shown=shown, cost=cost) -> None:  # once the layout is final
            xs, ys, texts = figures.merge_close_points(
                ax,
                [r[f"{cost}_mean"] for r in shown],
                [r[f"{acc}_mean"] for r in shown],
                [str(i) for i in range(1, len(shown) + 1)],
            )
            figures.place_labels(ax, xs, ys, texts, fontsize=8)

        what = f"Pareto front of the means over seeds ({kind}, {CI_NAMES[method]} CI)"
        path = Path(out) / f"pareto_{kind}_mean.png"
        files.append(_finish(fig, ax, what, contexts, bool(shown), path, numbers))
    return files


def _finish(fig, ax, what: str, contexts, legend: bool, path: Path, after=None) -> Path:
    """Grid, a title naming the scenarios and algorithms, the legend beside the axes,
    `after()` once the layout is final (labels placed by their drawn size), saved."""
    ax.grid(alpha=0.3)
    ax.set_title(figures.plot_title(what, contexts), fontsize=9)
    if legend:
        figures.legend_outside(ax, fontsize=8)
    fig.tight_layout()
    if after is not None:
        figures.restyle(fig)  # (the style's size first: the labels are placed for it)
        after()
    return figures.save_plot(fig, path)
