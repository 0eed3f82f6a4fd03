"""Seeds as an axis: --seeds parsing, the Student-t statistics, a sweep's aggregate equal to
the hand-computed means of its per-seed summaries, common random numbers across a sweep's
points, and plan's R(K) mean +- CI with the indistinguishable set of K."""

import json
import math

import numpy as np
import pytest
import yaml
from scipy import stats

from fedjoule.errors import FedjouleError
from fedjoule.planning.plan import PLAN_SEEDS_CSV, PlanOptions, run_plan
from fedjoule.planning.sweep import SweepOptions, run_sweep
from fedjoule.report.aggregate import mean_curve
from fedjoule.report.results import read_rounds
from fedjoule.report.table import read_table
from fedjoule.seeds import describe, indistinguishable, parse_seeds

from .test_plan import SCENARIO, one_thread  # noqa: F401 (the autouse fixture)


def test_parse_seeds():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("3,7,11") == [3, 7, 11]
    assert parse_seeds(None) is None and parse_seeds(" ") is None
    for bad in ("0", "-1", "x", "1,1", "2,-3", "1.5"):
        with pytest.raises(FedjouleError, match=f"--seeds '{bad}'"):
            parse_seeds(bad)


def test_describe_is_the_student_t_interval():
    d = describe([1.0, 2.0, 3.0, 4.0, None, float("nan")])  # None and NaN left out
    s = math.sqrt(5 / 3)  # sample std of 1..4
    assert d["n"] == 4 and d["mean"] == 2.5
    assert d["std"] == pytest.approx(s, rel=1e-12)
    assert d["ci95"] == pytest.approx(3.182446305284263 * s / 2, rel=1e-9)  # t(0.975, 3)
    assert describe([7.0]) == {"mean": 7.0, "std": None, "ci95": None, "n": 1}
    # within the CIs: |10 - 12| <= 1 + 1.5; |10 - 14| > 1 + 1
    same = indistinguishable({1: 10.0, 2: 12.0, 3: 14.0}, {1: 1.0, 2: 1.5, 3: 1.0}, 1)
    assert same == [1, 2]


def scenario_file(tmp_path) -> str:
    path = tmp_path / "seeds.yaml"
    data = json.loads(json.dumps(SCENARIO))
    data["training"]["rounds"] = 12
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_sweep_over_seeds_aggregates_the_per_seed_summaries(tmp_path):
    source = scenario_file(tmp_path)
    options = SweepOptions(workers=1, device="cpu")
    result = run_sweep(
        source, ["training.local_steps=1,5"], tmp_path / "out", [], options, seeds=[0, 1, 2]
    )
    out = result.out
    names = sorted(p.name for p in (out / "runs").iterdir())
    assert names == [f"local_steps={k}__seed={s}" for k in (1, 5) for s in (0, 1, 2)]
    rows = {r["training.local_steps"]: r for r in read_table(out / "aggregate.csv")}
    assert set(rows) == {"1", "5"}
    for k in ("1", "5"):
        summaries = [
            json.loads((out / "runs" / f"local_steps={k}__seed={s}" / "summary.json").read_text())
            for s in (0, 1, 2)
        ]
        for field in ("final_accuracy", "energy_total_j", "sim_time_s"):
            values = np.array([s[field] for s in summaries])
            half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
            assert float(rows[k][f"{field}_mean"]) == pytest.approx(values.mean(), rel=1e-12)
            assert float(rows[k][f"{field}_ci95"]) == pytest.approx(half, rel=1e-9)
            assert int(rows[k][f"{field}_n"]) == 3
        assert {s["final_accuracy"] for s in summaries} != {summaries[0]["final_accuracy"]}
    # fronts over the means only: sweep.csv's per-seed rows carry their point's marks
    assert {r["pareto_energy"] for r in rows.values()} <= {"0", "1"}
    for row in read_table(out / "sweep.csv"):
        mean = rows[row["training.local_steps"]]
        assert (row["pareto_energy"], row["pareto_time"]) == (
            mean["pareto_energy"],
            mean["pareto_time"],
        )
    for name in ("accuracy_vs_round_mean.png", "pareto_energy_mean.png", "aggregate.json"):
        assert (out / name).exists()
    # the band's curve: per round, the mean of the seeds' accuracies
    dirs = [out / "runs" / f"local_steps=5__seed={s}" for s in (0, 1, 2)]
    curve = mean_curve(dirs, "accuracy")
    by_seed = [[r["accuracy"] for r in read_rounds(d / "rounds.csv")] for d in dirs]
    assert list(curve["round"]) == list(range(12))
    assert np.allclose(curve["mean"], np.mean(by_seed, axis=0), rtol=1e-12)
    assert np.all(curve["lo"] <= curve["mean"]) and np.all(curve["hi"] >= curve["mean"])
    # common random numbers: K changes the training, not who is placed or picked
    for s in (0, 1, 2):
        a, b = (
            read_table(out / "runs" / f"local_steps={k}__seed={s}" / "clients.csv") for k in (1, 5)
        )
        for column in ("distance_m", "mean_uplink_snr_db", "cpu_freq_hz", "selected"):
            assert [r[column] for r in a] == [r[column] for r in b], (s, column)


