"""Run-time hardening: divergence stops the run in its round and is reported, NaN/inf are
written as such (never as an empty cell or into summary.json), Bernoulli participation
keeps every client it draws, and no loop runs unbounded on extreme settings."""

import csv
import json
import math

import numpy as np
import pytest

from fedjoule import rng
from fedjoule.devices.availability import DAY_S, Diurnal, MarkovOnOff
from fedjoule.devices.vector_availability import DiurnalVector, MarkovVector
from fedjoule.errors import FedjouleError, RunDiverged
from fedjoule.report.results import ROUND_COLUMNS, RoundsFile, read_rounds
from fedjoule.report.table import cell
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator import round_rules
from fedjoule.simulator.engine import (
    Simulation,
    arrivals_kept,
    bernoulli_participants,
    select_clients,
    selection_size,
)
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from fedjoule.simulator.world import build_world


def play(scenario, rounds=None):
    """A Simulation on the CPU played for `rounds` (default: all); its rows."""
    sim = Simulation(build_world(scenario, device="cpu"))
    rows = []
    sim.run(rounds or scenario.training.rounds, rows.append)
    return sim, rows


def finite_or_none(summary: dict) -> bool:
    return all(v is None or not isinstance(v, float) or math.isfinite(v) for v in summary.values())


# ---------------------------------------------------------------------- divergence
def test_lr_1e38_diverges_in_round_0_and_stops_there():
    s = load_scenario("default-theory", ["training.lr=1e38"])
    sim, rows = play(s)
    assert len(rows) == 1  # 100 rounds asked; none played after the diverged one
    assert rows[0]["diverged"] == 1 and math.isnan(rows[0]["loss"])
    p = sim.progress
    assert p.diverged_at_round == 0 and p.next_round == 1 and sim.finished()
    summary = sim.summary()
    assert summary["diverged_at_round"] == 0 and summary["rounds_completed"] == 1
    reason = summary["diverged_reason"]
    assert "round 0" in reason and "training.lr = 1e+38" in reason
    assert "clip_grad_norm" in reason
    assert summary["final_loss"] is None and summary["best_accuracy"] is None
    assert finite_or_none(summary)
    json.dumps(summary, allow_nan=False)  # what write_json does
    # the running summary holds numbers or None only
    assert all(v is None or math.isfinite(v) for v in p.metrics.values())
    for name in ("sim_time_s", "wall_time_s", "cumulative_energy_j"):
        assert math.isfinite(getattr(p, name))


def test_a_loss_that_overflows_later_stops_the_run_at_that_round():
    # an MLP at lr 100: the parameters grow each round and the test loss is inf in round 3
    s = load_scenario("default-theory", ["model.name=mlp", "model.hidden=[20]", "training.lr=100"])
    sim, rows = play(s)
    assert [r["diverged"] for r in rows] == [0, 0, 0, 1]
    assert all(math.isfinite(r["loss"]) for r in rows[:3]) and rows[3]["loss"] == math.inf
    assert sim.progress.diverged_at_round == 3
    assert sim.summary()["diverged_reason"].startswith("the test loss became NaN/inf at round 3")
    # the best accuracy counts the rounds before the divergence only
    assert sim.summary()["best_accuracy"] == max(r["accuracy"] for r in rows[:3])


def with_training(scenario, **fields):
    """The scenario with training fields set without validation (values it may refuse)."""
    training = scenario.training.model_copy(update=fields)
    return scenario.model_copy(update={"training": training})


def test_an_lr_past_the_float_range_diverges_instead_of_crashing():
    s = with_training(load_scenario("default-theory", ["training.rounds=3"]), lr=1e300)
    sim, rows = play(s)
    assert len(rows) == 1 and rows[0]["diverged"] == 1 and rows[0]["lr"] == 1e300
    assert "training.lr = 1e+300" in sim.summary()["diverged_reason"]


@pytest.mark.parametrize("algorithm", ["drfa", "drdm"])
def test_a_diverged_model_skips_the_loss_probe(algorithm):
    s = load_scenario("default-theory", ["training.lr=1e38", f"algorithm.name={algorithm}"])
    sim, rows = play(s)
    assert len(rows) == 1 and rows[0]["diverged"] == 1 and "probed" not in rows[0]
    assert sim.summary()["diverged_at_round"] == 0


