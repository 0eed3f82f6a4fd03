"""Comparing runs: accuracy against round, simulated time and energy, one line per run, and a
table of their summaries with the Pareto fronts marked (`fedjoule report`)."""

import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from rich.table import Table  # noqa: E402

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.folders import stamped_folder
from fedjoule.planning import pareto  # noqa: E402
from fedjoule.planning.sweep import SWEEP_JSON  # noqa: E402
from fedjoule.report.plots import ACCURACY_AXES  # noqa: E402
from fedjoule.report.results import read_rounds  # noqa: E402
from fedjoule.report.table import write_table  # noqa: E402
from fedjoule.storage import save_figure  # noqa: E402

REPORT_CSV = "report.csv"


@dataclass
class Comparison:
    out: Path
    rows: list[dict]  # report.csv's rows: run label, folder, summary, Pareto marks
    files: list[Path]


def default_report_dir() -> Path:
    return stamped_folder("reports")


def expand_run_dirs(paths: list[Path]) -> list[Path]:
    """Run folders to compare; a sweep's folder stands for its finished runs."""
    if not paths:
        raise FedjouleError("report needs at least one run folder")
    dirs: list[Path] = []
    for path in map(Path, paths):
        if (path / SWEEP_JSON).exists():
            sweep = json.loads((path / SWEEP_JSON).read_text())
            found = [path / r["folder"] for r in sweep["runs"]]
            dirs += [d for d in found if (d / "summary.json").exists()]
            continue
        missing = [n for n in ("rounds.csv", "summary.json") if not (path / n).exists()]
        if missing:
            raise FedjouleError(
                f"{path}: not a run folder (no {' or '.join(missing)}); give folders written "
                "by `fedjoule run` or `fedjoule sweep`"
            )
        dirs.append(path)
    if not dirs:
        raise FedjouleError("no finished runs in the folders given")
    return dirs


def run_labels(dirs: list[Path]) -> list[str]:
    """Each folder's name, or parent/name where two folders share a name."""
    names = [d.resolve().name for d in dirs]
    return [
        n if names.count(n) == 1 else f"{d.resolve().parent.name}/{n}"
        for d, n in zip(dirs, names, strict=True)
    ]


def compare_runs(
    paths: list[Path], out: Path, objective: pareto.Objective = pareto.Objective()
) -> Comparison:
    """Write the comparison plots, report.csv and the Pareto plots into `out`."""
    dirs = expand_run_dirs(paths)
    labels = run_labels(dirs)
    rows = [
        {"run": label, "folder": str(d), **json.loads((d / "summary.json").read_text())}
        for label, d in zip(labels, dirs, strict=True)
    ]
    rows = pareto.mark_fronts(rows, objective)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(out / REPORT_CSV, rows)
    curves = {label: read_rounds(d / "rounds.csv") for label, d in zip(labels, dirs, strict=True)}
    files = [out / REPORT_CSV, *plot_curves(curves, out)]
    files += pareto.write_front_plots(rows, labels, out, objective)
    return Comparison(out, rows, files)


def plot_curves(curves: dict[str, list[dict]], out: Path) -> list[Path]:
    """accuracy_vs_round/time/energy.png: the test accuracy of every run, one line each."""
    written = []
    for column, label, name in ACCURACY_AXES:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for run, rows in curves.items():
            rows = [r for r in rows if r["accuracy"] == r["accuracy"]]  # evaluated rounds
            x = [r[column] + (1 if column == "round" else 0) for r in rows]
            ax.plot(x, [r["accuracy"] for r in rows], marker=".", label=run)
        ax.set_xlabel(label)
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)
    return written


SHOWN = [
    ("final_accuracy", "final acc", "{:.4f}"),
    ("worst_client_accuracy", "worst client", "{:.4f}"),
    ("energy_total_j", "energy J", "{:.4g}"),
    ("sim_time_s", "sim time s", "{:.4g}"),
    ("rounds_completed", "rounds", "{}"),
    ("rounds_to_target", "rounds to target", "{}"),
]


def summary_table(rows: list[dict], keys: list[str] | None = None, title: str = "") -> Table:
    """A rich table of run summaries: the run, `keys` (e.g. grid values), the main summary
    fields, and the fronts each run is on (E: energy, T: time)."""
    table = Table(title=title or None)
    for name in ["run", *(keys or [])]:
        table.add_column(name)
    for _, header, _ in SHOWN:
        table.add_column(header, justify="right")
    table.add_column("front")
    for row in rows:
        cells = [str(row["run"]), *(str(row.get(k, "")) for k in keys or [])]
        for key, _, fmt in SHOWN:
            value = row.get(key)
            cells.append("—" if value is None or value == "" else fmt.format(value))
        marks = "E" * int(row.get("pareto_energy", 0)) + "T" * int(row.get("pareto_time", 0))
        cells.append(marks)
        table.add_row(*cells)
    return table
