"""Pareto fronts across runs: accuracy (higher is better) against energy or simulated time.

A run is on the front when no other run has at least its accuracy at no more cost and is
strictly better in one of the two. Runs without a value for either coordinate (no
evaluation, or the target never reached when costs are taken to the target) are left out:
they neither join nor dominate the front.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedjoule.planning.options import COSTS, Objective  # noqa: E402
from fedjoule.report import figures  # noqa: E402
from fedjoule.report.figures import PlotContext  # noqa: E402


def _number(value) -> float | None:
    if value is None or value == "":
        return None
    value = float(value)
    return None if math.isnan(value) else value


def front_mask(costs: Sequence, accuracies: Sequence) -> list[bool]:
    """True for the points (cost, accuracy) that no other point dominates."""
    points = [(_number(c), _number(a)) for c, a in zip(costs, accuracies, strict=True)]
    valid = [(i, c, a) for i, (c, a) in enumerate(points) if c is not None and a is not None]
    mask = [False] * len(points)
    for i, c, a in valid:
        mask[i] = not any(
            c2 <= c and a2 >= a and (c2 < c or a2 > a) for j, c2, a2 in valid if j != i
        )
    return mask


def mark_fronts(rows: list[dict], objective: Objective = Objective()) -> list[dict]:
    """The rows (summaries) with `pareto_energy` and `pareto_time` columns (1 on the front)."""
    marks = {
        kind: front_mask(
            [r.get(objective.cost(kind)) for r in rows], [r.get(objective.accuracy) for r in rows]
        )
        for kind in COSTS
    }
    return [
        {**row, **{f"pareto_{kind}": int(marks[kind][i]) for kind in COSTS}}
        for i, row in enumerate(rows)
    ]


def front_table(
    rows: list[dict], labels: list[str], kind: str, objective: Objective = Objective()
) -> list[dict]:
    """The front's members in order of increasing cost: label, cost and accuracy."""
    cost_key = objective.cost(kind)
    mask = front_mask([r.get(cost_key) for r in rows], [r.get(objective.accuracy) for r in rows])
    members = [
        {"run": label, cost_key: float(row[cost_key]), objective.accuracy: row[objective.accuracy]}
        for label, row, on in zip(labels, rows, mask, strict=True)
        if on
    ]
    return sorted(members, key=lambda m: (m[cost_key], -float(m[objective.accuracy])))


def plot_contexts(rows: list[dict], out_dir: Path) -> list[PlotContext]:
    """Each row's scenario name, algorithm and target for the plots: from its run folder
    (the row's `folder`, or the sweep's sweep.json in `out_dir`), else its target alone."""
    out_dir = Path(out_dir)
    folders = [row.get("folder") for row in rows]
    if not all(folders) and (out_dir / "sweep.json").is_file():
        try:
            runs = json.loads((out_dir / "sweep.json").read_text())["runs"]
            by_name = {r["name"]: out_dir / r["folder"] for r in runs}
            folders = [
                f or by_name.get(row.get("run")) for f, row in zip(folders, rows, strict=True)
            ]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    contexts = []
    for row, folder in zip(rows, folders, strict=True):
        context = PlotContext.from_folder(folder) if folder else PlotContext()
        value = _number(row.get("target_value"))
        if context.target_value is None and value is not None:
            context = replace(
                context, target_metric=row.get("target_metric") or "accuracy", target_value=value
            )
        contexts.append(context)
    return contexts


