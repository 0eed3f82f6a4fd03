"""Typed server state (algorithms/state.py): every built-in algorithm's state is a dataclass
whose names are those its checkpoints have always held, that reads as a dict, updates
to a new object of its class, and is rebuilt from a checkpoint's plain dict; a plug-in's
plain dict state goes through the same functions unchanged."""

import pytest
import torch

from fedjoule.algorithms.drfa import DrfaState
from fedjoule.algorithms.learning import mean_state
from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.algorithms.scaffold import ScaffoldState
from fedjoule.algorithms.state import ServerState, restored, updated
from fedjoule.algorithms.stem import StemState

# the names each algorithm's checkpoints held when the state was a dict (before typed
# states): a checkpoint written then must resume now
SAVED_NAMES = {
    "fedavg": ["w"],
    "fedprox": ["w"],
    "scaffold": ["w", "c"],
    "feddyn": ["w", "h"],
    "feddc": ["w", "c", "h_sum"],
    "fedacg": ["w", "m"],
    "stem": ["w", "d", "has_d"],
    "drfa": ["w", "lambda", "snapshot", "dual_lr"],
    "drdm": ["w", "lambda", "snapshot", "dual_lr", "h"],
    "taco": ["w", "delta", "alpha", "alpha_mean", "suspicious", "expelled"],
    "foolsgold": ["w", "history", "weights"],
}


def algorithm(name: str, n_clients: int = 4):
    cls, config = ALGORITHMS[name]
    samples = torch.arange(1.0, n_clients + 1, dtype=torch.float64)
    return cls(config(name=name), n_clients, samples, nominal_steps=3)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_state_is_typed_with_the_names_of_its_checkpoints(name):
    assert sorted(ALGORITHMS) == sorted(SAVED_NAMES)
    algo = algorithm(name)
    w0 = torch.linspace(-1, 1, 5, dtype=torch.float64)
    state = algo.init_state(w0)
    assert isinstance(state, ServerState) and list(state) == SAVED_NAMES[name]
    assert torch.equal(state["w"], w0) and state["w"] is state.w
    # one aggregation of three arrived clients: a new state of the same class
    ids = torch.tensor([0, 2, 3])
    uploads = {key: torch.ones(3, 5, dtype=torch.float64) for key in algo.uplink_wire}
    uploads |= {"model": torch.ones(3, 5, dtype=torch.float64), "lr": torch.full((3,), 0.1)}
    new = algo.aggregate(state, uploads, ids)
    assert type(new) is type(state) and list(new) == SAVED_NAMES[name]
    assert torch.equal(state.w, w0)  # the old state is left as it was
    # a checkpoint's plain dict rebuilds it, field by field
    saved = dict(new.items())
    back = restored(algo.init_state(w0), saved)
    assert type(back) is type(state)
    assert all(back[key] is value for key, value in saved.items())


def test_a_state_reads_as_a_dict():
    w, c = torch.zeros(2), torch.ones(2)
    state = ScaffoldState(w, c)
    assert len(state) == 2 and {**state} == {"w": w, "c": c}
    assert state["c"] is c and "c" in state and "x" not in state and state.get("x") is None
    with pytest.raises(KeyError, match="x"):
        state["x"]
    lam = torch.full((3,), 1 / 3)
    drfa = DrfaState(w, lam, w, torch.tensor(0.5))
    assert drfa["lambda"] is lam and "lambda_" not in drfa  # a keyword's field: key "lambda"
    changed = updated(drfa, **{"lambda": torch.zeros(3)})  # by key, as mean_state changes it
    assert type(changed) is DrfaState and changed.lambda_.sum() == 0 and drfa.lambda_ is lam
    assert updated(drfa, lambda_=torch.ones(3)).lambda_.sum() == 3  # by field name


def test_a_plugins_dict_state_stays_a_dict():
    state = {"w": torch.zeros(2), "m": torch.ones(2)}
    new = updated(state, w=torch.ones(2))
    assert type(new) is dict and new["m"] is state["m"] and state["w"].sum() == 0
    back = restored(state, {"w": torch.ones(2), "m": torch.ones(2)})
    assert type(back) is dict and back["w"].sum() == 2
    # a typed run whose plug-in subclass saved other names keeps them as saved
    other = restored(ServerState(torch.zeros(2)), {"w": torch.ones(2), "extra": 1})
    assert other == {"w": other["w"], "extra": 1} and type(other) is dict


def test_the_cloud_mean_keeps_the_state_class():
    """Hierarchical: each floating tensor the weighted mean of the edges', the rest the
    first edge's; the result is of the edges' class."""
    a = StemState(torch.zeros(2), torch.tensor([1.0, 0.0]), torch.tensor(False))
    b = StemState(torch.ones(2), torch.tensor([0.0, 1.0]), torch.tensor(True))
    cloud = mean_state([a, b], torch.tensor([1.0, 3.0]))
    assert type(cloud) is StemState and cloud.has_d is a.has_d
    assert cloud.w.tolist() == [0.75, 0.75] and cloud.d.tolist() == [0.25, 0.75]
    one = mean_state([a], torch.tensor([1.0]))
    assert type(one) is StemState and one is not a and one.w is a.w
