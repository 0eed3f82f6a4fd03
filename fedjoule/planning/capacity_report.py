"""The capacity plan as a printed table (rich) and as capacity.csv / capacity.json."""

import csv
import io
from pathlib import Path

from rich.table import Table

from fedjoule.report.results import write_json
from fedjoule.storage import write_text_atomically

CSV_COLUMNS = [
    "clients_per_round", "uplink_bandwidth_hz", "round_time_s", "mean_round_time_s",
    "rounds_per_hour", "device_energy_j", "energy_per_round_j", "meets",
]  # fmt: skip


def print_capacity(console, scenario, plan: dict) -> None:
    """The figures of the scenario and, when a search ran, of its answer."""
    table = Table(title=f"capacity of {scenario.name} ({scenario.population.size:,} devices)")
    table.add_column("figure")
    columns = [("scenario", plan["scenario"])]
    if plan["at_answer"] is not None:
        columns.append((f"answer ({plan['search']})", plan["at_answer"]))
    for title, _ in columns:
        table.add_column(title, justify="right")

    def add(label, get):
        table.add_row(label, *(get(f) for _, f in columns))

    def number(value, digits: int = 4) -> str:
        return "—" if value is None else f"{value:.{digits}g}"

    q = plan["quantile"]
    add("clients per round", lambda f: str(f["clients_per_round"]))
    add("uplink bandwidth (Hz)", lambda f: f"{f['uplink_bandwidth_hz']:.4g}")
    add(f"round time, q={q:g} (s)", lambda f: f"{f['round_time_s']:.4g}")
    add("rounds per hour", lambda f: number(f["rounds_per_hour"]))
    add("energy per round (J)", lambda f: f"{f['energy_per_round_j']:.4g}")
    add(f"device energy per round, q={q:g} (J)", lambda f: f"{f['device_energy_j']:.4g}")
    for c in range(len(plan["scenario"]["uplink_airtime_per_round_s"])):
        add(f"uplink airtime per round, cell {c} (s)",
            lambda f, c=c: f"{f['uplink_airtime_per_round_s'][c]:.4g}")  # fmt: skip
    for name in plan["scenario"]["per_class"]:
        add(f"{name}: J per participation",
            lambda f, n=name: number(f["per_class"][n]["energy_per_participation_j"]))  # fmt: skip
        add(f"{name}: battery drain per day (J, %)",
            lambda f, n=name: f"{number(f['per_class'][n]['battery_drain_j_per_day'])} "
            f"({number(f['per_class'][n]['battery_drain_percent_per_day'], 3)} %)")  # fmt: skip
    add("meets the limits", lambda f: "yes" if f["meets"] else "no")
    console.print(table)
    limits = f"deadline {plan['deadline_s']} s, energy budget {plan['energy_budget_j']} J"
    if plan["search"] == "none":
        console.print(f"limits: {limits}")
    elif plan["answer"] is None:
        console.print(f"no {plan['search']} meets the limits ({limits})", style="bold red")
    else:
        console.print(f"{plan['search']} = {plan['answer']:.6g} meets {limits}", style="bold")


def write_capacity(folder: Path, plan: dict) -> None:
    """capacity.csv: one row per evaluated candidate; capacity.json: everything."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(CSV_COLUMNS)
    for figures in plan["evaluations"]:
        writer.writerow([figures[c] for c in CSV_COLUMNS])
    write_text_atomically(folder / "capacity.csv", text.getvalue())
    write_json(folder / "capacity.json", plan)
