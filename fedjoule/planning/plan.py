"""`fedjoule plan`: the energy-optimal number of local steps K* over a grid of SNR and
uplink bandwidth (docs/models.md#energy-to-target-and-the-optimal-k; DRDM paper, Fig. 4).

For every K and channel cell (snr_db, uplink_bandwidth_hz): R(K), the rounds to the
scenario's target; E_total(K), the ledger's energy over those rounds (K E_step + E_tx +
E_rx of every selected client, plus DRFA/DRDM's probe transfers); K* = argmin E_total.

Method. When the channel cannot change who takes part (`reprice_blockers` is empty),
R(K) and every round's training and probe sets do not depend on the channel: one learning
run per K (at the cheapest cell) gives them, and each cell is priced by replaying those
sets on the SimPy system engine with the cell's channel (planning/replay.py). A replay
that sees the channel change who takes part anyway (a battery reaching its threshold)
hands its (K, cell) to a learning run of its own. Otherwise every (K, cell) is its own
learning run. Learning runs go through the sweep machinery (planning/sweep.py).

Break-even view (planning/breakeven.py). With repricing valid, K* depends on the channel
only through x = (E_tx + E_rx) per round / E_compute per local step (plan.csv's `x`):
K*(x) = argmin_K R(K) (K + x), a staircase whose ranges go to plan.json's `breakeven`
and kstar_breakeven.png; skipped, with the reason, when repricing is not valid.
"""

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fedjoule import __version__
from fedjoule.energy_kinds import ENERGY_FIELDS, Derived
from fedjoule.errors import FedjouleError
from fedjoule.planning.breakeven import breakpoints, cell_x, plan_breakeven
from fedjoule.planning.options import Cell, PlanOptions
from fedjoule.planning.plan_plots import plot_energy_vs_k, plot_kstar_breakeven, plot_kstar_heatmap
from fedjoule.planning.replay import reprice
from fedjoule.planning.sweep import run_sweep
from fedjoule.report.results import write_json
from fedjoule.report.table import write_table
from fedjoule.scenarios.loading import apply_overrides, load_scenario, read_source, validate
from fedjoule.scenarios.schema import Scenario
from fedjoule.seeds import describe, indistinguishable
from fedjoule.tracking.session import start_parent

PLAN_CSV, PLAN_JSON, PLAN_SEEDS_CSV = "plan.csv", "plan.json", "plan_seeds.csv"
HEATMAP_PNG, ENERGY_PNG = "kstar_heatmap.png", "energy_vs_k.png"
BREAKEVEN_PNG = "kstar_breakeven.png"
REPRICE, PER_CELL = "reprice", "per-cell"
TIME_INDEPENDENT_AVAILABILITY = ("always", "bernoulli")
# plan.csv's energy per kind, the ledger's (energy_kinds.ENERGY_FIELDS): E_compute_j,
# E_tx_j, E_rx_j, E_radio_promotion_j, E_radio_tail_j, E_idle_j; E_total_j is their sum
# (Derived: with the registered kinds too)
KIND_COLUMNS = Derived(lambda: ("E_" + name.removeprefix("energy_") for name in ENERGY_FIELDS))
FIGURES = Derived(lambda: ("E_total_j", *KIND_COLUMNS, "time_to_target_s"))  # reached (K, cell)
COLUMNS = Derived(
    lambda: (
        "K",
        "snr_db",
        "bandwidth_hz",
        "rounds_to_target",
        "reached",
        *FIGURES,
        "is_best",
        "priced_by",
        "x",  # the cell's communication energy per round / energy per local step (breakeven.py)
    )
)


def kind_of(column: str) -> str:
    """The energy kind (ledger column) of a plan.csv column of KIND_COLUMNS."""
    return "energy_" + column.removeprefix("E_")


