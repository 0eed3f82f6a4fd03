"""A policy in every command (issue 29 item 6, docs/policies.md#policies-in-every-command):
a sweep over selectors equals its single runs (API and CLI), --seeds, report, tracking;
plan repricing with a policy (and the policies that block it); capacity playing the policy
as run --no-train does; and every bad policy field an exit 2 with one error line."""

import csv
import json

import numpy as np
import pytest
import yaml

from fedjoule import api
from fedjoule.cli import invoke
from fedjoule.planning.capacity_report import selection_notice
from fedjoule.planning.plan import reprice_blockers
from fedjoule.scenarios.loading import load_scenario

SMALL = {
    "dataset": {"name": "synthetic", "synthetic": {"avg_samples": 40, "test_samples": 40}},
    "training": {"rounds": 3, "clients_per_round": 3},
    "population": {"size": 8},
}
FIGURES = ("final_accuracy", "energy_total_j", "energy_tx_j", "sim_time_s", "selected_total")


def scenario_file(tmp_path, **sections) -> str:
    doc = {name: dict(values) for name, values in SMALL.items()}
    for name, values in sections.items():
        doc[name] = {**doc.get(name, {}), **values}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summary(folder) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_a_seeded_sweep_over_selectors_equals_its_single_runs(tmp_path):
    """sweep --grid policy.select=... --seeds: a row is the single run of its selector and
    seed (the API with overrides, tracked: the policy's fields are its parameters); report
    over the sweep names the selector."""
    scenario = scenario_file(tmp_path, round={"deadline_s": 3.0})
    selectors = ["random", "round-robin"]
    swept = api.sweep(
        scenario, {"policy.select": selectors}, tmp_path / "sweep", seeds=[0, 1],
        overrides={"policy.steps": "deadline"}, workers=1, quiet=True,
    )  # fmt: skip
    table = rows(swept.folder / "sweep.csv")
    assert [(row["policy.select"], row["seed"]) for row in table] == [
        (s, seed) for s in selectors for seed in ("0", "1")]  # fmt: skip
    single = api.run(
        scenario, tmp_path / "single", track="csv", quiet=True,
        overrides={"policy.select": "round-robin", "policy.steps": "deadline", "seed": 1},
    )  # fmt: skip
    figures = summary(single.folder)
    for name in FIGURES:
        assert float(table[3][name]) == pytest.approx(figures[name], rel=1e-12), name
    (params,) = single.folder.glob("tracking/csv/*/params.csv")
    logged = {p["name"]: p["value"] for p in rows(params)}
    assert (logged["policy.select"], logged["policy.steps"]) == ("round-robin", "deadline")
    assert logged["policy.max_steps"] == ""  # null
    # round-robin picks other clients than the draw: the rows differ
    assert table[0]["energy_tx_j"] != table[2]["energy_tx_j"]
    assert invoke(["report", str(swept.folder), "--out", str(tmp_path / "rep")]) == 0
    report = rows(tmp_path / "rep" / "report.csv")
    assert [row["policy.select"] for row in report] == [row["policy.select"] for row in table]


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        ({"select": "round-robin"}, None),
        ({"select": "age"}, None),
        ({"select": "power-of-choice", "bandwidth": "equal-finish"}, None),
        ({"select": "age", "csi": "last"}, "policy.csi=last: the policy decides from"),
        ({"select": "oort", "oort_round_time_s": 5.0}, "measured round times"),
        ({"select": "battery"}, "reported battery levels"),
        ({"steps": "deadline"}, "policy.steps=deadline: each client's local steps"),
    ],
)  # fmt: skip
def test_plan_blocks_repricing_for_a_policy_that_reads_the_channel(tmp_path, policy, words):
    round_ = {"deadline_s": 1.0} if policy.get("steps") == "deadline" else {}
    scenario = load_scenario(scenario_file(tmp_path, policy=policy, round=round_))
    reasons = [r for r in reprice_blockers(scenario) if r.startswith("policy")]
    if words is None:
        assert reasons == []
    else:
        assert len(reasons) == 1 and words in reasons[0], reasons


