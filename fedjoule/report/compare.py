"""Comparing runs: accuracy against round, simulated time and energy, one line per run, and a
table of their summaries with the Pareto fronts marked (`fedjoule report`)."""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.folders import stamped_folder
from fedjoule.planning import pareto  # noqa: E402
from fedjoule.planning.sweep import SWEEP_JSON  # noqa: E402
from fedjoule.report import aggregate, figures  # noqa: E402
from fedjoule.report.fairness import policy_label  # noqa: E402
from fedjoule.report.figures import PlotContext, plot_steps  # noqa: E402
from fedjoule.report.plots import ACCURACY_AXES, accuracy_x  # noqa: E402
from fedjoule.report.results import read_rounds  # noqa: E402
from fedjoule.report.table import write_table  # noqa: E402
from fedjoule.report.terminal import FittedTable
from fedjoule.scenarios.yaml_reader import parse_yaml

REPORT_CSV = "report.csv"


@dataclass
class Comparison:
    out: Path
    rows: list[dict]  # report.csv's rows: run label, folder, summary, Pareto marks
    files: list[Path]
    aggregate: list[dict] = field(default_factory=list)  # aggregate.csv's rows (repeats)
    warnings: list[str] = field(default_factory=list)  # e.g. CIs from fewer than 3 seeds


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


def run_labels(dirs: list[Path], paths: list[Path] | None = None) -> list[str]:
    """Each run's label: a sweep's run its label in sweep.json (`fedprox mu=0.1`), another
    its folder's name; where two share a label, it is prefixed by the sweep's (or parent)
    folder name. `paths`: the folders given (sweep folders among them give the labels)."""
    recorded = sweep_runs(paths or [])
    names = [recorded.get(d.resolve(), {}).get("label") or d.resolve().name for d in dirs]
    shown = []
    for d, n in zip(dirs, names, strict=True):
        if names.count(n) == 1:
            shown.append(n)
            continue
        sweep = d.resolve().parent.parent if d.resolve() in recorded else d.resolve().parent
        shown.append(f"{sweep.name}/{n}")
    return shown


def compare_runs(
    paths: list[Path], out: Path, objective: pareto.Objective = pareto.Objective(), ci: str = "t"
) -> Comparison:
    """Write the comparison plots, report.csv and the Pareto plots into `out`; runs
    repeated over seeds also aggregate.csv/json with `ci` (t or bootstrap) intervals, and
    report.csv then marks each run with its group's place on the front of the means."""
    dirs = expand_run_dirs(paths)
    labels = run_labels(dirs, paths)
    values = grid_values(paths)
    rows = [
        {
            "run": label,
            "folder": str(d),
            **values.get(d.resolve(), {}),
            **json.loads((d / "summary.json").read_text()),
        }
        for label, d in zip(labels, dirs, strict=True)
    ]
    groups = seed_groups(dirs, labels)
    repeated = any(len(g.run_dirs) > 1 for g in groups)
    if not repeated:  # fronts over single seeds' points only where no run is repeated
        rows = pareto.mark_fronts(rows, objective)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    curves = {label: read_rounds(d / "rounds.csv") for label, d in zip(labels, dirs, strict=True)}
    contexts = {label: PlotContext.from_folder(d) for label, d in zip(labels, dirs, strict=True)}
    files = [out / REPORT_CSV, *plot_curves(curves, out, contexts)]
    means, warnings = [], []
    if repeated:
        written = aggregate.write_seed_outputs(out, groups, objective, method=ci)
        means, warnings = written.rows, written.warnings
        files += written.files
        rows = marks_of_groups(rows, dirs, groups, means)
    else:
        files += pareto.write_front_plots(rows, labels, out, objective)
    write_table(out / REPORT_CSV, rows)
    return Comparison(out, rows, files, means, warnings)


def marks_of_groups(rows, dirs, groups, means) -> list[dict]:
    """Each run's row with the Pareto marks of its seed group's means."""
    by_label = {m["group"]: m for m in means}
    group_of = {d: g.label for g in groups for d in g.run_dirs}
    marked = []
    for row, d in zip(rows, dirs, strict=True):
        mean = by_label.get(group_of.get(d), {})
        marked.append({**row, **{f"pareto_{k}": mean.get(f"pareto_{k}") for k in pareto.COSTS}})
    return marked


def sweep_runs(paths: list[Path]) -> dict[Path, dict]:
    """The sweep.json entries of the runs of the sweep folders among `paths`, by folder."""
    found = {}
    for path in map(Path, paths):
        if (path / SWEEP_JSON).exists():
            for run in json.loads((path / SWEEP_JSON).read_text())["runs"]:
                found[(path / run["folder"]).resolve()] = run
    return found