def reprice_blockers(scenario: Scenario) -> list[str]:
    """Why the channel could change who takes part (empty: one learning run per K prices
    the grid). The rule: nothing that depends on the channel decides selection, arrival
    or eligibility. Packet errors depend on the SNR; a deadline or an over-commit quota
    on the transfer times; time-driven availability (markov, diurnal, trace) on the
    simulated clock, which the channel moves. Batteries are checked during each replay
    (a client at its threshold is a violation), not here. Radio states (promotion, tail,
    idle) do not block: they change what a transfer costs, not who takes part, and the
    replay is a SimPy run that times them on the cell's channel."""
    reasons = []
    channel, round_ = scenario.channel, scenario.round
    if scenario.protocol.kind in ("async", "buffered"):
        reasons.append(
            f"protocol.kind={scenario.protocol.kind}: the server dispatches when updates "
            "arrive, so who takes part depends on the channel"
        )
    elif scenario.protocol.kind != "sync":  # hierarchical, or a registered kind
        reasons.append(
            f"protocol.kind={scenario.protocol.kind}: the replay plays sync rounds "
            "(docs/protocols.md)"
        )
    if channel.outage != "none":
        reasons.append(
            f"channel.outage={channel.outage}: packet errors depend on the SNR, so who "
            "arrives depends on the channel"
        )
    if channel.rate == "fixed":
        reasons.append(
            "channel.rate=fixed: a transmission fails when its fade is below the rate's SNR "
            "threshold, so who arrives depends on the channel"
        )
    if round_.deadline_s is not None:
        reasons.append(
            f"round.deadline_s={round_.deadline_s:g}: transfer times depend on the channel, "
            "so the deadline can drop different clients"
        )
    if round_.overcommit > 1:
        reasons.append(
            f"round.overcommit={round_.overcommit:g}: the first arrivals are kept, and the "
            "order of arrival depends on the channel"
        )
    if scenario.availability.kind not in TIME_INDEPENDENT_AVAILABILITY:
        reasons.append(
            f"availability.kind={scenario.availability.kind}: who is online depends on the "
            "simulated time, which the channel changes"
        )
    return reasons + policy_blockers(scenario.policy)


def policy_blockers(policy) -> list[str]:
    """A policy's part of reprice_blockers: the decisions it takes from what the channel
    changes (docs/policies.md#policies-in-every-command). The replay plays the recorded
    sets in place of the selector and runs the allocators on the cell's channel, so a
    band share (equal-finish) and a frequency need no run of their own; min-energy and
    frequency=deadline need round.deadline_s, already a blocker."""
    reasons = []
    if policy.csi != "none":
        reasons.append(
            f"policy.csi={policy.csi}: the policy decides from the channel state, so who "
            "takes part depends on the channel"
        )
    elif policy.select == "oort":
        reasons.append(
            "policy.select=oort: it ranks clients by their measured round times, which "
            "depend on the channel"
        )
    elif policy.select == "battery":
        reasons.append(
            "policy.select=battery: it ranks clients by their reported battery levels, "
            "which the energy spent on the channel drains"
        )
    if policy.steps == "deadline":
        reasons.append(
            "policy.steps=deadline: each client's local steps fit its expected "
            "communication time, which depends on the channel, so the learning differs "
            "per cell"
        )
    return reasons


@dataclass
class PlanResult:
    out: Path
    rows: list[dict]
    method: str
    reason: str
    best: list[dict]  # one entry per cell: K* and its E_total (None: no K reaches)
    wall_time_s: float
    breakeven: dict = field(default_factory=dict)  # plan.json's: staircase, or why skipped


def cell_sets(cell: Cell) -> list[str]:
    return [f"channel.snr_db={cell[0]!r}", f"channel.uplink_bandwidth_hz={cell[1]!r}"]


def cell_name(cell: Cell) -> str:
    return f"snr={cell[0]:g}__bw={cell[1]:g}"


def _row(k: int, cell: Cell, priced_by: str, reached: bool, rounds: int | None, figures: dict):
    return {
        "K": k,
        "snr_db": cell[0],
        "bandwidth_hz": cell[1],
        "rounds_to_target": rounds if reached else None,
        "reached": int(reached),
        **{c: (figures[c] if reached else None) for c in FIGURES},
        "is_best": 0,
        "priced_by": priced_by,
    }


def _summary_figures(summary: dict) -> dict:
    """A learning run's energy to target (stop_at_target: its totals end at the target)."""
    return {
        "E_total_j": summary["energy_to_target_j"],
        **{column: summary[kind_of(column)] for column in KIND_COLUMNS},
        "time_to_target_s": summary["time_to_target_s"],
    }


