"""Freeloaders: 8 of 20 clients replay the last global update (docs/algorithms.md, the
checks that pin the algorithms)."""

import numpy as np
import pytest
import torch

from fedjoule.algorithms.foolsgold import foolsgold_weights
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.world import build_world

REPLAYING = [
    "population.size=20",
    "training.clients_per_round=20",
    "population.freeloaders.fraction=0.4",
    "population.freeloaders.behaviour=replay",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
]


def run(rounds, *extra):
    sim = Simulation(
        build_world(load_scenario("default-theory", REPLAYING + list(extra)), device="cpu")
    )
    rows = []
    sim.run(rounds, rows.append)
    return sim, rows


def test_taco_flags_and_expels_the_replaying_freeloaders():
    sim, rows = run(12, "algorithm.name=taco", "algorithm.kappa=0.7")
    freeloader = sim.world.freeloader
    assert freeloader.sum() == 8
    assert rows[-1]["detection_tpr"] >= 0.9 and rows[-1]["detection_fpr"] <= 0.1
    alpha = sim.state["alpha"].numpy()
    print(f"alpha: freeloaders {alpha[freeloader].round(2)}, benign {alpha[~freeloader].round(2)}")
    assert alpha[freeloader].min() > 0.7 > alpha[~freeloader].max()
    # expelled clients are never selected again: from the round after expulsion on, the
    # 12 benign clients are the whole round
    expelled_from = next(i for i, r in enumerate(rows) if r["detection_tpr"] == 1.0)
    assert all(r["selected"] == 12 for r in rows[expelled_from + 1 :])
    selected_before = sim.ledger["selected"][freeloader].copy()
    sim.world.scenario.training.rounds = 14
    sim.run(14, lambda row: None)
    np.testing.assert_array_equal(sim.ledger["selected"][freeloader], selected_before)


def test_foolsgold_weights_freeloaders_below_benign_clients():
    sim, _ = run(6, "algorithm.name=foolsgold")
    weights = sim.state["weights"]
    free = [weights[k] for k in np.flatnonzero(sim.world.freeloader)]
    benign = [weights[k] for k in np.flatnonzero(~sim.world.freeloader)]
    assert max(free) < min(benign)


def test_foolsgold_rules_on_a_hand_example():
    """Two identical histories (sybils) get weight 0; an orthogonal one keeps weight 1."""
    history = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    weights = foolsgold_weights(history)
    assert weights.tolist() == pytest.approx([0.0, 0.0, 1.0])


def test_freeloaders_spend_no_compute_energy_but_do_upload():
    sim, rows = run(3, "algorithm.name=fedavg")
    free = sim.world.freeloader
    assert np.all(sim.ledger["energy_compute_j"][free] == 0)
    assert np.all(sim.ledger["energy_tx_j"][free] > 0)
    assert np.all(sim.ledger["energy_compute_j"][~free] > 0)
