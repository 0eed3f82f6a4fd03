"""One seed fixes a run: identical rounds.csv twice, and after an interruption and resume."""

import csv

from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario

OVERRIDES = [
    "training.rounds=6",
    "population.size=40",
    "availability.kind=markov",
    "availability.mean_on_s=0.5",
    "availability.mean_off_s=0.2",
]


def rows_without_wall_time(path):
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in csv.DictReader(f)]


def test_same_seed_same_rounds_csv(tmp_path):
    s = load_scenario("default-theory", OVERRIDES)
    run_scenario(s, tmp_path / "a", device="cpu")
    run_scenario(s, tmp_path / "b", device="cpu")
    a = rows_without_wall_time(tmp_path / "a" / "rounds.csv")
    assert a == rows_without_wall_time(tmp_path / "b" / "rounds.csv")
    assert len(a) == 6
    # markov availability with short periods: some clients go offline mid-round
    assert sum(int(r["dropped_offline"]) for r in a) > 0


def test_other_seed_other_results(tmp_path):
    run_scenario(load_scenario("default-theory", OVERRIDES), tmp_path / "a", device="cpu")
    run_scenario(
        load_scenario("default-theory", OVERRIDES + ["seed=1"]), tmp_path / "b", device="cpu"
    )
    assert rows_without_wall_time(tmp_path / "a" / "rounds.csv") != rows_without_wall_time(
        tmp_path / "b" / "rounds.csv"
    )


def test_interrupted_run_resumes_to_the_same_results(tmp_path):
    s = load_scenario("default-theory", OVERRIDES)
    _, whole = run_scenario(s, tmp_path / "whole", device="cpu")
    _, partial = run_scenario(s, tmp_path / "cut", device="cpu", stop_after=3)
    assert partial["rounds_completed"] == 3
    _, resumed = run_scenario(None, tmp_path / "cut", device="cpu", resume=True)
    assert rows_without_wall_time(tmp_path / "whole" / "rounds.csv") == rows_without_wall_time(
        tmp_path / "cut" / "rounds.csv"
    )
    whole.pop("wall_time_s"), resumed.pop("wall_time_s")
    assert whole == resumed
