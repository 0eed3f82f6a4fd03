"""The selectors' and check_decision's fast paths (benchmarks/policies.py) give what the
plain definitions give: top's partial sort, round robin's rotation, the sorted look-up."""

import numpy as np
import pytest

from fedjoule.errors import FedjouleError
from fedjoule.policies.observation import Decision, check_decision
from fedjoule.policies.select import select_round_robin, top
from tests.policies.helpers import observation


def test_top_equals_the_full_sort_with_ties_and_nan():
    gen = np.random.default_rng(3)
    ids = np.sort(gen.choice(1000, 400, replace=False))
    obs = observation(400, client_id=ids)
    for score in (gen.integers(0, 5, 400).astype(float), gen.random(400),
                  np.where(gen.random(400) < 0.9, np.nan, gen.random(400)),
                  np.where(gen.random(400) < 0.5, 0.0, -0.0)):  # fmt: skip
        for m in (0, 1, 7, 40, 399, 400, 500):
            full = np.sort(ids[np.lexsort((ids, -score))[:m]])
            np.testing.assert_array_equal(top(obs, score, m), full)


def test_round_robin_rotation_equals_the_ring_walk():
    gen = np.random.default_rng(4)
    for ids in (np.sort(gen.choice(100, 60, replace=False)), np.array([5, 2, 9, 40]),
                np.arange(100)):  # fmt: skip
        for r in range(12):
            obs = observation(len(ids), round_index=r, n_clients=100, client_id=ids)
            start = (r * 7) % 100
            walk = ids[np.argsort((ids - start) % 100, kind="stable")[:7]]
            np.testing.assert_array_equal(select_round_robin(obs, 7, None), np.sort(walk))


def test_unknown_or_repeated_clients_first_in_the_decisions_order():
    candidates = np.array([9, 3, 5, 8])
    cases = (([3, 5, 4, 5], "client 4, which is not among the round's 4"),
             ([8, 9, 8, 4], "client 8 more than once"),
             ([3.0, np.nan], "client nan, which is not among"),
             (np.array([3, None], dtype=object), "client None, which is not"))  # fmt: skip
    for chosen, message in cases:
        with pytest.raises(FedjouleError, match=message):
            check_decision(Decision(np.asarray(chosen)), "p", candidates)
    ranges = (np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.5, 2.5, 3.5, 4.5]))
    ok = Decision(np.array([5, 9]), cpu_freq_hz=np.array([3.2, 1.2]))
    check_decision(ok, "p", candidates, ranges)
    with pytest.raises(FedjouleError, match="client 8's CPU frequency 3.2 Hz"):
        check_decision(Decision(np.array([8]), cpu_freq_hz=np.array([3.2])), "p", candidates,
                       ranges)  # fmt: skip
