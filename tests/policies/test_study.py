"""benchmarks/policies_study.py's core on a tiny synthetic deployment: Jain's index, the
paired comparisons and the docs table come from the runs (docs/policies.md#study)."""

import argparse
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def study_module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import policies_study
    finally:
        sys.path.remove(str(BENCHMARKS))
    return policies_study


def test_jain_closed_forms(study_module):
    assert study_module.jain([3.0, 3.0, 3.0]) == 1.0
    assert study_module.jain([1.0, 0.0, 0.0, 0.0]) == 0.25
    assert study_module.jain([1.0, 2.0]) == pytest.approx(9 / 10)  # 3^2 / (2 x 5)
    assert study_module.jain([0.0, 0.0]) is None


def test_study_core_on_a_tiny_deployment(study_module, tmp_path):
    args = argparse.Namespace(
        seeds=2, size=4, rounds=2, hidden=4, target=0.3, threshold_db=0.0, low_db=-10.0,
        high_db=10.0, deadline_s=2.0, oort_t_s=1.0, max_steps=10, out=tmp_path,
    )  # fmt: skip
    tiny = {"dataset.name": "synthetic", "dataset.partition": "iid",
            "training.clients_per_round": 2}  # fmt: skip
    saved = study_module.study(args, ["random", "round-robin"], tiny)
    runs = saved["runs"]
    assert [(r["arm"], r["seed"]) for r in runs] == [
        ("random", 0), ("random", 1), ("round-robin", 0), ("round-robin", 1)]  # fmt: skip
    # round robin over 4 clients, 2 a round, 2 rounds: each selected exactly once
    assert [r["jain_participation"] for r in runs[2:]] == [1.0, 1.0]
    for r in runs:
        folder = tmp_path / f"{r['arm']}-seed{r['seed']}"
        assert (folder / "summary.json").exists()
        assert sum(r["energy_compute_j_per_class"].values()) == pytest.approx(
            r["energy_compute_j"], rel=1e-9)  # fmt: skip
    worst = saved["comparisons"]["round-robin vs random: worst_client_accuracy"]["diff"]
    diffs = [runs[2 + s]["worst_client_accuracy"] - runs[s]["worst_client_accuracy"]
             for s in (0, 1)]  # fmt: skip
    assert worst["n"] == 2 and worst["mean"] == pytest.approx(sum(diffs) / 2, abs=1e-12)
    table = study_module.markdown(saved)
    assert "| round-robin | " in table and "| random | " in table
