"""FedAvg and FedProx settle at the drift-biased fixed point, not at w* (docs/algorithms.md,
the checks that pin the algorithms)."""

import numpy as np
import pytest

from fedjoule.algorithms.fedavg import FedAvgConfig
from fedjoule.algorithms.fedprox import FedProxConfig
from tests.algorithms.quadratic import Quadratics

LR, STEPS, ROUNDS = 0.05, 10, 300


@pytest.fixture(scope="module")
def problem():
    return Quadratics()


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_fedavg_converges_to_its_closed_form_fixed_point_away_from_w_star(problem):
    history = problem.run(FedAvgConfig(), ROUNDS, LR, STEPS)
    w, w_star = history[-1], problem.w_star()
    assert rel(w, problem.fedavg_fixed_point(LR, STEPS)) < 1e-8
    assert np.linalg.norm(history[-1] - history[-2]) < 1e-10  # settled
    assert rel(w, w_star) > 1e-2  # client drift keeps it measurably away from w*


def test_fedavg_bias_vanishes_with_one_local_step(problem):
    w = problem.run(FedAvgConfig(), 2500, LR, 1)[-1]
    assert rel(w, problem.w_star()) < 1e-6


def test_fedprox_settles_at_its_closed_form_fixed_point_closer_to_w_star(problem):
    w_star = problem.w_star()
    fedavg = problem.run(FedAvgConfig(), ROUNDS, LR, STEPS)[-1]
    errors = []
    for mu in (0.3, 1.0, 3.0):
        history = problem.run(FedProxConfig(mu=mu), ROUNDS, LR, STEPS)
        assert rel(history[-1], problem.fedprox_fixed_point(LR, STEPS, mu)) < 1e-8
        errors.append(rel(history[-1], w_star))
    print(f"relative distance to w*: FedAvg {rel(fedavg, w_star):.4f}, FedProx mu=0.3/1/3 {errors}")
    assert rel(fedavg, w_star) > errors[0] > errors[1] > errors[2] > 1e-3
