"""Every protocol through `sweep --backend ray --seeds 2`, `report` and `capacity --search
concurrency` (docs/protocols.md): the Ray runs equal the same runs played in-process."""

import json

import pytest
from typer.testing import CliRunner

from fedjoule.cli import app
from fedjoule.planning.capacity import plan_capacity
from fedjoule.report.table import read_table
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario

KINDS = ("sync", "async", "buffered", "hierarchical")
SETS = ["training.rounds=3", "population.size=20", "training.local_steps=2"]


@pytest.mark.slow  # Ray's start and 8 runs: about a minute on 2 cores
def test_every_protocol_through_a_ray_sweep_with_two_seeds_and_report(tmp_path):
    args = ["sweep", "default-theory", "--out", str(tmp_path / "sweep"), "--device", "cpu", "-q"]
    args += ["--grid", "protocol.kind=" + ",".join(KINDS), "--seeds", "2", "--backend", "ray"]
    for item in SETS:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    rows = read_table(tmp_path / "sweep" / "sweep.csv")
    assert sorted((r["protocol.kind"], r["seed"]) for r in rows) == sorted(
        (k, s) for k in KINDS for s in ("0", "1")
    )
    for row in rows:
        assert row["protocol"] == ("" if row["protocol.kind"] == "sync" else row["protocol.kind"])
    # a Ray run's files equal the same scenario played here
    scenario = load_scenario("default-theory", [*SETS, "protocol.kind=buffered", "seed=1"])
    _, here = run_scenario(scenario, tmp_path / "here", device="cpu")
    there = json.loads(
        (tmp_path / "sweep" / "runs" / "kind=buffered__seed=1" / "summary.json").read_text()
    )
    here.pop("wall_time_s"), there.pop("wall_time_s")
    assert here == there
    report = CliRunner().invoke(
        app, ["report", *map(str, (tmp_path / "sweep" / "runs").iterdir()), "--out",
              str(tmp_path / "report")],
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    assert (tmp_path / "report" / "pareto_energy_mean.png").stat().st_size > 0


def test_capacity_searches_protocol_concurrency():
    scenario = load_scenario(
        "default-theory", ["protocol.kind=async", "population.size=16", "round.deadline_s=null"]
    )
    plan = plan_capacity(scenario, search="concurrency", deadline_s=0.03, rounds=20)
    figures = {e["concurrency"]: e for e in plan["evaluations"]}
    assert plan["search"] == "concurrency" and plan["answer"] in figures
    assert figures[plan["answer"]]["meets"]
    above = [c for c in figures if c > plan["answer"]]
    assert all(not figures[c]["meets"] for c in above)
    # more clients in flight share the band: the time to arrival grows with concurrency
    assert figures[1]["client_time_s"] < figures[16]["client_time_s"]
