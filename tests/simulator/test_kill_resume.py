"""kill -9 at random instants, then --resume (or a new run where no checkpoint was
written): the files equal an uninterrupted run's, wall times aside (tests/simulator/killing.py).
"""

import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.simulator.killing import CASES, PROTOCOL_CASES, reference_run, trial


def kill_trials(tmp_path, cases, per_case: int, seed: int, workers: int = 1) -> list:
    rng = random.Random(seed)
    plans = []
    for case in cases:
        reference = tmp_path / f"{case.name}-reference"
        span = reference_run(case, reference)
        for i in range(per_case):
            plans.append((case, reference, tmp_path / f"{case.name}-{i}", span, i % 2 == 1))
    seeds = [rng.randrange(2**32) for _ in plans]

    def one(item):
        (case, reference, folder, span, kill_resume), trial_seed = item
        return trial(case, reference, folder, random.Random(trial_seed), span, kill_resume)

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, zip(plans, seeds, strict=True)))


def summarise(trials) -> dict:
    return {
        "trials": len(trials),
        "equal": sum(t.equal for t in trials),
        "killed_before_first_checkpoint": sum(not t.had_checkpoint for t in trials),
        "resume_killed": sum(t.resume_delay_s is not None for t in trials),
        "finished_by_resume": sum(t.finished_by == "resume" for t in trials),
        "finished_by_new_run": sum(t.finished_by == "new run" for t in trials),
        "per_case": {
            c.name: sum(t.case == c.name for t in trials) for c in (*CASES, *PROTOCOL_CASES)
        },
    }


def test_killed_runs_resume_to_identical_files(tmp_path):
    """The short version: FedAvg and spilling SCAFFOLD, one kill each and one kill of the
    resume too."""
    trials = kill_trials(tmp_path, CASES[:2], per_case=2, seed=1, workers=2)
    print("kill -9 trials:", json.dumps(summarise(trials)))
    bad = [(t.case, t.delay_s, t.resume_delay_s, t.differences) for t in trials if not t.equal]
    assert not bad, bad


@pytest.mark.slow
def test_sixty_random_kills_resume_to_identical_files(tmp_path):
    trials = kill_trials(tmp_path, CASES, per_case=22, seed=2026, workers=2)
    print("kill -9 trials:", json.dumps(summarise(trials)))
    bad = [(t.case, t.delay_s, t.resume_delay_s, t.differences) for t in trials if not t.equal]
    assert len(trials) >= 60 and not bad, bad


@pytest.mark.slow
def test_killed_protocol_runs_resume_to_identical_files(tmp_path):
    """async, buffered, hierarchical: kill -9 at random instants (a resume replays the
    timeline to the saved version), four trials each."""
    trials = kill_trials(tmp_path, PROTOCOL_CASES, per_case=4, seed=19, workers=2)
    print("kill -9 trials:", json.dumps(summarise(trials)))
    bad = [(t.case, t.delay_s, t.resume_delay_s, t.differences) for t in trials if not t.equal]
    assert not bad, bad