@dataclass
class _Planning:
    """One plan in progress: what its steps share. common: every learning run's overrides;
    hooks: run_sweep's progress hooks, seeds and tracked parent."""

    scenario: str | Path
    out: Path
    options: PlanOptions
    common: list[str]
    hooks: dict
    say: Callable[[str], None]


def run_plan(
    scenario: str | Path,
    out: Path,
    sets: list[str] | None = None,
    options: PlanOptions | None = None,
    say: Callable[[str], None] = lambda text: None,
    on_plan: Callable | None = None,
    on_run: Callable | None = None,
    on_replays: Callable[[int], None] | None = None,
    on_replay: Callable[[str], None] | None = None,
) -> PlanResult:
    """Plan K* over the grid into `out`: plan.csv, plan.json and the plots. The hooks
    follow progress: `on_plan(points, states, folders)` and `on_run(name, status)` for
    each sweep of learning runs (planning/sweep.py), `on_replays(n)` before the n replays and
    `on_replay(what)` after each. With options.seeds every learning run is repeated per
    seed; plan.csv then holds means over the seeds, with their std and 95 % CI, and
    plan_seeds.csv every seed's row."""
    options = options or PlanOptions()
    out, sets = Path(out), list(sets or [])
    tic = time.perf_counter()
    base = load_scenario(scenario, sets)
    training = _with_target(base)
    max_rounds = options.max_rounds or training.rounds
    plot_cells = options.plot_cells or options.corners
    common = [*sets, "training.stop_at_target=true", f"training.rounds={max_rounds}"]
    blockers = reprice_blockers(base)
    method, reason = _method(base, options, blockers)
    say(f"method: {method} ({reason})")
    hyper = {"scenario": str(scenario), "set": str(sets), "k": str(options.k_values)}
    hyper.update(snr_db=str(options.snr_db), bandwidth_hz=str(options.bandwidth_hz))
    parent = start_parent(base.tracking, out, out.name, hyper)  # the runs' parent (tracking)
    hooks = dict(on_plan=on_plan, on_run=on_run, seeds=options.seeds)
    hooks["tracking_parent"] = parent.context() if parent else None
    plan = _Planning(scenario, out, options, common, hooks, say)
    rows: dict[tuple[int, Cell], dict] = {}
    notes: list[str] = []
    learning: dict[str, object] = {}
    if method == REPRICE:
        todo = _reprice(plan, rows, notes, learning, on_replays, on_replay)
    else:
        todo = {cell: list(options.k_values) for cell in options.cells}
    _run_cells(plan, todo, rows)
    table, best = _table(plan, rows)
    breakeven = _plots(plan, table, best, plot_cells, base, blockers)
    wall = time.perf_counter() - tic
    write_json(
        out / PLAN_JSON,
        {
            "fedjoule_version": __version__,
            "scenario": str(scenario),
            "set": sets,
            "k_values": options.k_values,
            "snr_db": options.snr_db,
            "bandwidth_hz": options.bandwidth_hz,
            "max_rounds": max_rounds,
            "seeds": options.seeds,
            "seed_statistics": SEED_STATISTICS if options.seeds else None,
            "target_metric": training.target_metric,
            "target_value": training.target_value,
            "algorithm": base.algorithm.name,
            "backend": options.sweep.backend,
            "threads_per_run": options.sweep.threads_per_run,
            "method": method,
            "reason": reason,
            "repricing_blockers": blockers,
            "not_repriced": notes,
            "learning": learning,
            "plot_cells": [{"snr_db": s, "bandwidth_hz": b} for s, b in plot_cells],
            "best": best,
            "breakeven": breakeven,
            "wall_time_s": wall,
        },
    )
    if parent:
        parent.finish(True, None, [out / PLAN_CSV, *sorted(out.glob("*.png"))])
    return PlanResult(out, table, method, reason, best, wall, breakeven)


def _with_target(base: Scenario):
    """The scenario's training section, which must name a target."""
    if base.training.target_value is None:
        raise FedjouleError(
            "plan needs a target: set training.target_value (and training.target_metric: "
            "accuracy or worst_client_accuracy), e.g. --set training.target_value=0.8"
        )
    return base.training


