"""Pareto fronts across runs: accuracy (higher is better) against energy or simulated time.

A run is on the front when no other run has at least its accuracy at no more cost and is
strictly better in one of the two. Runs without a value for either coordinate (no
evaluation, or the target never reached when costs are taken to the target) are left out:
they neither join nor dominate the front.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.storage import save_figure  # noqa: E402

ACCURACIES = ("final_accuracy", "best_accuracy", "worst_client_accuracy", "client_accuracy_p10")
# kind -> (total cost column, cost-to-target column, axis label)
COSTS = {
    "energy": ("energy_total_j", "energy_to_target_j", "energy (J)"),
    "time": ("sim_time_s", "time_to_target_s", "simulated time (s)"),
}


@dataclass(frozen=True)
class Objective:
    """Which summary columns a front compares: an accuracy, and total or to-target costs."""

    accuracy: str = "final_accuracy"
    to_target: bool = False

    def __post_init__(self) -> None:
        if self.accuracy not in ACCURACIES:
            raise FedjouleError(
                f"--pareto-accuracy {self.accuracy!r}: expected one of {', '.join(ACCURACIES)}"
            )

    def cost(self, kind: str) -> str:
        total, to_target, _ = COSTS[kind]
        return to_target if self.to_target else total


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


def plot_front(
    rows: list[dict],
    labels: list[str],
    kind: str,
    path: Path,
    objective: Objective = Objective(),
) -> Path:
    """Every run as a labelled point, the front as a staircase through its members."""
    cost_key = objective.cost(kind)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    points = [
        (_number(r.get(cost_key)), _number(r.get(objective.accuracy)), label)
        for r, label in zip(rows, labels, strict=True)
    ]
    shown = [(c, a, label) for c, a, label in points if c is not None and a is not None]
    front = front_table(rows, labels, kind, objective)
    on_front = {m["run"] for m in front}
    for c, a, label in shown:
        ax.scatter(c, a, color="tab:red" if label in on_front else "tab:gray", zorder=3)
        ax.annotate(label, (c, a), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if front:
        xs = [m[cost_key] for m in front]
        ys = [float(m[objective.accuracy]) for m in front]
        ax.step(xs, ys, where="post", color="tab:red", alpha=0.6, label="Pareto front")
        ax.legend()
    target = " to target" if objective.to_target else ""
    ax.set_xlabel(COSTS[kind][2].replace(" (", f"{target} ("))
    ax.set_ylabel(objective.accuracy.replace("_", " "))
    missing = len(points) - len(shown)
    title = f"{objective.accuracy.replace('_', ' ')} against {kind}"
    ax.set_title(title + (f" ({missing} runs without a value)" if missing else ""), fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)


def write_front_plots(
    rows: list[dict], labels: list[str], out_dir: Path, objective: Objective = Objective()
) -> list[Path]:
    """pareto_energy.png and pareto_time.png in out_dir."""
    return [
        plot_front(rows, labels, kind, Path(out_dir) / f"pareto_{kind}.png", objective)
        for kind in COSTS
    ]
