"""Repetitions over seeds: runs that differ only in their seed grouped, and each group's
summary figures and curves as mean, standard deviation and 95 % CI (fedjoule/seeds.py),
in aggregate.csv, aggregate.json and band plots (docs/seeds.md).
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedjoule.planning import pareto
from fedjoule.report import figures
from fedjoule.report.results import read_rounds, write_json
from fedjoule.report.table import write_table
from fedjoule.seeds import aggregate_rows, describe

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


def summary_row(group: SeedGroup) -> dict:
    """One aggregate.csv row: the group's grid values, its seeds and `<field>_mean`,
    `_std`, `_ci95`, `_n` of every numeric summary field."""
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
        **aggregate_rows(summaries, fields),
    }


def mean_curve(run_dirs: list[Path], column: str) -> dict[str, np.ndarray]:
    """`column` of rounds.csv per round over the runs: round, mean, lo, hi (the 95 % CI;
    mean alone where fewer than two runs have the round) and n. Rounds without a value
    in a run (no evaluation that round) are left out of that round's statistics."""
    by_round: dict[int, list[float]] = {}
    for d in run_dirs:
        for row in read_rounds(d / "rounds.csv"):
            value = row.get(column)
            if value is None or value == "" or not math.isfinite(float(value)):
                continue
            by_round.setdefault(int(row["round"]), []).append(float(value))
    rounds = sorted(by_round)
    stats = [describe(by_round[r]) for r in rounds]
    mean = np.array([s["mean"] for s in stats], dtype=float)
    half = np.array([s["ci95"] if s["ci95"] is not None else 0.0 for s in stats], dtype=float)
    return {
        "round": np.array(rounds, dtype=int),
        "mean": mean,
        "lo": mean - half,
        "hi": mean + half,
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


def write_aggregate(out: Path, groups: list[SeedGroup], objective: pareto.Objective) -> list[dict]:
    """aggregate.csv and aggregate.json in `out`; the rows."""
    rows = aggregate_fronts([summary_row(g) for g in groups], objective)
    write_table(Path(out) / AGGREGATE_CSV, rows)
    write_json(
        Path(out) / AGGREGATE_JSON,
        {
            "statistics": "mean; std: sample standard deviation (ddof 1); ci95: half-width "
            "of the 95 % Student-t confidence interval of the mean over seeds, "
            "t(0.975, n-1) std / sqrt(n); n: the seeds with a value (a run that never "
            "reached its target has no rounds_to_target)",
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
        },
    )
    return rows


def group_by_seed(named_runs: list[tuple[dict[str, str], Path]]) -> list[SeedGroup]:
    """Groups of runs whose grid values agree but for `seed`, in order of first
    appearance; `named_runs`: (grid values, run folder) of finished runs."""
    from fedjoule.planning.grid import point_label

    groups: dict[str, SeedGroup] = {}
    for values, run_dir in named_runs:
        rest = {k: v for k, v in values.items() if k != "seed"}
        label = point_label(rest) or "all"  # `fedprox mu=0.1, local_steps=5`
        key = json.dumps(rest, sort_keys=True)
        group = groups.setdefault(key, SeedGroup(label, rest, [], []))
        group.seeds.append(int(values["seed"]))
        group.run_dirs.append(Path(run_dir))
    return list(groups.values())


BAND_CURVES = (  # (file, rounds.csv column, y label, step: changes only at aggregation)
    ("accuracy_vs_round_mean.png", "accuracy", "test accuracy", True),
    ("energy_vs_round_mean.png", "cumulative_energy_j", "cumulative energy (J)", False),
)


def write_seed_outputs(
    out: Path, groups: list[SeedGroup], objective: pareto.Objective, fronts: bool = True
) -> tuple[list[dict], list[Path]]:
    """Everything written for runs repeated over seeds (sweep --seeds, report): aggregate.csv
    and .json, the band plots and, with `fronts` and more than one group, the fronts of
    the means. Returns aggregate.csv's rows and the files."""
    rows = write_aggregate(out, groups, objective)
    files = [Path(out) / AGGREGATE_CSV, Path(out) / AGGREGATE_JSON, *plot_bands(out, groups)]
    if fronts and len(groups) > 1:  # one group (run --seeds) has no front to draw
        files += plot_mean_fronts(out, rows, objective, groups)
    return rows, files


def _context(groups: list[SeedGroup]):
    return [figures.PlotContext.from_folder(g.run_dirs[0]) for g in groups if g.run_dirs]


def plot_bands(out: Path, groups: list[SeedGroup]) -> list[Path]:
    """Per group, the mean over seeds of each BAND_CURVES column against the round, with
    its 95 % CI as a band (accuracy as steps); the target line where one is set."""
    plt = figures.plt
    contexts = _context(groups)
    n = max((len(g.seeds) for g in groups), default=0)
    files = []
    for name, column, ylabel, step in BAND_CURVES:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for group in groups:
            curve = mean_curve(group.run_dirs, column)
            if len(curve["round"]):
                figures.plot_band(
                    ax,
                    curve["round"],
                    curve["mean"],
                    curve["lo"],
                    curve["hi"],
                    label=group.label,
                    step=step,
                )
        if column == "accuracy":
            figures.add_target_lines(ax, contexts, ["accuracy"])
        figures.integer_ticks(ax)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        what = f"{ylabel}: mean over {n} seeds, band = 95 % CI (Student t)"
        files.append(_finish(fig, ax, what, contexts, bool(groups), Path(out) / name))
    return files


def plot_mean_fronts(out: Path, rows: list[dict], objective: pareto.Objective, groups=()):
    """pareto_<kind>_mean.png: every group's mean cost against its mean accuracy with 95 %
    CI whiskers on both; the front's members filled, numbered and joined, the others
    hollow; the numbers keyed to the groups beside the plot."""
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
                    xerr=[r.get(f"{cost}_ci95") or 0.0 for r in part],
                    yerr=[r.get(f"{acc}_ci95") or 0.0 for r in part],
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
        for i, r in enumerate(shown, 1):  # the number at its point's height, to its right
            ax.annotate(
                str(i),
                (r[f"{cost}_mean"], r[f"{acc}_mean"]),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        key = "\n".join(f"{i}: {r['group']}" for i, r in enumerate(shown, 1))
        ax.text(1.02, 0.0, key, transform=ax.transAxes, fontsize=8, va="bottom")
        figures.log_axis_if_spans(ax, [r[f"{cost}_mean"] for r in shown])
        ax.set_xlabel(xlabel.replace(" (", " to target (") if objective.to_target else xlabel)
        ax.set_ylabel(acc.replace("_", " "))
        what = f"Pareto front of the means over seeds ({kind})"
        path = Path(out) / f"pareto_{kind}_mean.png"
        files.append(_finish(fig, ax, what, contexts, bool(shown), path))
    return files


def _finish(fig, ax, what: str, contexts, legend: bool, path: Path) -> Path:
    """Grid, a title naming the scenarios and algorithms, the legend beside the axes, saved."""
    ax.grid(alpha=0.3)
    ax.set_title(figures.plot_title(what, contexts), fontsize=9)
    if legend:
        figures.legend_outside(ax, fontsize=8)
    fig.tight_layout()
    return figures.save_plot(fig, path)