def test_a_diverged_round_is_evaluated_between_evaluations():
    s = load_scenario("default-theory", ["training.lr=1e38", "training.eval_every=5"])
    _, rows = play(s)
    assert len(rows) == 1 and rows[0]["diverged"] == 1 and "accuracy" in rows[0]


def test_diverged_run_files_mark_nan_and_keep_json_finite(tmp_path):
    s = load_scenario("default-theory", ["model.name=mlp", "model.hidden=[20]", "training.lr=100"])
    try:
        _, summary = run_scenario(s, tmp_path, device="cpu")
    except RunDiverged as diverged:  # the lead's run.py raises after writing the files
        assert diverged.exit_code == 3
        summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["diverged_at_round"] == 3
    json.loads((tmp_path / "summary.json").read_text(), parse_constant=pytest.fail)
    with (tmp_path / "rounds.csv").open() as f:
        raw = list(csv.DictReader(f))
    assert [r["diverged"] for r in raw] == ["0", "0", "0", "1"]
    assert raw[3]["loss"] == "inf" and raw[2]["loss"] not in ("", "nan", "inf")
    rows = read_rounds(tmp_path / "rounds.csv")
    assert rows[3]["loss"] == math.inf and rows[3]["diverged"] == 1.0
    assert (tmp_path / "accuracy_vs_round.png").exists()  # a diverged run is finished


def test_not_evaluated_and_nan_are_different_cells(tmp_path):
    assert [cell(v) for v in (None, math.nan, math.inf, -math.inf, 0.1, 3)] == [
        "", "nan", "inf", "-inf", "0.1", "3",
    ]  # fmt: skip
    assert cell(np.float32("nan")) == "nan" and cell(np.float64(2.5)) == "2.5"
    rounds = RoundsFile(tmp_path / "rounds.csv")
    rounds.append({"round": 0, "loss": None, "accuracy": None, "diverged": 0})
    rounds.append({"round": 1, "loss": math.nan, "accuracy": 0.25, "diverged": 1})
    with (tmp_path / "rounds.csv").open() as f:
        raw = list(csv.DictReader(f))
    assert list(raw[0]) == ROUND_COLUMNS and "diverged" in ROUND_COLUMNS
    assert (raw[0]["loss"], raw[1]["loss"]) == ("", "nan")
    default = read_rounds(tmp_path / "rounds.csv")
    assert math.isnan(default[0]["loss"]) and math.isnan(default[1]["loss"])
    exact = read_rounds(tmp_path / "rounds.csv", missing=None)
    assert exact[0]["loss"] is None and math.isnan(exact[1]["loss"])
    assert exact[1]["accuracy"] == 0.25 and exact[0]["selected"] is None


def test_a_finite_run_has_no_divergence():
    s = load_scenario("default-theory", ["training.rounds=3"])
    sim, rows = play(s)
    assert [r["diverged"] for r in rows] == [0, 0, 0]
    summary = sim.summary()
    assert summary["diverged_at_round"] is None and summary["diverged_reason"] is None


# ---------------------------------------------------------------------- bernoulli
def test_bernoulli_participation_keeps_every_drawn_client():
    # FedDC's setting: each of 100 clients with probability 0.15 (more than the default 10)
    s = load_scenario(
        "mnist-dirichlet",
        [
            "training.participation=bernoulli",
            "training.participation_prob=0.15",
            "training.local_steps=2",  # fewer steps: quicker, the draws are the same
            "training.rounds=4",
        ],
    )
    _, rows = play(s)
    drawn = [int((rng.stream(s.seed, "selection", r).random(100) < 0.15).sum()) for r in range(4)]
    assert drawn == [13, 18, 15, 15]
    assert [r["selected"] for r in rows] == drawn
    assert [r["arrived"] for r in rows] == drawn  # no deadline: all arrive
    assert [r["dropped_overcommit"] for r in rows] == [0, 0, 0, 0]


