"""Sweeps: the local and Ray backends give the same numbers; an interrupted sweep resumes
without redoing finished runs and gives the same table; report compares real runs."""

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedjoule.cli import app
from fedjoule.errors import FedjouleError
from fedjoule.planning.grid import parse_grid, plan_points
from fedjoule.planning.sweep import SweepOptions, run_folder, run_sweep, state_lines
from fedjoule.report.compare import compare_runs
from fedjoule.report.table import read_table
from fedjoule.simulator.run import run_scenario

GRID = ["training.local_steps=1,5", "training.clients_per_round=5,10"]
SETS = ["training.rounds=3"]
NAMES = [
    "local_steps=1__clients_per_round=5",
    "local_steps=1__clients_per_round=10",
    "local_steps=5__clients_per_round=5",
    "local_steps=5__clients_per_round=10",
]


def cli_sweep(out, *extra: str) -> float:
    args = ["sweep", "default-theory", "--out", str(out), "--device", "cpu", "--quiet"]
    for item in GRID:
        args += ["--grid", item]
    for item in SETS:
        args += ["--set", item]
    tic = time.perf_counter()
    result = CliRunner().invoke(app, args + list(extra))
    assert result.exit_code == 0, (result.output, result.exception)
    return time.perf_counter() - tic


def summaries(out) -> dict[str, dict]:
    found = {}
    for name in NAMES:
        summary = json.loads((out / "runs" / name / "summary.json").read_text())
        assert summary.pop("wall_time_s") > 0
        found[name] = summary
    return found


def without_wall_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in rows]


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "local"
    seconds = cli_sweep(out, "--backend", "local", "--workers", "2")
    print(f"\n4-point local sweep (2 workers): {seconds:.1f} s")
    return out


def test_local_sweep_writes_runs_table_and_fronts(local_sweep):
    found = summaries(local_sweep)
    assert [p.name for p in sorted(local_sweep.joinpath("runs").iterdir())] == sorted(NAMES)
    rows = read_table(local_sweep / "sweep.csv")
    assert [r["run"] for r in rows] == NAMES
    for row in rows:
        summary = found[row["run"]]
        assert float(row["final_accuracy"]) == summary["final_accuracy"]
        assert float(row["energy_total_j"]) == summary["energy_total_j"]
        assert float(row["sim_time_s"]) == summary["sim_time_s"]
        assert int(row["rounds_completed"]) == summary["rounds_completed"] == 3
    assert [r["training.local_steps"] for r in rows] == ["1", "1", "5", "5"]
    assert [r["training.clients_per_round"] for r in rows] == ["5", "10", "5", "10"]
    # the marks are the fronts of the table's own numbers
    for kind, cost in (("energy", "energy_total_j"), ("time", "sim_time_s")):
        for row in rows:
            dominated = any(
                float(o[cost]) <= float(row[cost])
                and float(o["final_accuracy"]) >= float(row["final_accuracy"])
                and (o[cost] != row[cost] or o["final_accuracy"] != row["final_accuracy"])
                for o in rows
            )
            assert row[f"pareto_{kind}"] == ("0" if dominated else "1")
    assert (local_sweep / "pareto_energy.png").stat().st_size > 0
    assert (local_sweep / "pareto_time.png").stat().st_size > 0
    described = json.loads((local_sweep / "sweep.json").read_text())
    assert described["grid"] == {
        "training.local_steps": ["1", "5"],
        "training.clients_per_round": ["5", "10"],
    }
    assert [r["status"] for r in described["runs"]] == ["ran"] * 4


def test_ray_sweep_gives_the_same_summaries(local_sweep, tmp_path):
    seconds = cli_sweep(tmp_path / "ray", "--backend", "ray")
    described = json.loads((tmp_path / "ray" / "sweep.json").read_text())
    print(f"\n4-point ray sweep: {seconds:.1f} s, Ray start {described['ray_start_s']:.1f} s")
    assert described["backend"] == "ray" and described["cluster_cpus"] >= 1
    assert summaries(tmp_path / "ray") == summaries(local_sweep)
    assert without_wall_time(read_table(tmp_path / "ray" / "sweep.csv")) == without_wall_time(
        read_table(local_sweep / "sweep.csv")
    )


