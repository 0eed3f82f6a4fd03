"""A sweep: one scenario over the cartesian product of grids, one run folder per point,
a combined table (sweep.csv), Pareto fronts and a description (sweep.json); restartable.

A restarted sweep skips its finished runs (summary.json written and the checkpoint at the
last round), resumes the partial ones from their checkpoint and starts the rest.
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from fedjoule import __version__
from fedjoule.errors import FedjouleError
from fedjoule.planning import backends, pareto
from fedjoule.planning.backends import Job
from fedjoule.planning.grid import Axis, Point, parse_grid, plan_points, table_columns
from fedjoule.planning.options import SweepOptions
from fedjoule.plugins import Allowance, allowance
from fedjoule.report import aggregate
from fedjoule.report.results import write_json
from fedjoule.report.table import write_table
from fedjoule.scenarios.loading import read_source, scenario_folder
from fedjoule.simulator import checkpoint
from fedjoule.tracking.session import start_parent

SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
RUNS = "runs"  # the run folders live in <out>/runs/<name>
CHECKPOINT = checkpoint.NAME
NEW, PARTIAL, DONE = "new", "partial", "done"


@dataclass
class SweepResult:
    out: Path
    rows: list[dict]  # sweep.csv's rows
    status: dict[str, str]  # run name -> skipped / resumed / ran / failed
    wall_time_s: float
    grid_keys: list[str] = field(default_factory=list)  # the grid's keys, seed last
    aggregate: list[dict] = field(default_factory=list)  # aggregate.csv's rows (--seeds)
    warnings: list[str] = field(default_factory=list)  # e.g. CIs from fewer than 3 seeds

    def shown(self, rows: list[dict]) -> tuple[list[str], list[dict]]:
        """The grid columns and `rows` (its rows or aggregate rows) as a printed table
        shows them: the algorithm axes as one `algorithm` column (grid.table_columns)."""
        return table_columns(self.grid_keys if self.rows else [], rows)


def run_folder(out: Path, point: Point) -> Path:
    return Path(out) / RUNS / point.name


def run_state(folder: Path, point: Point) -> str:
    """new, partial (a checkpoint to resume from) or done; a folder that holds another
    scenario, or a checkpoint that is not plain data or not this run's, is an error."""
    if not (folder / "scenario.yaml").exists():
        return NEW
    saved, _ = read_source(folder / "scenario.yaml")  # (the bounded, safe reader)
    wanted = point.scenario.model_dump(mode="json")
    # (a run folder written before a field was added: that field at its default)
    differ = ", ".join(checkpoint.scenario_differences(saved, wanted, folder)[:5])
    if differ:
        raise FedjouleError(
            f"{folder} holds a run of another scenario (differs in {differ}); "
            "choose another --out, or delete that folder"
        )
    if not (folder / CHECKPOINT).exists():
        return NEW
    state = checkpoint.read_checkpoint(folder / CHECKPOINT, mmap=True)  # (tensors unread)
    checkpoint.check_belongs(state, folder / CHECKPOINT, wanted, folder / "scenario.yaml")
    if (folder / "summary.json").exists() and checkpoint.finished(state):
        return DONE
    return PARTIAL


def job_allowance(scenario: str | Path) -> dict:
    """What a worker may run: what the user allowed, and the scenario file's folder (a
    resumed run reads its own scenario.yaml, whose plug-ins live beside the sweep's)."""
    given = allowance()
    folder = scenario_folder(scenario) or Path.cwd()
    paths = (*given.paths, str(Path(folder).resolve()))
    return Allowance(given.modules, paths, given.run_code).as_data()


