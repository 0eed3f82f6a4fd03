"""Plots of a run: accuracy against round, simulated time and energy (a step line: the
accuracy only changes at aggregation), and energy by device class per device and per
participation."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedjoule import energy_kinds  # noqa: E402
from fedjoule.report import figures  # noqa: E402
from fedjoule.report.figures import PlotContext  # noqa: E402
from fedjoule.report.results import ENERGY_FIELDS, read_rounds  # noqa: E402
from fedjoule.report.table import energy_by_class  # noqa: E402

# rounds.csv column -> (axis, file); rounds are numbered from 0 as in rounds.csv
ACCURACY_AXES = [
    ("round", "round", "accuracy_vs_round.png"),
    ("sim_time_end_s", "simulated time", "accuracy_vs_time.png"),
    ("cumulative_energy_j", "cumulative energy", "accuracy_vs_energy.png"),
]
ACCURACY_SERIES = (("accuracy", "test accuracy"), ("worst_client_accuracy", "worst client"))


def accuracy_x(
    ax, column: str, label: str, values: list[float], contexts: list[PlotContext] = ()
) -> list[float]:
    """The x values of an accuracy plot on `column`'s axis (rounds from 0, named as the
    contexts' protocols count them; time in the unit its span reads best in; log where
    time or energy span two decades)."""
    if column == "round":
        ax.set_xlabel(f"{figures.round_label(contexts)} (from 0, as in rounds.csv)")
        figures.integer_ticks(ax)
        return values
    if column == "sim_time_end_s":
        scaled, _ = figures.time_axis(ax, values, "simulated time at the evaluation")
        return scaled
    ax.set_xlabel(f"{label} (J)")
    figures.log_axis_if_spans(ax, values)
    return values


def worst_note(rows: list[dict]) -> str:
    """Why the worst client's line sits at 0, for the legend: in how many evaluations some
    client got none of its local test samples right. Under label skew a client's local
    test set can be (almost) one class, one the global model does not predict for that
    client's inputs until it has learnt it (urban-macro: 31 of its 100 clients have 99 %
    or more of their test labels in one class)."""
    zero = [r["round"] for r in rows if r.get("worst_client_accuracy") == 0.0]
    if not zero:
        return ""
    return (
        f"\n(0 in {len(zero)} of {len(rows)} evaluations: some client\n"
        "gets none of its local test samples right)"
    )


def plot_run(out_dir: Path) -> list[Path]:
    """Write the run's plots next to its rounds.csv and clients.csv; returns their paths."""
    out_dir = Path(out_dir)
    context = PlotContext.from_folder(out_dir)
    rows = [r for r in read_rounds(out_dir / "rounds.csv") if r["accuracy"] == r["accuracy"]]
    written = []
    for column, label, name in ACCURACY_AXES:
        fig, ax = plt.subplots(figsize=(7.5, 4))
        x = accuracy_x(ax, column, label, [r[column] for r in rows], [context])
        for key, series in ACCURACY_SERIES:
            kept = [(xi, r[key]) for xi, r in zip(x, rows, strict=True) if r[key] == r[key]]
            if kept:
                shown = series + (worst_note(rows) if key == "worst_client_accuracy" else "")
                figures.plot_steps(ax, *zip(*kept, strict=True), label=shown)
        figures.add_target_lines(ax, [context], [key for key, _ in ACCURACY_SERIES])
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3)
        label = figures.round_label([context]) if column == "round" else label
        ax.set_title(figures.plot_title(f"accuracy against {label}", context), fontsize=9)
        figures.legend_outside(ax, title="markers: evaluations", title_fontsize=7)
        fig.tight_layout()
        written.append(figures.save_plot(fig, out_dir / name))
    written.append(plot_energy_by_class(out_dir, context))
    return written


def plot_energy_by_class(out_dir: Path, context: PlotContext | None = None) -> Path:
    """Two panels of stacked energy bars per device class: the mean per device (class total
    / devices) and per participation (class total / times its devices were selected, a
    dropped participation included); each class labelled with its counts."""
    out_dir = Path(out_dir)
    context = context or PlotContext.from_folder(out_dir)
    classes = energy_by_class(out_dir / "clients.csv")
    names = list(classes)
    fields = [f for f in ENERGY_FIELDS if any(classes[n]["energy"][f] for n in names)]
    fields = fields or ["energy_compute_j"]
    ticks = [
        f"{n}\n{classes[n]['devices']} devices\n{classes[n]['selected']} participations"
        for n in names
    ]
    if figures.current_style() == figures.PAPER:  # one column: the panels one above the other
        fig, axes = plt.subplots(2, 1, figsize=(6.0, 7.0))
    else:
        fig, axes = plt.subplots(1, 2, figsize=(max(8.5, 2.2 * len(names) + 4), 4.6))
    panels = (
        ("mean per device", "devices", "energy per device (J)"),
        ("per participation (per selection)", "selected", "energy per participation (J)"),
    )
    colours = plt.get_cmap("tab10")
    for ax, (what, count, ylabel) in zip(axes, panels, strict=True):
        bottom = [0.0] * len(names)
        for i, field in enumerate(fields):
            values = [
                classes[n]["energy"][field] / classes[n][count] if classes[n][count] else 0.0
                for n in names
            ]
            ax.bar(
                range(len(names)),
                values,
                bottom=bottom,
                label=energy_kinds.label(field),
                color=colours(i),
            )
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        for j, (n, total) in enumerate(zip(names, bottom, strict=True)):
            text = f"{total:.3g} J" if classes[n][count] else "never\nselected"
            ax.text(j, total, text, ha="center", va="bottom", fontsize=7)
        ax.margins(y=0.12)
        ax.set_xticks(range(len(names)), ticks, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(what, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    figures.legend_outside(axes[1], title="energy")
    fig.suptitle(figures.plot_title("energy by device class", context), fontsize=9)
    fig.tight_layout()
    return figures.save_plot(fig, out_dir / "energy_by_class.png")