def test_bernoulli_with_overcommit_keeps_the_first_clients_per_round():
    s = load_scenario(
        "default-theory",
        [
            "training.participation=bernoulli",
            "training.participation_prob=0.3",
            "round.overcommit=1.5",
            "round.deadline_s=null",
            "training.rounds=2",
        ],
    )
    assert arrivals_kept(s, 27) == 10
    _, rows = play(s)
    for row in rows:
        assert row["selected"] > 10 and row["arrived"] == 10
        assert row["dropped_overcommit"] == row["selected"] - 10


@pytest.mark.parametrize("engine_kind", ["numpy", "simpy"])
def test_system_engines_keep_every_bernoulli_client(engine_kind):
    s = load_scenario(
        "default-theory",
        [
            "training.participation=bernoulli",
            "training.participation_prob=0.3",
            "round.deadline_s=null",
            "availability.kind=always",
            "training.rounds=3",
        ],
    )
    world = build_system_world(s)
    system = SystemEngine(world) if engine_kind == "numpy" else SimpySystemSimulation(world)
    rows = []
    system.run(3, rows.append)
    drawn = [int((rng.stream(0, "selection", r).random(100) < 0.3).sum()) for r in range(3)]
    assert [r["selected"] for r in rows] == [r["arrived"] for r in rows] == drawn
    assert min(drawn) > 10 and all(r["dropped_overcommit"] == 0 for r in rows)


def test_bernoulli_redraws_are_unchanged_for_usual_settings():
    """The bounded redraw gives the unbounded loop's draws (what earlier versions did)."""

    def unbounded(candidates, p, gen):
        while True:
            chosen = candidates[gen.random(len(candidates)) < p]
            if len(chosen):
                return chosen

    for n, p in ((100, 0.1), (10, 0.01), (3, 0.05), (1, 0.2)):
        candidates = np.arange(n) * 2
        for r in range(50):
            a = bernoulli_participants(candidates, p, rng.stream(0, "selection", r))
            b = unbounded(candidates, p, rng.stream(0, "selection", r))
            assert np.array_equal(a, b)


@pytest.mark.timeout(60)  # a hang guard (it ends in milliseconds), not a speed test
def test_tiny_participation_probability_ends_with_one_client():
    # 1e-12 is below what validation accepts: the engine must end anyway
    s = load_scenario("default-theory", ["training.participation=bernoulli"])
    s = with_training(s, participation_prob=1e-12)
    chosen = [select_clients(np.arange(100), s, r) for r in range(5)]
    assert [len(c) for c in chosen] == [1, 1, 1, 1, 1]
    again = [select_clients(np.arange(100), s, r) for r in range(5)]
    assert all(np.array_equal(a, b) for a, b in zip(chosen, again, strict=True))


def test_bounded_bernoulli_samples_the_conditioned_law(monkeypatch):
    """Past the redraw bound: P(set S) = p^|S| q^(n-|S|) / (1 - q^n), as the loop's law."""
    monkeypatch.setattr(round_rules, "BERNOULLI_REDRAWS", 1)
    n, p, draws = 3, 0.4, 40_000
    gen = np.random.default_rng(5)
    counts: dict[tuple, int] = {}
    for _ in range(draws):
        key = tuple(bernoulli_participants(np.arange(n), p, gen).tolist())
        counts[key] = counts.get(key, 0) + 1
    q = 1 - p
    for size in (1, 2, 3):
        law = p**size * q ** (n - size) / (1 - q**n)
        for subset, seen in counts.items():
            if len(subset) == size:
                assert seen / draws == pytest.approx(law, abs=0.01)
    assert len(counts) == 7  # every non-empty subset of 3


# ---------------------------------------------------------------------- bounded loops
def test_infinite_overcommit_selects_every_candidate():
    assert selection_size(10, math.inf, 37) == 37
    assert selection_size(10, 1e300, 37) == 37
    assert selection_size(10, 1.3, 37) == 13 and selection_size(10, 1.0, 5) == 5


def day_by_day_s(t0: float, t1: float, shift: float, windows) -> float:
    """The overlap of [t0, t1] with each day's windows, summed day by day (a reference)."""
    total = 0.0
    for day in range(math.floor((t0 - shift) / DAY_S), math.floor((t1 - shift) / DAY_S) + 1):
        base = shift + day * DAY_S
        for lo, hi in windows:
            total += max(0.0, min(t1, base + hi) - max(t0, base + lo))
    return total