def _method(base: Scenario, options: PlanOptions, blockers: list[str]) -> tuple[str, str]:
    """How the plan prices the grid, and why: one learning run per K, each cell repriced,
    unless --per-cell or something that lets the channel change who takes part."""
    if options.per_cell:
        return PER_CELL, "--per-cell: every (K, cell) runs as its own learning run"
    if blockers:
        return PER_CELL, "; ".join(blockers)
    return REPRICE, (
        "the channel cannot change who takes part (no outage, no deadline, no over-commit, "
        f"availability {base.availability.kind}, batteries checked in every replay): one "
        "learning run per K, each cell priced by replaying its selections"
    )


def _reprice(
    plan: _Planning,
    rows: dict,
    notes: list[str],
    learning: dict,
    on_replays: Callable[[int], None] | None,
    on_replay: Callable[[str], None] | None,
) -> dict[Cell, list[int]]:
    """One learning run per K (and seed) at the anchor cell, every cell priced by replaying
    its selections (replay.reprice) into `rows`; returns the K per cell whose replay broke
    a condition of repricing (noted in `notes`), to run as learning runs of their own."""
    options = plan.options
    anchor = (options.snr_db[-1], options.bandwidth_hz[-1])  # cheapest: batteries last
    folder = plan.out / "learning"
    plan.say(
        f"learning runs: {len(options.k_values) * len(options.seeds or [None])} (one per "
        f"K{' and seed' if options.seeds else ''}) at SNR {anchor[0]:g} dB, "
        f"{anchor[1]:g} Hz, in {folder}"
    )
    anchor_sets = [*plan.common, *cell_sets(anchor), "output.events=true"]
    k_grid = "training.local_steps=" + ",".join(map(str, options.k_values))
    result = run_sweep(
        plan.scenario, [k_grid], folder, anchor_sets, options.sweep, fronts=False, **plan.hooks
    )
    learning["anchor_cell"] = {"snr_db": anchor[0], "bandwidth_hz": anchor[1]}
    learning["folder"] = str(folder)
    by_run = {(int(r["training.local_steps"]), _seed(r)): r for r in result.rows}
    raw, label = read_source(plan.scenario)
    if on_replays:
        on_replays(len(by_run) * len(options.cells))
    todo: dict[Cell, list[int]] = {}
    for (k, seed), summary in sorted(by_run.items()):
        point_dir = folder / "runs" / summary["run"]
        reached = summary["rounds_to_target"] is not None
        rounds = summary["rounds_to_target"] if reached else summary["rounds_completed"]
        for cell in options.cells:
            overrides = [*plan.common, *cell_sets(cell), f"training.local_steps={k}"]
            if seed is not None:
                overrides.append(f"seed={seed}")
            cell_scenario = validate(apply_overrides(copy.deepcopy(raw), overrides), label)
            priced = reprice(cell_scenario, point_dir, rounds)
            if on_replay:
                on_replay(f"K={k}{_seed_text(seed)} at {cell_name(cell)}")
            if cell == anchor and not priced.violations:
                _check_anchor(k, priced, summary)
            if priced.violations:
                notes.append(
                    f"K={k}{_seed_text(seed)}, SNR {cell[0]:g} dB, {cell[1]:g} Hz: not "
                    f"repriced, {priced.violations[0]} ({len(priced.violations)} violations)"
                )
                todo.setdefault(cell, []).append(k)
                continue
            figures = {
                "E_total_j": priced.energy_total_j,
                **{c: priced.energy_j[kind_of(c)] for c in KIND_COLUMNS},
                "time_to_target_s": priced.sim_time_s,
            }
            rows[k, cell, seed] = _row(k, cell, REPRICE, reached, rounds, figures)
    for note in notes:
        plan.say(note)
    return todo


