"""Capacity planning equals the hand calculation for one FDMA cell (fixed SNR, no fading,
equal devices): m clients sharing B end their uploads at down + K t_step + m S / (B se)."""

import math

import pytest

from fedjoule.planning.capacity import plan_capacity
from fedjoule.simulator.system_world import build_system_world
from tests.simulator.test_round_accounting import P_TX_W, SNR_DB, STEPS, UP_HZ, hand_costs
from tests.simulator.test_round_accounting import scenario as fixed_scenario

SE = math.log2(1 + 10 ** (SNR_DB / 10))  # bit/s/Hz


def setup(*extra):
    s = fixed_scenario("population.size=400", *extra)
    c = hand_costs(s)
    before_upload_s = c["bits"] / c["rate_down_bps"] + STEPS * c["step_s"]
    return s, build_system_world(s), c, before_upload_s


def test_largest_clients_per_round_meeting_the_deadline():
    s, world, c, before_s = setup()
    deadline_s = before_s + 0.37
    expected = math.floor((deadline_s - before_s) * UP_HZ * SE / c["bits"])
    plan = plan_capacity(s, world, deadline_s=deadline_s, rounds=3)
    assert 10 < expected < 400 and plan["answer"] == expected
    at = plan["at_answer"]
    assert at["round_time_s"] == pytest.approx(before_s + expected * c["bits"] / (UP_HZ * SE))
    assert at["rounds_per_hour"] == pytest.approx(3600 / at["round_time_s"])
    assert at["uplink_airtime_per_round_s"][0] == pytest.approx(
        expected**2 * c["bits"] / (UP_HZ * SE)  # m clients, each m S / (B se)
    )


def test_largest_clients_per_round_meeting_the_energy_budget():
    s, world, c, before_s = setup()
    fixed_j = 0.1 * c["bits"] / c["rate_down_bps"] + STEPS * c["step_j"]  # rx + compute
    budget_j = fixed_j + 0.05
    # E(m) = E_rx + K E_step + p m S / (B se) <= budget
    expected = math.floor((budget_j - fixed_j) * UP_HZ * SE / (P_TX_W * c["bits"]))
    plan = plan_capacity(s, world, energy_budget_j=budget_j, rounds=2)
    assert plan["answer"] == expected
    assert plan["at_answer"]["device_energy_j"] == pytest.approx(
        fixed_j + P_TX_W * expected * c["bits"] / (UP_HZ * SE)
    )


def test_smallest_bandwidth_meeting_the_deadline():
    s, world, c, before_s = setup("training.clients_per_round=20")
    deadline_s = before_s + 0.5
    expected_hz = 20 * c["bits"] / (SE * (deadline_s - before_s))  # B = m S / (se t)
    plan = plan_capacity(s, world, search="uplink_bandwidth_hz", deadline_s=deadline_s, rounds=2)
    assert expected_hz <= plan["answer"] <= expected_hz * 1.001