def grid_values(paths: list[Path]) -> dict[Path, dict[str, str]]:
    """The grid values of the runs of the sweep folders among `paths` (sweep.json)."""
    return {d: dict(run.get("values", {})) for d, run in sweep_runs(paths).items()}


def seed_groups(dirs: list[Path], labels: list[str]) -> list[aggregate.SeedGroup]:
    """The runs grouped by their scenario without its seed (scenario.yaml): a group of
    several is one experiment repeated over seeds; labelled by its first run's label."""
    groups: dict[str, aggregate.SeedGroup] = {}
    for d, label in zip(dirs, labels, strict=True):
        raw = parse_yaml((d / "scenario.yaml").read_text(), str(d / "scenario.yaml"))
        seed = int(raw.pop("seed", 0))
        key = json.dumps(raw, sort_keys=True, default=str)
        # the label less its seed: `fedavg__seed=0` (a folder), `fedprox mu=0.1, seed=3`
        name = re.sub(r"(, |__)?(?<![A-Za-z0-9])seed=\d+", "", label).strip(", ") or label
        group = groups.setdefault(key, aggregate.SeedGroup(name, {}, [], []))
        group.seeds.append(seed)
        group.run_dirs.append(d)
    return list(groups.values())


def plot_curves(
    curves: dict[str, list[dict]], out: Path, contexts: dict[str, PlotContext] | None = None
) -> list[Path]:
    """accuracy_vs_round/time/energy.png: the test accuracy of every run, one step line each
    (the accuracy changes at aggregation only), the runs' targets, titles naming their
    scenarios and algorithms (`contexts`: run label -> its PlotContext)."""
    contexts = contexts or {}
    evaluated = {
        run: [r for r in rows if r["accuracy"] == r["accuracy"]] for run, rows in curves.items()
    }
    written = []
    for column, what, name in ACCURACY_AXES:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        every = [r[column] for rows in evaluated.values() for r in rows]
        scaled = iter(accuracy_x(ax, column, what, every, list(contexts.values())))
        series = []
        for rows in evaluated.values():
            series.append(([next(scaled) for _ in rows], [r["accuracy"] for r in rows]))
        styles = figures.coincide_styles(list(evaluated), series)  # both visible, and said
        for (x, y), style in zip(series, styles, strict=True):
            plot_steps(
                ax,
                x,
                y,
                label=style["label"],
                ls=style["ls"],
                zorder=style["zorder"],
                offset=style["offset"],
                of=style["of"],
            )
        figures.add_target_lines(ax, contexts.values(), ["accuracy"])
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        what = figures.round_label(list(contexts.values())) if column == "round" else what
        title = f"test accuracy against {what}, {len(curves)} runs"
        ax.set_title(figures.plot_title(title, list(contexts.values())), fontsize=9)
        figures.legend_outside(ax, fontsize=7, title="markers: evaluations", title_fontsize=7)
        fig.tight_layout()
        written.append(figures.save_plot(fig, out / name))
    return written


SHOWN = [
    ("final_accuracy", "final acc", "{:.4f}"),
    ("worst_client_accuracy", "worst client", "{:.4f}"),
    ("energy_total_j", "energy J", "{:.4g}"),
    ("sim_time_s", "sim time s", "{:.4g}"),
    ("rounds_completed", "rounds", "{}"),
    ("rounds_to_target", "rounds to target", "{}"),
]
ACCURACY_HEADERS = {
    "final_accuracy": "final acc",
    "best_accuracy": "best acc",
    "worst_client_accuracy": "worst client",
    "client_accuracy_p10": "client acc p10",
}
COST_HEADERS = {
    "energy_to_target_j": "energy to target J",
    "time_to_target_s": "time to target s",
}


def shown_columns(objective: pareto.Objective | None = None) -> list[tuple[str, str, str]]:
    """The summary columns a table prints: the front's accuracy and the worst client, the
    front's costs (the totals, or energy and time to the target with --pareto-to-target:
    what the front is judged on), rounds and rounds to target."""
    if objective is None:
        return list(SHOWN)
    acc = objective.accuracy
    columns = [(acc, ACCURACY_HEADERS[acc], "{:.4f}")]
    if acc != "worst_client_accuracy":
        columns.append(SHOWN[1])
    for kind, (_, _, _) in pareto.COSTS.items():
        cost = objective.cost(kind)
        total = next(s for s in SHOWN if s[0] == pareto.COSTS[kind][0])
        columns.append((cost, COST_HEADERS[cost], total[2]) if objective.to_target else total)
    return columns + SHOWN[4:]