def test_plan_reprices_a_policy_as_its_per_cell_runs(tmp_path):
    """power-of-choice decides from losses (not the channel) and equal-finish's fixed
    bands are rerun on each cell: the repriced grid equals the per-cell learning runs."""
    scenario = scenario_file(
        tmp_path, policy={"select": "power-of-choice", "bandwidth": "equal-finish"},
        training={"target_value": 0.3},
    )  # fmt: skip
    grid = {"k": [2], "snr_db": [5, 20], "bandwidth_hz": [1e6], "workers": 1, "quiet": True}
    repriced = api.plan(scenario, tmp_path / "reprice", **grid)
    per_cell = api.plan(scenario, tmp_path / "cells", per_cell=True, **grid)
    assert (repriced.method, per_cell.method) == ("reprice", "per-cell")
    a, b = rows(repriced.folder / "plan.csv"), rows(per_cell.folder / "plan.csv")
    assert [r["priced_by"] for r in a] == ["reprice"] * 2
    for x, y in zip(a, b, strict=True):
        assert x["reached"] == y["reached"] == "1"
        for name in ("E_total_j", "E_tx_j", "E_compute_j", "time_to_target_s"):
            assert float(x[name]) == pytest.approx(float(y[name]), rel=1e-9), name
    assert float(a[0]["E_tx_j"]) > float(a[1]["E_tx_j"])  # 5 dB costs more than 20 dB


def capacity_and_run(tmp_path, name: str, overrides: dict) -> tuple[dict, list[dict]]:
    """capacity --search none over 3 rounds, and run --no-train of the same 3 rounds."""
    scenario = scenario_file(tmp_path)
    cap = api.capacity(
        scenario, tmp_path / f"cap-{name}", overrides=overrides, search="none", rounds=3,
        quiet=True,
    )  # fmt: skip
    (figures,) = json.loads((cap.folder / "capacity.json").read_text())["evaluations"]
    sets = [f"--set={key}={value}" for key, value in overrides.items()]
    out = tmp_path / f"run-{name}"
    assert invoke(["run", scenario, "--no-train", "-q", "--out", str(out), *sets]) == 0
    return figures, rows(out / "rounds.csv")


GEOMETRY = {"channel.path_loss": "macro-3gpp", "population.size": 20,
            "training.clients_per_round": 4}  # fmt: skip


def test_capacity_plays_the_policy_as_run_no_train(tmp_path):
    """A selector other than random replaces capacity's own selection keys, and the
    allocator its shares: the figures are run --no-train's, round for round."""
    policy = {"policy.select": "round-robin", "policy.bandwidth": "equal-finish"}
    figures, played = capacity_and_run(tmp_path, "rr", {**GEOMETRY, **policy})
    energy = [float(row["energy_total_j"]) for row in played]
    duration = [float(r["sim_time_end_s"]) - float(r["sim_time_start_s"]) for r in played]
    assert figures["energy_per_round_j"] == pytest.approx(np.mean(energy), rel=1e-12)
    assert figures["mean_round_time_s"] == pytest.approx(np.mean(duration), rel=1e-12)
    # so --search none prints no notice that its selection keys are its own
    sets = [f"{key}={value}" for key, value in GEOMETRY.items()]
    scenario = load_scenario(scenario_file(tmp_path), sets)
    assert selection_notice(scenario, {"search": "none"}) is not None  # select=random
    with_policy = load_scenario(scenario_file(tmp_path), [*sets, "policy.select=round-robin"])
    assert selection_notice(with_policy, {"search": "none"}) is None


