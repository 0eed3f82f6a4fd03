"""The thread count a run chooses (fedjoule/threads.py): one thread for a step too small to
split, torch's count for a large one; the same files as `threads=1`; waiting OpenMP threads
sleep after 300 spins (GOMP_SPINCOUNT, read by torch's runtime) unless the user chose."""

import os
import subprocess
import sys

import pytest
import torch

import fedjoule
from fedjoule.threads import FLOPS_PER_THREAD, SPLIT_FLOPS

from .test_api import SMALL, csv_rows, without_wall


def threads_seen(tmp_path, name: str, **options) -> tuple[list[int], list[dict]]:
    """torch's thread count in every round of a run, and its rounds.csv rows."""
    seen = []
    overrides = {**SMALL, "training.rounds": 2, **options.pop("overrides", {})}
    fedjoule.run(
        None,
        tmp_path / name,
        overrides=overrides,
        on_round=lambda row: seen.append(torch.get_num_threads()),
        quiet=True,
        **options,
    )
    return seen, without_wall(csv_rows(tmp_path / name / "rounds.csv"))


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_step_runs_on_one_thread_and_large_on_all(tmp_path, two_threads):
    # SMALL: logistic 30 x 5 (300 FLOPs a sample) x batch 10 x 4 clients = 1.2e4 a step
    small, small_rows = threads_seen(tmp_path, "small")
    assert small == [1, 1]
    one, one_rows = threads_seen(tmp_path, "one", threads=1)
    assert one == [1, 1] and small_rows == one_rows  # the same count: the same files
    # a declared 1e6 FLOPs a sample x 10 x 4 = 4e7 a step, over SPLIT_FLOPS: as set (2)
    large, _ = threads_seen(tmp_path, "large", overrides={"model.forward_flops_per_sample": 1e6})
    assert 1e6 * 10 * 4 >= SPLIT_FLOPS and large == [2, 2]
    assert threads_seen(tmp_path, "given", threads=2)[0] == [2, 2]  # a count given is kept
    assert torch.get_num_threads() == 2  # restored after each run


def test_a_large_step_takes_a_thread_per_quantum_of_work(tmp_path):
    """Over SPLIT_FLOPS a run takes one thread per FLOPS_PER_THREAD of a step, at least
    two, at most torch's count: 8 threads set, a 2e8-FLOP step (the MNIST MLP of
    benchmarks/threads.py) takes 4, a 4e10-FLOP step all 8."""
    before = torch.get_num_threads()
    torch.set_num_threads(8)
    try:
        # declared FLOPs a sample x batch 10 x 4 clients a round (SMALL)
        mlp, _ = threads_seen(tmp_path, "mlp", overrides={"model.forward_flops_per_sample": 5e6})
        big, _ = threads_seen(tmp_path, "big", overrides={"model.forward_flops_per_sample": 1e9})
    finally:
        torch.set_num_threads(before)
    assert 5e6 * 10 * 4 // FLOPS_PER_THREAD == 4 and mlp == [4, 4]
    assert big == [8, 8]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, ["OMP_WAIT_POLICY = 'PASSIVE'", "GOMP_SPINCOUNT = '300'"]),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, ["OMP_WAIT_POLICY = 'ACTIVE'", "GOMP_SPINCOUNT = '30"]),
        ({"GOMP_SPINCOUNT": "7"}, ["GOMP_SPINCOUNT = '7'"]),
    ],
)
def test_waiting_threads_spin_briefly_unless_the_user_chose(given, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    # libgomp prints the settings it loaded with (OMP_DISPLAY_ENV) when torch loads it
    out = subprocess.run(
        [sys.executable, "-c", "import fedjoule, torch; torch.ones(4).sum()"],
        env={**env, **given, "OMP_DISPLAY_ENV": "VERBOSE"},
        capture_output=True,
        text=True,
        check=True,
    )
    for line in expected:
        assert line in out.stderr