def test_seed_is_given_once(tmp_path):
    source = scenario_file(tmp_path)
    with pytest.raises(FedjouleError, match="seed is given by --seeds"):
        run_sweep(source, ["seed=1,2"], tmp_path / "o", [], seeds=[0, 1])
    with pytest.raises(FedjouleError, match="at least one --grid"):
        run_sweep(source, [], tmp_path / "o", [])


def test_plan_over_seeds_gives_rounds_with_their_ci_and_the_indistinguishable_k(tmp_path):
    source = scenario_file(tmp_path)
    data = yaml.safe_load(open(source))
    data["training"]["rounds"] = 60
    open(source, "w").write(yaml.safe_dump(data))
    options = PlanOptions(
        k_values=[1, 5],
        snr_db=[0.0, 30.0],
        bandwidth_hz=[1e6],
        seeds=[0, 1, 2],
        sweep=SweepOptions(workers=1, device="cpu"),
    )
    result = run_plan(source, tmp_path / "plan", [], options)
    per_seed = read_table(result.out / PLAN_SEEDS_CSV)
    assert len(per_seed) == 2 * 2 * 3
    plan = json.loads((result.out / "plan.json").read_text())
    assert plan["seeds"] == [0, 1, 2]
    for row in result.rows:
        mine = [
            r for r in per_seed if int(r["K"]) == row["K"] and float(r["snr_db"]) == row["snr_db"]
        ]
        assert len(mine) == 3
        assert row["reached_seeds"] == sum(int(r["reached"]) for r in mine)
        if not row["reached"]:
            continue
        rounds = np.array([float(r["rounds_to_target"]) for r in mine])
        energy = np.array([float(r["E_total_j"]) for r in mine])
        assert row["rounds_to_target_mean"] == pytest.approx(rounds.mean(), rel=1e-12)
        half = stats.t.ppf(0.975, 2) * rounds.std(ddof=1) / math.sqrt(3)
        assert row["rounds_to_target_ci95"] == pytest.approx(half, rel=1e-9)
        assert row["E_total_j"] == pytest.approx(energy.mean(), rel=1e-12)
    for best in plan["best"]:
        assert best["K_star"] in best["indistinguishable"]
        cell = [r for r in result.rows if r["snr_db"] == best["snr_db"] and r["reached"]]
        star = next(r for r in cell if r["K"] == best["K_star"])
        assert star["E_total_j"] == min(r["E_total_j"] for r in cell)
        for r in cell:  # the set is exactly the K within the CIs of K*'s mean energy
            within = abs(r["E_total_j"] - star["E_total_j"]) <= (
                r["E_total_j_ci95"] + star["E_total_j_ci95"]
            )
            assert (r["K"] in best["indistinguishable"]) == within
            assert r["indistinguishable"] == int(within)
