"""Exact checks on small convex problems (docs/algorithms.md, the checks that pin them)."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from fedjoule.algorithms.drdm import DrdmConfig
from fedjoule.algorithms.drfa import DrfaConfig
from fedjoule.algorithms.fedacg import FedACGConfig
from fedjoule.algorithms.fedavg import FedAvgConfig
from fedjoule.algorithms.feddc import FedDCConfig
from fedjoule.algorithms.feddyn import FedDynConfig
from fedjoule.algorithms.scaffold import ScaffoldConfig
from fedjoule.algorithms.stem import StemConfig
from fedjoule.algorithms.taco import TacoConfig
from tests.algorithms.quadratic import Quadratics

LR, STEPS = 0.05, 10


@pytest.fixture(scope="module")
def problem():
    return Quadratics()


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize(
    "config",
    [
        ScaffoldConfig(),
        FedDynConfig(alpha=1.0),
        FedDCConfig(alpha=0.1),
        FedDCConfig(alpha=0.1, aggregation="paper"),
    ],
    ids=["scaffold", "feddyn", "feddc", "feddc-paper"],
)
def test_drift_correcting_algorithms_reach_w_star(problem, config):
    history = problem.run(config, 200, LR, STEPS)
    assert rel(history[-1], problem.w_star()) < 1e-4
    fedavg = problem.run(FedAvgConfig(), 200, LR, STEPS)[-1]
    assert rel(fedavg, problem.w_star()) > 1e-2


def test_feddyn_with_small_alpha_is_slower_but_heads_to_w_star(problem):
    history = problem.run(FedDynConfig(alpha=0.1), 300, LR, STEPS)
    errors = [rel(w, problem.w_star()) for w in history]
    assert errors[-1] < 1e-3 and errors[-1] < errors[99] < errors[9]


@pytest.mark.parametrize(
    "config", [FedACGConfig(), StemConfig(), TacoConfig(gamma=0.01)], ids=["fedacg", "stem", "taco"]
)
def test_other_algorithms_settle(problem, config):
    alphas = []
    history = problem.run(
        config, 300, LR, STEPS, on_round=lambda s: alphas.append(s.get("alpha", torch.zeros(1)))
    )
    assert np.all(np.isfinite(history[-1]))
    assert np.linalg.norm(history[-1] - history[-2]) < 1e-8  # settled
    fedavg = problem.run(FedAvgConfig(), 300, LR, STEPS)[-1]
    print(
        f"{config.name}: distance to w* {rel(history[-1], problem.w_star()):.4f} "
        f"(FedAvg {rel(fedavg, problem.w_star()):.4f})"
    )
    seen = torch.cat([a[~a.isnan()] for a in alphas])
    assert seen.min() >= 0 and seen.max() <= 1  # TACO's alpha stays in [0, 1]


def minimax_problem():
    """Four clients share an optimum, a fifth is far away: min max_i f_i is between them."""
    gen = np.random.default_rng(1)
    optima = [np.zeros(2)] * 4 + [np.array([4.0, 2.0])]
    xs = [gen.normal(size=(20, 2)) for _ in optima]
    ys = [x @ o for x, o in zip(xs, optima, strict=True)]
    problem = Quadratics(xs=xs, ys=ys)

    def loss(i, w):
        return 0.5 * np.mean((xs[i] @ w - ys[i]) ** 2)

    # argmin_w max_i f_i(w), as min t subject to f_i(w) <= t
    result = minimize(
        lambda z: z[2],
        x0=[1.0, 1.0, 10.0],
        method="SLSQP",
        constraints=[
            {"type": "ineq", "fun": lambda z, i=i: z[2] - loss(i, z[:2])} for i in range(5)
        ],
    )
    return problem, loss, result.x[:2], result.fun


@pytest.mark.parametrize(
    ("config", "steps", "tolerance"),
    [
        (DrfaConfig(sampling="uniform", dual_lr=0.05, lambda_init="uniform"), 2, 0.01),
        (DrdmConfig(sampling="uniform", dual_lr=0.05, alpha=0.5, lambda_init="uniform"), 10, 0.1),
    ],
    ids=["drfa", "drdm"],
)
def test_drfa_and_drdm_approach_the_minimax_solution(config, steps, tolerance):
    problem, loss, w_minimax, best_worst = minimax_problem()
    worst = {}
    for label, cfg in (("fedavg", FedAvgConfig()), ("robust", config)):
        w = problem.run(cfg, 600, LR, steps)[-1]
        worst[label] = max(loss(i, w) for i in range(5))
    distance = np.linalg.norm(w - w_minimax)
    print(
        f"{config.name}: worst-client loss {worst['robust']:.4f}, minimax {best_worst:.4f}, "
        f"FedAvg {worst['fedavg']:.4f}; distance to the minimax point {distance:.4f}"
    )
    assert np.linalg.norm(w - w_minimax) < tolerance * np.linalg.norm(w_minimax)
    assert worst["robust"] < 1.1 * best_worst
    assert worst["robust"] < 0.6 * worst["fedavg"]