def run_sweep(
    scenario: str | Path,
    grid: list[str],
    out: Path,
    sets: list[str] | None = None,
    options: SweepOptions | None = None,
    on_plan: Callable[[list[Point], dict[str, str], dict[str, Path]], None] | None = None,
    on_run: Callable[[str, str], None] | None = None,
    seeds: list[int] | None = None,
    fronts: bool = True,
    ci: str = "t",
    tracking_parent: dict | None = None,
) -> SweepResult:
    """Run every point of the grid into out/runs/<name>; write sweep.csv, sweep.json and the
    Pareto plots. `on_plan(points, states, folders)` (run name -> state, run folder) is
    called before the first run, `on_run(name,
    status)` after each. Every grid value is validated before anything runs. `seeds`: the
    grid is repeated for each seed (a last axis `seed`), and aggregate.csv/json give each
    point's mean, std and 95 % CI over them (report/aggregate.py). `fronts`: write the
    Pareto plots (plan's runs stop at the target, where fronts say nothing). `ci`: the
    confidence interval over seeds, t (Student) or bootstrap (seeds.interval).
    `tracking_parent`: a plan's parent tracked run; without it a scenario that tracks
    starts the sweep's own parent tracked run (tracking/session.py)."""
    options = options or SweepOptions()
    sets = list(sets or [])
    axes = parse_grid(grid, sets, allow_empty=bool(seeds))
    if seeds:
        axes = [*axes, seed_axis(axes, sets, seeds)]
    out = Path(out)
    points = recorded_names(out, plan_points(scenario, sets, axes))
    states = {p.name: run_state(run_folder(out, p), p) for p in points}
    if on_plan:
        on_plan(points, states, {p.name: run_folder(out, p) for p in points})
    tic = time.perf_counter()
    description = sweep_description(scenario, sets, axes, points, options)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / SWEEP_JSON, description)
    parent = None
    if tracking_parent is None:
        parent = sweep_parent(out, scenario, sets, axes, points)
        tracking_parent = parent.context() if parent else None
    jobs = sweep_jobs(scenario, out, points, states, options, tracking_parent)
    status = {name: "skipped" for name, state in states.items() if state == DONE}
    errors: dict[str, str] = {}

    def done(job: Job, summary: dict | None, error: BaseException | None) -> None:
        if error is not None:
            status[job.name] = "failed"
            errors[job.name] = str(error).strip().splitlines()[-1] if str(error) else repr(error)
        elif summary.get("diverged_at_round") is not None:
            status[job.name] = "diverged"
        else:
            status[job.name] = "resumed" if job.scenario is None else "ran"
        if on_run:
            on_run(job.name, status[job.name])

    if options.backend == "ray":
        cluster = backends.run_ray(jobs, options.address, options.workers, done)
    else:
        backends.run_local(jobs, options.workers, done)
        cluster = {}

    rows, means, warnings = write_results(out, points, options.objective, seeds, fronts, ci)
    wall = time.perf_counter() - tic
    description.update(finished=time.strftime("%Y-%m-%dT%H:%M:%S"), wall_time_s=wall, **cluster)
    for entry in description["runs"]:
        entry["status"] = status.get(entry["name"], "failed")
        if entry["name"] in errors:
            entry["error"] = errors[entry["name"]]
    write_json(out / SWEEP_JSON, description)
    if parent:
        parent.finish(not errors, None, [out / SWEEP_CSV, *sorted(out.glob("*.png"))])
    if errors:
        listed = "; ".join(f"{name}: {message}" for name, message in errors.items())
        raise FedjouleError(
            f"{len(errors)} of {len(points)} runs failed ({listed}); the others are in {out}. "
            "Run the same sweep again to retry them."
        )
    return SweepResult(out, rows, status, wall, [a.key for a in axes], means, warnings)


def sweep_parent(out: Path, scenario, sets: list[str], axes, points):
    """The sweep's own parent tracked run when its scenario tracks, else None
    (tracking/session.py)."""
    hyper = {"scenario": str(scenario), "set": str(sets)}
    hyper.update({f"grid.{a.key}": str(list(a.values)) for a in axes})
    return start_parent(points[0].scenario.tracking, out, out.name, hyper)


def write_results(out: Path, points, objective, seeds, fronts: bool, ci: str):
    """sweep.csv (with seeds: aggregate.csv/json, and each run marked by its point's mean)
    and the Pareto plots; (rows, means over seeds, their warnings)."""
    rows = combined_rows(out, points, objective, mark=not seeds)
    means, warnings = [], []
    if seeds:
        written = write_seed_aggregate(out, points, objective, fronts, ci)
        means, warnings = written.rows, written.warnings
        rows = marks_of_means(rows, points, means)
    write_table(out / SWEEP_CSV, rows)
    if fronts and not seeds:
        labels = {p.name: p.label or p.name for p in points}
        pareto.write_front_plots(rows, [labels[r["run"]] for r in rows], out, objective)
    return rows, means, warnings


def sweep_description(scenario, sets: list[str], axes, points, options: SweepOptions) -> dict:
    """sweep.json as the sweep starts: what was asked, how it runs, and its runs."""
    return {
        "fedjoule_version": __version__,
        "scenario": str(scenario),
        "set": sets,
        "grid": {a.key: list(a.values) for a in axes},
        "backend": options.backend,
        "address": options.address,
        "workers": options.workers,
        "threads_per_run": options.threads_per_run,
        "device": options.device,
        "pareto_accuracy": options.objective.accuracy,
        "pareto_to_target": options.objective.to_target,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "finished": None,
        "runs": [
            {"name": p.name, "label": p.label, "folder": f"{RUNS}/{p.name}", "values": p.values}
            for p in points
        ],
    }