def _run_cells(plan: _Planning, todo: dict[Cell, list[int]], rows: dict) -> None:
    """A learning run per K of `todo` in its own cell, their rows into `rows`."""
    for cell, ks in todo.items():
        folder = plan.out / "cells" / cell_name(cell)
        ks = sorted(set(ks))
        plan.say(f"learning runs for SNR {cell[0]:g} dB, {cell[1]:g} Hz: K = {ks}, in {folder}")
        grid = "training.local_steps=" + ",".join(map(str, ks))
        result = run_sweep(
            plan.scenario,
            [grid],
            folder,
            [*plan.common, *cell_sets(cell)],
            plan.options.sweep,
            fronts=False,
            **plan.hooks,
        )
        for summary in result.rows:
            k, seed = int(summary["training.local_steps"]), _seed(summary)
            reached = summary["rounds_to_target"] is not None
            figures = _summary_figures(summary) if reached else {}
            rows[k, cell, seed] = _row(
                k, cell, "run", reached, summary["rounds_to_target"], figures
            )


def _table(plan: _Planning, rows: dict) -> tuple[list[dict], list[dict]]:
    """plan.csv's rows (over seeds, their means; plan_seeds.csv every seed's) with K* per
    cell marked and each cell's x, written; and K* per cell."""
    options, out = plan.options, plan.out
    if options.seeds:
        per_seed = [
            {"seed": seed, **rows[k, cell, seed]}
            for cell in options.cells
            for k in options.k_values
            for seed in options.seeds
        ]
        for seed in options.seeds:  # each seed's own K* (is_best)
            mark_best([r for r in per_seed if r["seed"] == seed], options.cells)
        write_table(out / PLAN_SEEDS_CSV, per_seed)
        table = seed_means(rows, options)
    else:
        table = [rows[k, cell, None] for cell in options.cells for k in options.k_values]
    best = mark_best(table, options.cells)
    if options.seeds:
        mark_indistinguishable(table, best)
    for cell in options.cells:
        mine = [r for r in table if (r["snr_db"], r["bandwidth_hz"]) == cell]
        x = cell_x(mine)
        for r in mine:
            r["x"] = x
    write_table(out / PLAN_CSV, table)
    return table, best


def _plots(
    plan: _Planning,
    table: list[dict],
    best: list[dict],
    plot_cells: list[Cell],
    base: Scenario,
    blockers: list[str],
) -> dict:
    """The heatmap of K*, energy against K, and where repricing is valid the break-even
    view (K* against x); returns plan.json's breakeven (its staircase, or why skipped)."""
    options, out = plan.options, plan.out
    plot_kstar_heatmap(
        out / HEATMAP_PNG, best, options.snr_db, options.bandwidth_hz, base, options.k_values
    )
    plot_energy_vs_k(out / ENERGY_PNG, table, plot_cells, base)
    # R(K) at the anchor cell (the learning runs' cell when repricing): with repricing valid
    # it is every cell's, and K* depends on the channel only through x
    anchor = (options.snr_db[-1], options.bandwidth_hz[-1])
    at_anchor = {r["K"]: r for r in table if (r["snr_db"], r["bandwidth_hz"]) == anchor}
    rounds_by_k = {k: at_anchor[k]["rounds_to_target"] for k in options.k_values}
    if blockers:
        breakeven = {
            "skipped": f"repricing is not valid ({'; '.join(blockers)}): R(K) can depend on "
            f"the cell, so K* is not a function of x alone; {BREAKEVEN_PNG} not written"
        }
    elif all(r is None for r in rounds_by_k.values()):
        breakeven = {"skipped": f"no K reaches the target; {BREAKEVEN_PNG} not written"}
    else:
        breakeven = plan_breakeven(table, best, rounds_by_k, BREAKEVEN_PNG)
        plot_kstar_breakeven(
            out / BREAKEVEN_PNG,
            {k: r for k, r in rounds_by_k.items() if r is not None},
            breakpoints(rounds_by_k),
            breakeven["cells"],
            options.snr_db,
            options.bandwidth_hz,
            base,
        )
        for note in breakeven["off_staircase"]:
            plan.say(f"break-even: off the staircase: {note}")
    if "skipped" in breakeven:
        plan.say(f"break-even view skipped: {breakeven['skipped']}")
    return breakeven