def test_interrupted_sweep_resumes_without_redoing_finished_runs(local_sweep, tmp_path):
    out = tmp_path / "cut"
    options = SweepOptions(workers=1, device="cpu")
    # the interruption: the first two runs finished, the third stopped after one round
    first = run_sweep("default-theory", [GRID[0].replace("1,5", "1"), GRID[1]], out, SETS, options)
    assert first.status == {NAMES[0]: "ran", NAMES[1]: "ran"}
    third = plan_points("default-theory", SETS, parse_grid(GRID))[2]
    _, partial = run_scenario(third.scenario, run_folder(out, third), device="cpu", stop_after=1)
    assert partial["rounds_completed"] == 1
    stamps = {n: (out / "runs" / n / "summary.json").stat().st_mtime_ns for n in NAMES[:2]}

    plans, said = [], []

    def on_plan(points, states, folders):
        plans.append(states)
        said.extend(state_lines(points, states, folders))

    again = run_sweep("default-theory", GRID, out, SETS, options, on_plan=on_plan)
    assert plans == [{NAMES[0]: "done", NAMES[1]: "done", NAMES[2]: "partial", NAMES[3]: "new"}]
    # what a restart says (issue 22): which runs are done, which resume from which round
    labels = [n.replace("__", ", ") for n in NAMES]
    assert said == [
        f"  done, skipped: {labels[0]}, {labels[1]}",
        f"  resuming: {labels[2]} (from round 2 of 3)",
    ]
    assert again.status == {
        NAMES[0]: "skipped",
        NAMES[1]: "skipped",
        NAMES[2]: "resumed",
        NAMES[3]: "ran",
    }
    assert stamps == {n: (out / "runs" / n / "summary.json").stat().st_mtime_ns for n in stamps}
    assert without_wall_time(read_table(out / "sweep.csv")) == without_wall_time(
        read_table(local_sweep / "sweep.csv")
    )
    # a third start finds everything done
    assert set(run_sweep("default-theory", GRID, out, SETS, options).status.values()) == {"skipped"}
    # the folder holds other runs than a changed sweep's: an error before anything runs
    with pytest.raises(FedjouleError, match=r"another scenario \(differs in training.rounds\)"):
        run_sweep("default-theory", GRID, out, ["training.rounds=4"], options)


def test_report_compares_two_real_runs(local_sweep, tmp_path):
    dirs = [local_sweep / "runs" / NAMES[0], local_sweep / "runs" / NAMES[3]]
    result = CliRunner().invoke(app, ["report", *map(str, dirs), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, (result.output, result.exception)
    for name in (
        "report.csv",
        "accuracy_vs_round.png",
        "accuracy_vs_time.png",
        "accuracy_vs_energy.png",
        "pareto_energy.png",
        "pareto_time.png",
    ):
        assert (tmp_path / "r" / name).stat().st_size > 0
    rows = read_table(tmp_path / "r" / "report.csv")
    assert [r["run"] for r in rows] == [NAMES[0], NAMES[3]]
    for row, folder in zip(rows, dirs, strict=True):
        summary = json.loads((folder / "summary.json").read_text())
        for key, value in summary.items():
            assert row[key] == (
                ""
                if value is None
                else repr(value)
                if isinstance(value, float)
                else "; ".join(value)
                if isinstance(value, list)
                else "; ".join(f"{k}={v}" for k, v in value.items())
                if isinstance(value, dict)  # the policy
                else str(value)
            ), key
    # a sweep folder stands for all its runs, labelled as in its sweep.json
    labels = [n.replace("__", ", ") for n in NAMES]  # `local_steps=1, clients_per_round=5`
    recorded = json.loads((local_sweep / "sweep.json").read_text())["runs"]
    assert [r["label"] for r in recorded] == labels
    assert [r["run"] for r in compare_runs([local_sweep], tmp_path / "all").rows] == labels


@pytest.mark.slow  # Ray's start again (about 10 s); the sweep above keeps Ray in make test
def test_ray_workers_import_the_installed_fedjoule_from_any_folder(tmp_path):
    """(issue 21, item 10) Started from a folder holding a directory named fedjoule (a
    checkout's parent), Ray's workers still import the installed package."""
    import subprocess
    import sys

    script = Path(sys.executable).with_name("fedjoule")
    if not script.exists():
        pytest.skip("no fedjoule console script beside this Python")
    (tmp_path / "fedjoule").mkdir()  # what a checkout named fedjoule looks like from above
    args = [
        str(script),
        "sweep",
        "default-theory",
        "--grid",
        "seed=0",
        "--set",
        "training.rounds=1",
    ]
    args += ["--backend", "ray", "--out", str(tmp_path / "out"), "-q", "--device", "cpu"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "runs" / "seed=0" / "summary.json").exists()