def sweep_jobs(scenario, out: Path, points, states: dict, options, tracking_parent) -> list:
    """A Job for each run not done yet: a new one carries its scenario, a partial one
    resumes from its folder's."""
    jobs = []
    for p in points:
        folder, state = run_folder(out, p), states[p.name]
        if state == DONE:
            continue
        scenario_data = None if state == PARTIAL else p.scenario.model_dump(mode="json")
        jobs.append(
            Job(
                p.name,
                str(folder),
                scenario_data,
                options.threads_per_run,
                options.device,
                options.data_dir,
                job_allowance(scenario),
                tracking_parent,
            )
        )
    return jobs


def state_lines(
    points: list[Point], states: dict[str, str], folders: dict[str, Path], most: int = 8
) -> list[str]:
    """Which runs of a restarted sweep are done (skipped) and which resume, and from which
    round (their checkpoint's); empty when every run starts afresh. At most `most` names
    a line, then how many more."""

    def listed(names: list[str]) -> str:
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return ", ".join(names[:most]) + more

    done = [p.label or p.name for p in points if states[p.name] == DONE]
    partial = []
    for p in points:
        if states[p.name] == PARTIAL:
            saved = checkpoint.read_checkpoint(Path(folders[p.name]) / CHECKPOINT, mmap=True)
            next_round = saved["simulation"]["progress"]["next_round"]
            total = saved["scenario"]["training"]["rounds"]
            partial.append(f"{p.label or p.name} (from round {next_round + 1} of {total})")
    lines = [f"  done, skipped: {listed(done)}"] if done else []
    return lines + ([f"  resuming: {listed(partial)}"] if partial else [])


def recorded_names(out: Path, points: list[Point]) -> list[Point]:
    """The points with the folder names an earlier start of this sweep gave them (its
    sweep.json), so a sweep started by an older fedjoule whose names differ resumes its
    runs rather than starting them again."""
    path = Path(out) / SWEEP_JSON
    try:
        runs = json.loads(path.read_text())["runs"]
        recorded = {json.dumps(r["values"], sort_keys=True): r["name"] for r in runs}
    except (OSError, ValueError, KeyError, TypeError):
        return points
    taken = {p.name for p in points}
    found = []
    for p in points:
        name = recorded.get(json.dumps(p.values, sort_keys=True), p.name)
        if name != p.name and name not in taken and "/" not in name and name not in ("", ".."):
            p = replace(p, name=name)
        found.append(p)
    return found


def combined_rows(
    out: Path, points: list[Point], objective: pareto.Objective, mark: bool = True
) -> list[dict]:
    """One row per finished run: its name, grid values and summary, Pareto marks (`mark`;
    not across seeds, where the fronts are over the means in aggregate.csv)."""
    rows = []
    for p in points:
        path = run_folder(out, p) / "summary.json"
        if path.exists():
            rows.append({"run": p.name, **p.values, **json.loads(path.read_text())})
    return pareto.mark_fronts(rows, objective) if mark else rows


def seed_axis(axes: list[Axis], sets: list[str], seeds: list[int]) -> Axis:
    """The `seed` axis of --seeds; `seed` may not also be a --grid or --set key."""
    if any(a.key == "seed" for a in axes) or any(
        s.partition("=")[0].strip() == "seed" for s in sets
    ):
        raise FedjouleError("seed is given by --seeds; leave it out of --grid and --set")
    return Axis("seed", tuple(str(s) for s in seeds))


def write_seed_aggregate(
    out: Path, points: list[Point], objective: pareto.Objective, fronts: bool = True, ci="t"
) -> aggregate.SeedOutputs:
    """aggregate.csv/json, the band plots and the Pareto fronts over the means, from the
    finished runs of a sweep with a seed axis."""
    finished = [
        (p.values, run_folder(out, p))
        for p in points
        if (run_folder(out, p) / "summary.json").exists()
    ]
    return aggregate.write_seed_outputs(
        out, aggregate.group_by_seed(finished), objective, fronts, ci
    )


def marks_of_means(rows: list[dict], points: list[Point], means: list[dict]) -> list[dict]:
    """sweep.csv's per-seed rows with the Pareto marks of their point's seed-means
    (aggregate.csv's `pareto_energy`, `pareto_time`): a run is marked when its grid point
    is on the front of the means."""
    by_group = {m["group"]: m for m in means}
    values = {p.name: p.values for p in points}
    marked = []
    for row in rows:
        label = aggregate.group_label(values[row["run"]])
        mean = by_group.get(label, {})
        marked.append({**row, **{f"pareto_{k}": mean.get(f"pareto_{k}") for k in pareto.COSTS}})
    return marked
