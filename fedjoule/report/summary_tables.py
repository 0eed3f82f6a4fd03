"""The tables that print run summaries on the terminal (`fedjoule report`, `sweep`): the
figures the Pareto fronts compare, with the fronts marked, and over repeated seeds their
means and 95 % CIs. Light to import: no matplotlib (report/compare.py draws)."""

from fedjoule.planning.options import COSTS, Objective
from fedjoule.report.fairness import policy_label
from fedjoule.report.terminal import FittedTable

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


def shown_columns(objective: Objective | None = None) -> list[tuple[str, str, str]]:
    """The summary columns a table prints: the front's accuracy and the worst client, the
    front's costs (the totals, or energy and time to the target with --pareto-to-target:
    what the front is judged on), rounds and rounds to target."""
    if objective is None:
        return list(SHOWN)
    acc = objective.accuracy
    columns = [(acc, ACCURACY_HEADERS[acc], "{:.4f}")]
    if acc != "worst_client_accuracy":
        columns.append(SHOWN[1])
    for kind, (_, _, _) in COSTS.items():
        cost = objective.cost(kind)
        total = next(s for s in SHOWN if s[0] == COSTS[kind][0])
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
    objective: Objective | None = None,
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
    rows: list[dict], keys: list[str], title: str = "", objective: Objective | None = None
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