def marks(row: dict) -> str:
    """The fronts a row is on: E energy, T time."""

    def on(kind: str) -> int:
        value = row.get(f"pareto_{kind}")
        return 0 if value in (None, "") else int(value)

    return "E" * on("energy") + "T" * on("time")


def summary_table(
    rows: list[dict],
    keys: list[str] | None = None,
    title: str = "",
    objective: pareto.Objective | None = None,
) -> FittedTable:
    """A table of run summaries: the run, `keys` (e.g. grid values), the summary fields
    the fronts compare (shown_columns), and the fronts each run is on (E: energy, T:
    time). It fits the terminal without cutting a value (report/terminal.py)."""
    keys = keys or []
    protocols = {row.get("protocol") for row in rows} - {None, ""}
    named = any(k in ("protocol", "protocol.kind") for k in keys)
    # (under async a "round" to the target is a server version: say which protocol)
    columns = [*keys, "protocol"] if protocols - {"sync"} and not named else keys
    # a policy other than the default that no grid key names: say which
    decided = {policy_label(row.get("policy")) for row in rows} - {"default"}
    if decided and not any(k == "policy" or k.startswith("policy.") for k in keys):
        columns = [*columns, "policy"]
    table = FittedTable(title=title or None, keys=len(columns) + (not keys))
    if not keys:  # a sweep's run name is its grid values: the columns say it
        table.add_column("run")
    for name in columns:
        table.add_column(name.rsplit(".", 1)[-1])
    table.add_column("front")
    shown = shown_columns(objective)
    for _, header, _ in shown:
        table.add_column(header, justify="right")
    for row in rows:
        cells = [] if keys else [(str(row["run"]),)]
        cells += [
            (policy_label(row.get(k)) if k == "policy" else str(row.get(k, "")),)
            for k in columns
        ]
        cells.append(marks(row))
        for key, _, fmt in shown:
            value = row.get(key)
            cells.append("—" if value is None or value == "" else (fmt.format(value),))
        table.add_row(*cells)
    return table


def mean_cell(row: dict, key: str, fmt: str) -> tuple[str, ...]:
    """A figure's mean over seeds and its 95 % CI as units that are never broken apart:
    ('0.7709', '± 0.12') for a symmetric interval, ('0.0100', '[0, 0.137]') for one cut
    at a physical limit (accuracy 0..1, costs >= 0) or not symmetric (bootstrap), and
    '(n=2)' where not every seed has a value."""
    stats = ("mean", "ci95", "ci95_lo", "ci95_hi", "n")
    mean, half, lo, hi, n = (row.get(f"{key}_{s}") for s in stats)
    text = ("{:.4g}" if fmt == "{}" else fmt).format(float(mean))
    parts = [text]
    if half not in (None, ""):
        half = float(half)
        if lo in (None, "") or hi in (None, ""):
            parts.append(f"± {half:.2g}")
        else:
            lo, hi, m = float(lo), float(hi), float(mean)
            symmetric = abs((m - lo) - half) <= 1e-9 * max(abs(m), half, 1e-300) and abs(
                (hi - m) - half
            ) <= 1e-9 * max(abs(m), half, 1e-300)
            parts.append(f"± {half:.2g}" if symmetric else f"[{lo:.3g}, {hi:.3g}]")
    if n not in (None, "") and int(n) < int(row["runs"]):
        parts.append(f"(n={n})")
    return tuple(parts)


def aggregate_table(
    rows: list[dict], keys: list[str], title: str = "", objective: pareto.Objective | None = None
) -> FittedTable:
    """A table of aggregate.csv rows: each group's grid values (`keys`, without the seed),
    its number of seeds, and the mean with its 95 % CI over seeds of the fields the fronts
    compare ("0.77 ± 0.12"; "0.01 [0, 0.137]" where the interval is cut at the figure's
    physical range or not symmetric; "n=2": seeds with a value, where not all have one),
    and the fronts of the means. It fits the terminal without cutting a value."""
    keys = [k for k in keys if k != "seed"]
    table = FittedTable(title=title or None, keys=max(len(keys), 1))
    for name in keys or ["group"]:
        table.add_column(name.rsplit(".", 1)[-1])
    table.add_column("front")
    table.add_column("seeds", justify="right")
    shown = [s for s in shown_columns(objective) if s[0] != "rounds_completed"]
    for _, header, _ in shown:
        table.add_column(header, justify="right")
    for row in rows:
        cells = [(str(row.get(k, "")),) for k in keys] or [(str(row["group"]),)]
        cells += [marks(row), str(row["runs"])]
        for key, _, fmt in shown:
            mean = row.get(f"{key}_mean")
            cells.append("—" if mean is None or mean == "" else mean_cell(row, key, fmt))
        table.add_row(*cells)
    return table