def test_cli_writes_the_answer_and_every_candidate(tmp_path):
    import csv
    import json

    from typer.testing import CliRunner

    from fedjoule.cli import app

    s, world, c, before_s = setup()
    deadline_s = before_s + 0.2
    expected = math.floor((deadline_s - before_s) * UP_HZ * SE / c["bits"])
    sets = [f"--set={x}" for x in ("population.size=400",)]
    args = ["capacity", "default-theory", *sets, f"--deadline-s={deadline_s}", "--rounds=2", "-q"]
    from tests.simulator.test_round_accounting import FIXED

    args += [f"--set={x}" for x in FIXED if not x.startswith("population.size")]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "capacity.json").read_text())
    assert plan["answer"] == expected
    with (tmp_path / "capacity.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(plan["evaluations"])
    assert any(int(r["clients_per_round"]) == expected and r["meets"] == "True" for r in rows)
    assert not any(int(r["clients_per_round"]) == expected + 1 and r["meets"] == "True"
                   for r in rows)  # fmt: skip
    # no `None` printed: the budget not given is said so (issue 22: `energy budget None J`)
    assert "None" not in result.output
    said = " ".join(result.output.split())  # (rich wraps long lines)
    assert f"= {expected} meets deadline {deadline_s:.6g} s, no energy budget" in said


def test_limits_are_printed_without_none():
    from fedjoule.planning.capacity_report import limits_text, number, whole

    assert limits_text(0.5, None) == "deadline 0.5 s, no energy budget"
    assert limits_text(None, 2.0) == "no deadline, energy budget 2 J"
    assert limits_text(None, None) == "no deadline, no energy budget"
    assert (number(None), whole(None), whole(7)) == ("—", "—", "7")


def test_bad_search_is_a_clear_error():
    s, world, _, _ = setup()
    from fedjoule.errors import FedjouleError

    with pytest.raises(FedjouleError, match="allowed: clients_per_round, uplink_bandwidth_hz"):
        plan_capacity(s, world, search="bandwidth", deadline_s=1.0)
    with pytest.raises(FedjouleError, match="needs a limit"):
        plan_capacity(s, world)


# ------------------------------------------------------------------ common random numbers,
# the statistic, the scan and seeds, on a small random world (Rayleigh fading, 3GPP macro
# path loss, shadowing, Bernoulli availability: the default scenario at 24 devices)
SMALL = ["population.size=24", "round.min_clients=1", "training.clients_per_round=4"]


def small(*extra):
    from fedjoule.scenarios.loading import load_scenario

    return load_scenario("default-theory", [*SMALL, *extra])


def play(engine, rounds: int) -> list:
    """Each round's clients (ClientsOfRound) of a capacity engine."""
    out = []
    engine.run(rounds, lambda row: out.append(engine.last_clients))
    return out


def test_candidates_share_positions_fading_availability_and_selection():
    import dataclasses

    import numpy as np

    from fedjoule.planning.capacity import CommonDrawsEngine, variant

    s = small()
    world = build_system_world(s)
    rounds = {}
    for m in (3, 8):
        engine = CommonDrawsEngine(dataclasses.replace(world, scenario=variant(s, m)))
        rounds[m] = play(engine, 30)
    shared = 0
    for few, many in zip(rounds[3], rounds[8], strict=True):
        assert len(few.client) == 3 and len(many.client) == 8  # 24 x 0.9 online >> 8
        assert set(few.client) <= set(many.client)  # selection nested in m
        i = np.searchsorted(many.client, few.client)
        # the downlink is not shared: its airtime depends on the client's distance,
        # shadowing and this round's fade only, so it is equal where the draws are
        np.testing.assert_array_equal(few.downlink_airtime_s, many.downlink_airtime_s[i])
        np.testing.assert_array_equal(few.compute_time_s, many.compute_time_s[i])
        shared += len(few.client)
    assert shared == 90
    # ... and the draws are not trivial: airtimes differ between clients and rounds
    airtimes = np.concatenate([c.downlink_airtime_s for c in rounds[8]])
    assert airtimes.std() > 0.05 * airtimes.mean()
    # the uplink (shared: B / m each in FDMA) is slower for every common client at m = 8
    for few, many in zip(rounds[3], rounds[8], strict=True):
        i = np.searchsorted(many.client, few.client)
        assert (many.uplink_airtime_s[i] > few.uplink_airtime_s).all()


def test_nested_selection_is_uniform():
    import numpy as np

    from fedjoule.planning.capacity import CommonDrawsEngine, variant

    s = small("availability.kind=always")
    engine = CommonDrawsEngine(build_system_world(variant(s, 5)))
    n, rounds = 24, 3000
    counts = np.zeros(n)
    for r in range(rounds):
        chosen = engine.select(np.arange(n), r)
        assert len(chosen) == 5 == len(set(chosen))
        counts[chosen] += 1
    expected = rounds * 5 / n  # 625 each; binomial sd about 22
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


def test_default_rounds_put_20_observations_above_the_quantile():
    from fedjoule.planning.capacity import default_rounds

    assert default_rounds(0.95, "rounds") == 400  # 0.05 x 400 rounds = 20
    assert default_rounds(0.9, "rounds") == 200
    assert default_rounds(0.99, "rounds") == 2000
    assert default_rounds(1.0, "rounds") == 400  # the worst case: as many as 0.95
    assert default_rounds(0.95, "clients", 1) == 400
    assert default_rounds(0.95, "clients", 8) == 50  # 0.05 x 8 x 50 client-rounds = 20
    assert default_rounds(0.95, "clients", 7) == 58  # ceil(57.14)
    assert default_rounds(0.95, "clients", 100) == 20  # at least 20 rounds


def test_default_rounds_per_candidate_in_the_plan():
    from fedjoule.planning.capacity import plan_capacity

    s = small("availability.kind=always")  # every selected client arrives
    plan = plan_capacity(s, build_system_world(s), search="none", quantile=0.9)
    at = plan["scenario"]
    assert plan["rounds"] is None and at["rounds"] == 50  # 20 / (0.1 x 4)
    assert at["arrivals"] == 200 and at["tail_observations"] == 20


def test_statistic_is_monotone_in_m_around_the_answer(tmp_path):
    import csv
    import json

    from typer.testing import CliRunner

    from fedjoule.cli import app
    from fedjoule.planning.capacity import evaluate, variant

    s = small()
    # the deadline: just above m = 6's 0.9-quantile round time, so 6 meets
    at_6 = evaluate(build_system_world(s), variant(s, 6), 40, 0.9)["round_time_s"]
    deadline_s = at_6 * 1.0001
    args = ["capacity", "default-theory", *(f"--set={x}" for x in SMALL), "--over=rounds"]
    args += [f"--deadline-s={deadline_s}", "--rounds=40", "--quantile=0.9", "-q"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "capacity.json").read_text())
    with (tmp_path / "capacity.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items() if k != "meets"} for r in csv.DictReader(f)]
    m = [int(r["clients_per_round"]) for r in rows]
    assert m == list(range(1, len(m) + 1))  # 24 devices: every m, from 1 up
    answer = plan["answer"]
    assert answer >= 6 and answer + 1 in m  # the scan went past the answer
    times = [r["round_time_s"] for r in rows]
    # common draws: the round time grows with m (where the answer relies on it, and here
    # everywhere: same online clients, nested selection, same fades)
    assert all(a <= b for a, b in zip(times[:-1], times[1:], strict=True))
    assert times[answer - 1] <= deadline_s < times[answer]
    assert plan["non_monotone"] == [] and plan["answers"][0]["non_monotone"] == []
    assert plan["rounds"] == 40 and {r["tail_observations"] for r in rows} == {4.0}
    assert "not monotone" not in result.output


def test_non_monotone_candidates_are_reported():
    from fedjoule.planning.capacity import answer_of, non_monotone

    meets = {1: True, 2: False, 3: False, 4: True, 5: True, 6: False, 8: True, 9: False}
    figures = {m: {"meets": v} for m, v in meets.items()}
    assert answer_of(figures, "clients_per_round") == 8  # the largest m meeting
    assert non_monotone(figures, "clients_per_round", 8) == [
        {"from": 2, "to": 3}, {"from": 6, "to": 6}
    ]  # fmt: skip
    bands = {1e3: False, 1e4: True, 1e5: False, 1e6: True, 1e7: True}
    figures = {b: {"meets": v} for b, v in bands.items()}
    assert answer_of(figures, "uplink_bandwidth_hz") == 1e4  # the smallest B meeting
    assert non_monotone(figures, "uplink_bandwidth_hz", 1e4) == [{"from": 1e5, "to": 1e5}]


def test_seeds_give_the_answer_per_seed_and_per_candidate_mean_and_ci(tmp_path):
    import csv
    import json

    import numpy as np
    from scipy import stats
    from typer.testing import CliRunner

    from fedjoule.cli import app

    common = ["capacity", "default-theory", *(f"--set={x}" for x in SMALL), "--deadline-s=0.05"]
    common += ["--set=population.size=16", "--rounds=12", "--quantile=0.9", "--over=rounds", "-q"]
    result = CliRunner().invoke(app, [*common, "--seeds=3", "--out", str(tmp_path / "all")])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "all" / "capacity.json").read_text())
    assert plan["seeds"] == [0, 1, 2]
    for seed in (0, 1, 2):  # each seed is the scenario with that seed, planned alone
        out = tmp_path / f"s{seed}"
        alone = CliRunner().invoke(app, [*common, f"--set=seed={seed}", "--out", str(out)])
        assert alone.exit_code == 0, alone.output
        single = json.loads((out / "capacity.json").read_text())
        assert plan["answers"][seed]["answer"] == single["answer"]
        mine = {f["clients_per_round"]: f for f in plan["evaluations"] if f["seed"] == seed}
        for f in single["evaluations"]:
            assert mine[f["clients_per_round"]]["round_time_s"] == f["round_time_s"]
    answers = [a["answer"] for a in plan["answers"] if a["answer"] is not None]
    assert len(answers) == plan["answer_n"] == 3 and len(set(answers)) > 1  # other worlds
    assert plan["answer_mean"] == pytest.approx(np.mean(answers))
    assert plan["answer_std"] == pytest.approx(np.std(answers, ddof=1))
    assert plan["answer_ci95"] == pytest.approx(
        stats.t.ppf(0.975, len(answers) - 1) * np.std(answers, ddof=1) / np.sqrt(len(answers))
    )
    assert "95 % CI" in result.output
    with (tmp_path / "all" / "capacity.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(plan["candidates"]) >= 4
    for row in rows:
        m = int(row["clients_per_round"])
        per_seed = [f["round_time_s"] for f in plan["evaluations"] if f["clients_per_round"] == m]
        assert len(per_seed) == 3 and row["seeds"] == "3"  # every candidate on every seed
        assert float(row["round_time_s_mean"]) == pytest.approx(np.mean(per_seed))
        assert float(row["round_time_s_ci95"]) == pytest.approx(
            stats.t.ppf(0.975, 2) * np.std(per_seed, ddof=1) / np.sqrt(3)
        )
        assert (row["meets"] == "True") == (float(row["round_time_s_mean"]) <= 0.05)
    # the answer on the seed-mean statistic: the largest m whose mean meets the deadline
    means = {int(r["clients_per_round"]): float(r["round_time_s_mean"]) for r in rows}
    assert plan["answer"] == max(m for m, t in means.items() if t <= 0.05)


def test_a_class_that_never_takes_part_is_written_as_null_not_nan(tmp_path):
    """0 J / 0 participations was NaN and crashed writing capacity.json."""
    import json

    from typer.testing import CliRunner

    from fedjoule.cli import app

    args = ["capacity", "default-theory", *(f"--set={x}" for x in SMALL)]
    args += ["--set=training.clients_per_round=1", "--set=seed=1", "--search=none"]
    args += ["--rounds=2", "-q", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "capacity.json").read_text())
    per_class = plan["scenario"]["per_class"]
    never = [name for name, f in per_class.items() if f["energy_per_participation_j"] is None]
    assert never == ["iot"]
    assert per_class["iot"]["battery_drain_j_per_day"] == 0.0
    assert per_class["phone"]["energy_per_participation_j"] > 0