@pytest.mark.timeout(60)  # a loop over 1e300 s of days would never end
def test_diurnal_charging_over_huge_spans_is_closed_form():
    model = Diurnal(0.5, 0.4, 1.0, 3.0, 22.0, 6.0, seed=0, n_clients=3)  # wraps midnight
    huge = model.charging_time_s(0.0, 1e300)
    assert np.all((huge >= 0) & (huge <= 1e300))
    # over 400 days the closed form equals the day-by-day sum of window overlaps
    t0, t1 = 1234.5, 1234.5 + 400 * DAY_S
    closed = model.charging_time_s(t0, t1)
    looped = np.array([day_by_day_s(t0, t1, shift, model.charging_windows_s())
                       for shift in model.phase_s])  # fmt: skip
    np.testing.assert_allclose(closed, looped, rtol=1e-12)
    np.testing.assert_allclose(closed, 400 * 8 * 3600.0, rtol=1e-12)  # 8 h a day
    np.testing.assert_allclose(DiurnalVector(model).charging_time_s(t0, t1), looped, rtol=1e-12)
    # an endless span charges the daily share; an empty one nothing
    assert model.charging_time_s(0.0, math.inf)[0] == math.inf
    assert model.charging_time_s(5.0, 5.0)[0] == 0.0


@pytest.mark.timeout(120)  # 5e11 on/off cycles drawn one by one would never end
def test_markov_far_ahead_is_bounded_and_keeps_its_law():
    # 1 ms periods and a query 1e9 s ahead: 5e11 cycles, drawn from epoch 7,629 on
    model = MarkovOnOff(1e-3, 2e-3, seed=0, n_clients=2000)
    online = model.online_mask(1e9, 0)
    p, sd = 1 / 3, math.sqrt(2 / 9 / 2000)
    assert abs(online.mean() - p) < 4 * sd
    # query order does not matter across epochs
    again = MarkovOnOff(1e-3, 2e-3, seed=0, n_clients=2000)
    assert [again.online(k, 1e9, 5) for k in (7, 3)] == [online[7], online[3]]
    # before the first epoch's end, the draws are those of one unbroken timeline
    unbroken = MarkovOnOff(1e-3, 2e-3, seed=0, n_clients=20)
    unbroken.epoch_s = math.inf
    times = np.random.default_rng(1).uniform(0.0, model.epoch_s, 50)
    assert [model.online(k % 20, t, 0) for k, t in enumerate(times)] == [
        unbroken.online(k % 20, t, 0) for k, t in enumerate(times)
    ]
    # next_offline_s is the flip, also when the on period runs into the next epoch
    checked = 0
    for k in range(200):
        for time_s in (model.epoch_s * 3 - 1e-3, 1e9):
            t_off = model.next_offline_s(k, time_s, 0)
            if model.online(k, time_s, 0):
                checked += 1
                assert t_off > time_s and model.online(k, np.nextafter(t_off, -np.inf), 0)
                assert not model.online(k, t_off, 0)
            else:
                assert t_off == time_s
    assert checked > 50


@pytest.mark.timeout(60)
def test_vector_markov_far_ahead_restarts_from_the_stationary_law():
    vector = MarkovVector(1e-3, 2e-3, seed=0, n_clients=4000)
    vector.online_mask(1.0, 0)
    online = vector.online_mask(1e9, 1)
    assert abs(online.mean() - 1 / 3) < 4 * math.sqrt(2 / 9 / 4000)
    offline_at = vector.next_offline_s(np.flatnonzero(online), 1e9, 1)
    assert np.all(offline_at >= 1e9) and np.mean(offline_at > 1e9) > 0.99


def test_a_synthetic_dataset_larger_than_memory_is_refused_before_anything(tmp_path):
    big = load_scenario("default-theory", ["population.size=10000000"])
    with pytest.raises(FedjouleError, match=r"10,000,000 clients .* GB of data, more than"):
        run_scenario(big, tmp_path / "run", device="cpu")
    assert not (tmp_path / "run").exists()
