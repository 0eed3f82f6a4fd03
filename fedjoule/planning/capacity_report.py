"""The capacity plan as a printed table (rich) and as capacity.csv / capacity.json."""

from pathlib import Path

from fedjoule.report.results import write_json
from fedjoule.report.table import write_table
from fedjoule.report.terminal import FittedTable
from fedjoule.seeds import physical_range
from fedjoule.simulator.round_rules import selection_size

CSV_COLUMNS = [
    "clients_per_round", "uplink_bandwidth_hz", "rounds", "client_time_s", "round_time_s",
    "tail_observations", "mean_round_time_s", "rounds_per_hour", "arrived_fraction",
    "device_energy_j", "energy_per_round_j", "meets",
]  # fmt: skip


def number(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def whole(value) -> str:
    """A count as printed ("—" where there is none)."""
    return "—" if value is None else str(value)


def limits_text(deadline_s: float | None, energy_budget_j: float | None) -> str:
    """The limits as printed: `deadline 0.5 s, energy budget 2 J`; a limit not set is said
    so (`no deadline`, `no energy budget`), never `None`."""
    deadline = "no deadline" if deadline_s is None else f"deadline {deadline_s:.6g} s"
    budget = (
        "no energy budget" if energy_budget_j is None else f"energy budget {energy_budget_j:.6g} J"
    )
    return f"{deadline}, {budget}"


def answer_interval(plan: dict) -> str:
    """The CI of the seeds' answers: `± ci`, or `[0, hi]` where it would pass 0 (a
    bandwidth, a client count or a concurrency is never negative)."""
    mean, ci = plan["answer_mean"], plan["answer_ci95"]
    if mean is None or ci is None or mean - ci >= 0:
        return f"± {number(ci)}"
    return f"[0, {number(mean + ci)}] (mean ± {number(ci)} cut at 0)"


def with_ci(figures: dict, key: str) -> str:
    """`mean ± ci95` where the figures are seed means, else the value; an interval that
    would pass the figure's physical range (a fraction's [0, 1], a time's or an energy's
    0) as its bounds cut there: `mean [lo, hi]`."""
    text = number(figures[key])
    ci = figures.get(f"{key}_ci95")
    if ci is None or figures[key] is None:
        return text
    low, high = physical_range(key)
    mean = figures[key]
    if mean - ci >= low and mean + ci <= high:
        return f"{text} ± {ci:.2g}"
    return f"{text} [{max(mean - ci, low):.3g}, {min(mean + ci, high):.3g}]"


def selection_notice(scenario, plan: dict) -> str | None:
    """The notice `--search none` prints when a sync round selects fewer than all the
    clients: its selection keys are capacity's own (nested in m: capacity.common_select),
    so it picks other clients than `run --no-train` (the same law); None when every client
    is selected, under Bernoulli participation, another protocol or a policy's selector
    (the engine's own selection), or with a search (its candidates compare among
    themselves)."""
    training, n = scenario.training, scenario.population.size
    own_draw = training.participation == "bernoulli" or scenario.protocol.kind != "sync"
    own_draw = own_draw or scenario.policy.select != "random"
    if plan["search"] != "none" or own_draw:
        return None
    if selection_size(training.clients_per_round, scenario.round.overcommit, n) >= n:
        return None
    return (
        "capacity selects with its own keys (nested in m, docs/system-engine.md#capacity): "
        "the same law as run --no-train's selection, other clients each round"
    )


def print_capacity(console, scenario, plan: dict) -> None:
    """The figures of the scenario and, when a search ran, of its answer; the answer per
    seed with its mean and 95 % CI; where feasibility is not monotone."""
    seeds = plan["seeds"]
    title = f"capacity of {scenario.name} ({scenario.population.size:,} devices)"
    if seeds:
        title += f", mean ± 95 % CI over {len(seeds)} seeds"
    table = FittedTable(title=title)  # fits the terminal, never cuts a figure
    table.add_column("figure")
    columns = [("scenario", plan["scenario"])]
    if plan["at_answer"] is not None:
        columns.append((f"answer ({plan['search']})", plan["at_answer"]))
    for title, _ in columns:
        table.add_column(title, justify="right")

    def add(label, get):
        table.add_row(label, *(get(f) for _, f in columns))

    q, judged = plan["quantile"], plan["time_statistic"]

    def mark(field: str) -> str:
        return ", judged" if field == judged else ""

    add("clients per round", lambda f: whole(f["clients_per_round"]))
    if "concurrency" in plan["scenario"]:  # protocol.kind async or buffered
        add("protocol.concurrency", lambda f: whole(f["concurrency"]))
    add("uplink bandwidth (Hz)", lambda f: number(f["uplink_bandwidth_hz"]))
    add(f"client time to arrival, q={q:g} (s{mark('client_time_s')})",
        lambda f: with_ci(f, "client_time_s"))  # fmt: skip
    add(f"round time, q={q:g} (s{mark('round_time_s')})", lambda f: with_ci(f, "round_time_s"))
    add("rounds simulated", lambda f: whole(f["rounds"]))
    add(f"observations above q ({judged})", lambda f: with_ci(f, "tail_observations"))
    add("uploads arriving (fraction)", lambda f: with_ci(f, "arrived_fraction"))
    add("rounds per hour", lambda f: with_ci(f, "rounds_per_hour"))
    add("energy per round (J)", lambda f: with_ci(f, "energy_per_round_j"))
    add(f"device energy per round, q={q:g} (J)", lambda f: with_ci(f, "device_energy_j"))
    for c in range(len(plan["scenario"]["uplink_airtime_per_round_s"])):
        add(f"uplink airtime per round, cell {c} (s)",
            lambda f, c=c: number(f["uplink_airtime_per_round_s"][c]))  # fmt: skip
    for name in plan["scenario"]["per_class"]:
        add(f"{name}: J per participation",
            lambda f, n=name: number(f["per_class"][n]["energy_per_participation_j"]))  # fmt: skip
        add(f"{name}: battery drain per day (J, %)",
            lambda f, n=name: f"{number(f['per_class'][n]['battery_drain_j_per_day'])} "
            f"({number(f['per_class'][n]['battery_drain_percent_per_day'], 3)} %)")  # fmt: skip
    add("meets the limits", lambda f: "yes" if f["meets"] else "no")
    console.print(table)
    if plan["rounds"] is not None:
        rounds = f"{plan['rounds']} rounds per candidate"
    elif plan["over"] == "clients":
        rounds = "ceil(20 / ((1 - q) m)) rounds per candidate (at least 20)"
    else:
        rounds = "ceil(20 / (1 - q)) rounds per candidate"
    console.print(f"{judged} and device energy at q={q:g}; {rounds}")
    limits = limits_text(plan["deadline_s"], plan["energy_budget_j"])
    search = plan["search"]
    if search == "none":
        console.print(f"limits: {limits}")
        return
    if seeds:
        each = ", ".join(f"{s['seed']}: {number(s['answer'], 6)}" for s in plan["answers"])
        console.print(f"{search} per seed: {each}")
        console.print(
            f"{search} over seeds: mean {number(plan['answer_mean'], 6)}, std "
            f"{number(plan['answer_std'])}, 95 % CI {answer_interval(plan)} "
            f"(n = {plan['answer_n']} seeds with an answer)",
            style="bold",
        )
    which = "on the seed-mean figures: " if seeds else ""
    if plan["answer"] is None:
        console.print(f"{which}no {search} meets the limits ({limits})", style="bold red")
    else:
        console.print(f"{which}{search} = {plan['answer']:.6g} meets {limits}", style="bold")
    for s in plan["answers"] if seeds else []:
        warn_non_monotone(console, search, s["non_monotone"], f"seed {s['seed']}: ")
    warn_non_monotone(console, search, plan["non_monotone"], "seed mean: " if seeds else "")


def warn_non_monotone(console, search: str, regions: list[dict], prefix: str) -> None:
    """Candidates failing the limits on the easy side of the answer."""
    if not regions:
        return
    side = "below" if search in ("clients_per_round", "concurrency") else "above"
    spans = ", ".join(
        f"{r['from']:.6g}" if r["from"] == r["to"] else f"{r['from']:.6g}-{r['to']:.6g}"
        for r in regions
    )
    console.print(
        f"{prefix}not monotone: {search} = {spans} fail the limits {side} the answer",
        style="yellow",
    )


def write_capacity(folder: Path, plan: dict) -> None:
    """capacity.csv: one row per candidate (with seeds: per candidate the seed mean, std,
    ci95 and n of each figure); capacity.json: everything."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if plan["candidates"] is not None:
        rows = plan["candidates"]
    else:
        columns = CSV_COLUMNS if "concurrency" not in plan["scenario"] else [
            "concurrency", *CSV_COLUMNS
        ]  # fmt: skip
        rows = [{c: figures[c] for c in columns} for figures in plan["evaluations"]]
    write_table(folder / "capacity.csv", rows)
    write_json(folder / "capacity.json", plan)