def test_the_seeds_answer_interval_is_cut_at_zero():
    """capacity's answer over seeds: `± ci` inside the physical range, else cut at 0
    (seeds of the tutorial: 120, 140 and 522 kHz, n = 3, t = 4.303)."""
    import statistics

    from fedjoule.planning.capacity_report import answer_interval

    answers = [120e3, 140e3, 522e3]
    mean, std = statistics.mean(answers), statistics.stdev(answers)
    ci = 4.302652729911275 * std / 3**0.5
    assert mean - ci < 0  # the case the tutorial met
    shown = answer_interval({"answer_mean": mean, "answer_ci95": ci})
    assert shown == f"[0, {mean + ci:.4g}] (mean ± {ci:.4g} cut at 0)"
    assert answer_interval({"answer_mean": 5.0, "answer_ci95": 1.0}) == "± 1"


@pytest.mark.parametrize("m, noticed", [(4, True), (24, False)])
def test_search_none_says_its_selection_keys_are_its_own(tmp_path, m, noticed):
    """capacity picks a subset of the clients with its own keys (nested in m), so its rounds
    are not run --no-train's: `--search none` says so; with every client selected, silent."""
    from typer.testing import CliRunner

    from fedjoule.cli import app

    args = ["capacity", "default-theory", *(f"--set={x}" for x in SMALL)]
    args += [f"--set=training.clients_per_round={m}", "--search=none", "--rounds=2"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    notice = (
        "notice: capacity selects with its own keys (nested in m, "
        "docs/system-engine.md#capacity): the same law as run --no-train's selection, "
        "other clients each round"
    )
    assert (notice in " ".join(result.output.split())) is noticed