def plot_front(
    rows: list[dict],
    labels: list[str],
    kind: str,
    path: Path,
    objective: Objective = Objective(),
    contexts: list[PlotContext] | None = None,
) -> Path:
    """Every run a point (the front's members red and numbered in order of cost, the
    numbers keyed in the legend; dominated runs grey and hollow), the front a staircase
    through its members, the target where the accuracy shown is the target's metric."""
    contexts = plot_contexts(rows, Path(path).parent) if contexts is None else contexts
    cost_key = objective.cost(kind)
    points = [
        (_number(r.get(cost_key)), _number(r.get(objective.accuracy)), label)
        for r, label in zip(rows, labels, strict=True)
    ]
    shown = [(c, a, label) for c, a, label in points if c is not None and a is not None]
    front = front_table(rows, labels, kind, objective)
    on_front = {m["run"] for m in front}
    width = 7.0 + (2.5 if front and max(len(m["run"]) for m in front) > 20 else 0.0)
    fig, ax = plt.subplots(figsize=(width, 4.6))
    target = " to target" if objective.to_target else ""
    scale, cost_text = _cost_axis(ax, [c for c, _, _ in shown], kind, target)
    dominated = [(scale[c], a) for c, a, label in shown if label not in on_front]
    handles = []
    if dominated:
        handles.append(
            ax.scatter(
                *zip(*dominated, strict=True),
                facecolors="none",
                edgecolors="tab:gray",
                zorder=3,
                label=f"dominated ({len(dominated)} runs)",
            )
        )
    xs = [scale[m[cost_key]] for m in front]
    ys = [float(m[objective.accuracy]) for m in front]
    members = _front_members(ax, front, xs, ys, cost_key, objective.accuracy, cost_text)
    handles, numbered = members[:1] + handles, members[1:]  # the front's staircase first
    accuracy = objective.accuracy
    metric = "worst_client_accuracy" if accuracy == "worst_client_accuracy" else "accuracy"
    if accuracy != "client_accuracy_p10":
        handles += [h for h in figures.add_target_lines(ax, contexts, [metric]) if h]
    ax.set_ylabel(accuracy.replace("_", " "))
    missing = len(points) - len(shown)
    what = f"{accuracy.replace('_', ' ')} against {kind}{target}"
    if missing:
        why = "never reached the target" if objective.to_target else "no value"
        what += f" ({missing} of {len(points)} runs not shown: {why})"
    ax.set_title(figures.plot_title(what, contexts), fontsize=9)
    ax.grid(alpha=0.3)
    ax.margins(0.08)
    if handles or numbered:
        legend = figures.legend_outside(
            ax, handles=handles + numbered, fontsize=7, title="front members: cost, accuracy"
        )
        legend.get_title().set_fontsize(7)
    fig.tight_layout()
    if front:
        numbers = [str(i) for i in range(1, len(front) + 1)]
        figures.place_labels(ax, xs, ys, numbers, fontsize=8, color="tab:red", avoid=dominated)
    return figures.save_plot(fig, path)


def _cost_axis(ax, costs: list[float], kind: str, target: str):
    """The cost axis of plot_front: simulated time in a scaled unit, or energy (J, log
    where it spans decades); each cost's position on it, and how a cost is written."""
    if kind == "time":
        scaled, _ = figures.time_axis(ax, costs, f"simulated time{target}")
        return dict(zip(costs, scaled, strict=True)), figures.duration_text
    ax.set_xlabel(f"energy{target} (J)")
    figures.log_axis_if_spans(ax, costs)
    return {c: c for c in costs}, "{:.3g} J".format


def _front_members(ax, front, xs, ys, cost_key, accuracy, cost_text) -> list:
    """The front as a red staircase through its members, and the legend's handles: the
    staircase, then a numbered key per member (its cost and accuracy); none without a
    front."""
    if not front:
        return []
    (stairs,) = ax.step(
        xs, ys, where="post", color="tab:red", alpha=0.6, label="Pareto front", zorder=2
    )
    ax.scatter(xs, ys, color="tab:red", zorder=4)
    keys = [stairs]
    for i, m in enumerate(front, start=1):
        key = plt.Line2D([], [], ls="none", marker=f"${i}$", color="tab:red", ms=7)
        key.set_label(f"{m['run']}: {cost_text(m[cost_key])}, {float(m[accuracy]):.4g}")
        keys.append(key)
    return keys


def write_front_plots(
    rows: list[dict], labels: list[str], out_dir: Path, objective: Objective = Objective()
) -> list[Path]:
    """pareto_energy.png and pareto_time.png in out_dir."""
    contexts = plot_contexts(rows, out_dir)
    return [
        plot_front(rows, labels, kind, Path(out_dir) / f"pareto_{kind}.png", objective, contexts)
        for kind in COSTS
    ]