def test_capacity_aims_the_deadline_allocators_at_the_scenarios_deadline(tmp_path):
    """Capacity's rounds run without a deadline, yet steps=deadline fits the steps to
    round.deadline_s: the compute energy per round is run --no-train's, and below the
    scenario's fixed steps."""
    common = {**GEOMETRY, "policy.select": "age", "training.local_steps": 500,
              "round.deadline_s": 0.0035}  # fmt: skip
    fitted, played = capacity_and_run(tmp_path, "fit", {**common, "policy.steps": "deadline"})
    fixed, _ = capacity_and_run(tmp_path, "fixed", common)
    compute_j = fitted["energy_per_round_by_kind_j"]["energy_compute_j"]
    run_j = np.mean([float(row["energy_compute_j"]) for row in played])
    assert compute_j == pytest.approx(run_j, rel=1e-12)
    assert compute_j < 0.99 * fixed["energy_per_round_by_kind_j"]["energy_compute_j"]


def test_capacity_refuses_a_loss_driven_selector(tmp_path, capsys):
    scenario = scenario_file(tmp_path)
    args = ["capacity", scenario, "--search", "none", "--rounds", "2", "-q"]
    assert invoke([*args, "--set", "policy.select=power-of-choice"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert "policy.select=power-of-choice ranks clients by the training loss" in err


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("policy.select=bogus", ("policy.select", "'bogus'", "'round-robin'")),
        ("policy.select=3", ("policy.select", "got 3", "'random'")),
        ("policy=[1,2]", ("'policy'", "a valid dictionary", "a list of 2 items")),
        ("policy=7", ("'policy'", "a valid dictionary", "got 7")),
        ("policy.max_steps=nan", ("policy.max_steps", "valid integer", "'nan'")),
        ("policy.max_steps=inf", ("policy.max_steps", "valid integer", "'inf'")),
        ("policy.max_steps=1e300", ("policy.max_steps", "whole number", "1e+300")),
        ("policy.max_steps=0", ("policy.max_steps", "greater than or equal to 1", "got 0")),
        ("policy.max_steps=1000001", ("policy.max_steps", "less than or equal to 100000",)),
        ("policy.choice_d=-1", ("policy.choice_d", "greater than or equal to 1", "got -1")),
        ("policy.choice_d=2.5", ("policy.choice_d", "whole number", "2.5")),
        ("policy.oort_alpha=nan", ("policy.oort_alpha", "valid number", "'nan'")),
        ("policy.oort_alpha=inf", ("policy.oort_alpha", "valid number", "'inf'")),
        ("policy.oort_alpha=1e9", ("policy.oort_alpha", "less than or equal to 100",)),
        ("policy.oort_round_time_s=0", ("policy.oort_round_time_s", "greater than 0",)),
        ("policy.oort_round_time_s=-inf", ("policy.oort_round_time_s", "valid number",)),
        ("policy.csi=perfect", ("policy.csi", "'none', 'last' or 'oracle'", "'perfect'")),
        ("policy.csi=[]", ("policy.csi", "'none', 'last' or 'oracle'", "a list of 0 items")),
        ("policy.battery_weighted=maybe", ("policy.battery_weighted", "valid boolean",)),
        ("policy.bandwidth=none", ("policy.bandwidth", "'equal-finish'", "'none'")),
        ("policy.frequency={}", ("policy.frequency", "'fixed' or 'deadline'", "mapping")),
        ("policy.steps=1", ("policy.steps", "'fixed' or 'deadline'", "got 1")),
        ("policy.extra=1", ("policy.extra", "unknown field 'extra'", "allowed here")),
        ("policy.select=best-channel", ("policy.csi", "set csi to last", "not none")),
        ("policy.choice_d=3", ("policy.choice_d", "only used with select=power-of-choice",)),
        ("policy.steps=deadline", ("policy.steps", "needs round.deadline_s", "null")),
    ],
)  # fmt: skip
def test_a_bad_policy_field_is_exit_2_with_one_error_line(tmp_path, capsys, setting, words):
    """validate and run answer the same: exit 2, one error naming field, value and what
    is allowed, no traceback, no folder."""
    scenario = scenario_file(tmp_path)
    out = tmp_path / "out"
    for args in (["validate", scenario], ["run", scenario, "--no-train", "--out", str(out)]):
        assert invoke([*args, "--set", setting]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("error:") == 1, err
        assert "Traceback" not in err
        for word in words:
            assert word in err, (word, err)
    assert not out.exists()
