"""PNG plots of a run: accuracy against round, simulated time and energy; energy by class."""

import csv
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedjoule.report.results import read_rounds  # noqa: E402
from fedjoule.storage import save_figure  # noqa: E402

ACCURACY_AXES = [
    ("round", "round", "accuracy_vs_round.png"),
    ("sim_time_end_s", "simulated time (s)", "accuracy_vs_time.png"),
    ("cumulative_energy_j", "cumulative energy (J)", "accuracy_vs_energy.png"),
]


def plot_run(out_dir: Path) -> list[Path]:
    """Write the run's plots next to its rounds.csv and clients.csv; returns their paths."""
    out_dir = Path(out_dir)
    rows = [r for r in read_rounds(out_dir / "rounds.csv") if r["accuracy"] == r["accuracy"]]
    written = []
    for column, label, name in ACCURACY_AXES:
        fig, ax = plt.subplots(figsize=(6, 4))
        x = [r[column] + (1 if column == "round" else 0) for r in rows]
        ax.plot(x, [r["accuracy"] for r in rows], label="test accuracy")
        ax.plot(x, [r["worst_client_accuracy"] for r in rows], label="worst client", alpha=0.7)
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        save_figure(fig, out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)
    written.append(plot_energy_by_class(out_dir))
    return written


def plot_energy_by_class(out_dir: Path) -> Path:
    """Stacked bars of compute, transmit and receive energy per device class."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with (out_dir / "clients.csv").open() as f:
        for row in csv.DictReader(f):
            for kind in ("compute", "tx", "rx"):
                totals[row["device_class"]][kind] += float(row[f"energy_{kind}_j"])
    names = list(totals)
    fig, ax = plt.subplots(figsize=(6, 4))
    bottom = [0.0] * len(names)
    for kind in ("compute", "tx", "rx"):
        values = [totals[n][kind] for n in names]
        ax.bar(names, values, bottom=bottom, label=kind)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("energy (J)")
    ax.set_title("energy by device class")
    ax.legend()
    fig.tight_layout()
    path = out_dir / "energy_by_class.png"
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