def _check_anchor(k: int, priced, summary: dict) -> None:
    """The replay on the learning run's own channel must give the run's own ledger."""
    if summary["rounds_to_target"] is None:
        return
    if priced.energy_total_j != summary["energy_to_target_j"]:
        raise FedjouleError(
            f"K={k}: the replay on the learning run's own channel gives "
            f"{priced.energy_total_j!r} J, the run {summary['energy_to_target_j']!r} J; "
            "the repricing is not faithful (a bug: please report it)"
        )


def _seed(summary: dict) -> int | None:
    """A sweep row's seed (None: no seed axis)."""
    return int(summary["seed"]) if "seed" in summary else None


def _seed_text(seed: int | None) -> str:
    return "" if seed is None else f", seed {seed}"


SEED_STATISTICS = (
    "plan.csv's rounds_to_target, E_*_j and time_to_target_s are means over the seeds; "
    "<column>_std is the sample standard deviation (ddof 1) and <column>_ci95 the "
    "half-width of the 95 % Student-t confidence interval of the mean; a (K, cell) counts "
    "as reached only when every seed reached the target (reached_seeds says how many did); "
    "K* is the cheapest mean, and `indistinguishable` lists the K whose mean energy lies "
    "within the CIs of K*'s (|mean_K - mean_K*| <= ci95_K + ci95_K*)"
)
STATISTICS = Derived(lambda: ("rounds_to_target", *FIGURES))  # averaged over seeds


def seed_means(rows: dict, options: PlanOptions) -> list[dict]:
    """One plan.csv row per (K, cell) from the per-seed rows: each STATISTICS column's mean
    (also as <column>_mean), std and ci95 over the seeds; reached only if every seed
    reached."""
    table = []
    for cell in options.cells:
        for k in options.k_values:
            runs = [rows[k, cell, seed] for seed in options.seeds]
            reached = sum(r["reached"] for r in runs)
            every = reached == len(runs)
            row = {"K": k, "snr_db": cell[0], "bandwidth_hz": cell[1]}
            stats = {c: describe(r[c] for r in runs) if every else {} for c in STATISTICS}
            row.update({c: stats[c].get("mean") for c in STATISTICS})
            row.update(reached=int(every), reached_seeds=reached, seeds=len(runs))
            for c in STATISTICS:
                for name in ("mean", "std", "ci95"):
                    row[f"{c}_{name}"] = stats[c].get(name)
            row.update(
                is_best=0,
                indistinguishable=0,
                priced_by=",".join(sorted({r["priced_by"] for r in runs})),
            )
            table.append(row)
    return table


def mark_indistinguishable(table: list[dict], best: list[dict]) -> None:
    """Per cell, the K whose mean E_total lies within the CIs of K*'s: `indistinguishable`
    = 1 in plan.csv, and the list in the cell's `best` entry."""
    for entry in best:
        if entry["K_star"] is None:
            continue
        cell = (entry["snr_db"], entry["bandwidth_hz"])
        mine = {r["K"]: r for r in table if (r["snr_db"], r["bandwidth_hz"]) == cell}
        reached = {k: r for k, r in mine.items() if r["reached"]}
        same = indistinguishable(
            {k: r["E_total_j"] for k, r in reached.items()},
            {k: r["E_total_j_ci95"] for k, r in reached.items()},
            entry["K_star"],
        )
        for k in same:
            mine[k]["indistinguishable"] = 1
        entry["indistinguishable"] = sorted(same)
        entry["E_total_j_ci95"] = mine[entry["K_star"]]["E_total_j_ci95"]


def mark_best(table: list[dict], cells: list[Cell]) -> list[dict]:
    """Set is_best on each cell's cheapest reached K (ties: the smaller K); one entry per
    cell, K* None when no K reaches the target."""
    best = []
    for cell in cells:
        mine = [r for r in table if (r["snr_db"], r["bandwidth_hz"]) == cell and r["reached"]]
        entry = {"snr_db": cell[0], "bandwidth_hz": cell[1], "K_star": None, "E_total_j": None}
        if mine:
            winner = min(mine, key=lambda r: (r["E_total_j"], r["K"]))
            winner["is_best"] = 1
            entry.update(
                K_star=winner["K"],
                E_total_j=winner["E_total_j"],
                rounds_to_target=winner["rounds_to_target"],
            )
        else:
            entry["note"] = "no K reaches the target within the rounds cap"
        best.append(entry)
    return best
