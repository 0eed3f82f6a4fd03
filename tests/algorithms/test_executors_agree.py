"""The vectorised executor equals the sequential reference (docs/algorithms.md, the checks)."""

import os

import pytest
import torch

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import SequentialExecutor, VectorisedExecutor
from fedjoule.algorithms.fedprox import FedProxConfig
from fedjoule.algorithms.learning import aggregate_arrived, train_clients
from fedjoule.algorithms.registry import build_algorithm, names
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.world import build_world

needs_data = pytest.mark.skipif(
    not os.environ.get("FEDJOULE_DATA_DIR"), reason="FEDJOULE_DATA_DIR not set"
)

MNIST_SMALL = [
    "dataset.name=mnist",
    "dataset.partition=dirichlet",
    "dataset.dirichlet_alpha=0.3",
    "model.name=mlp",
    "population.size=30",
    "training.clients_per_round=6",
    "training.local_steps=5",
    "training.batch_size=20",
    "training.lr=0.05",
    "training.rounds=3",
    "availability.kind=bernoulli",
    "round.deadline_s=null",
    "training.weight_decay=0.001",
    "training.clip_grad_norm=10",
]


@needs_data
@pytest.mark.parametrize(
    ("algorithm", "clip"),
    [("fedavg", "10"), ("fedprox", "10"), ("fedavg", "null")],  # unclipped FedAvg: fused steps
)
def test_three_rounds_on_mnist_with_partial_participation(algorithm, clip):
    overrides = [f"algorithm.name={algorithm}", f"training.clip_grad_norm={clip}"]
    scenario = load_scenario("default-theory", MNIST_SMALL + overrides)
    finals = {}
    for kind in ("vectorised", "sequential"):
        sim = Simulation(build_world(scenario, device="cpu", executor=kind))
        rows = []
        sim.run(3, rows.append)
        assert [r["selected"] for r in rows] == [6, 6, 6]
        finals[kind] = sim.state["w"]
    difference = (finals["vectorised"] - finals["sequential"]).abs().max().item()
    assert difference < 1e-5
    assert (finals["vectorised"] - sim.world.w0).abs().max().item() > 1e-2  # it did train


def test_masked_steps_equal_shorter_sequential_loops():
    """Clients with fewer steps than K are masked in the vectorised executor."""
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(400, 8, generator=gen), torch.randint(0, 3, (400,), generator=gen)

    def loss(w, xb, yb):
        return torch.nn.functional.cross_entropy(xb @ w.view(8, 3), yb)

    algorithm = build_algorithm(FedProxConfig(mu=0.1), 5, torch.full((5,), 80))
    state = algorithm.init_state(torch.randn(24, generator=gen))
    ids = torch.arange(5)
    batches = torch.randint(0, 400, (5, 6, 16), generator=gen)
    out = {}
    for cls in (VectorisedExecutor, SequentialExecutor):
        setup = RoundSetup(0.1, torch.tensor([6, 1, 3, 0, 5]), 0, 0.01, 0.5)
        executor = cls(loss, x, y, torch.device("cpu"))
        result = train_clients(algorithm, executor, state, ids, setup, batches)
        out[cls.__name__] = result.uploads["model"]
        arrived = torch.tensor([True, False, True, True, False])
        out[cls.__name__ + "-agg"] = aggregate_arrived(algorithm, state, result, arrived)["w"]
    assert torch.allclose(out["VectorisedExecutor"], out["SequentialExecutor"], atol=1e-6)
    assert torch.equal(out["VectorisedExecutor"][3], state["w"])  # 0 steps: unchanged
    assert torch.allclose(out["VectorisedExecutor-agg"], out["SequentialExecutor-agg"], atol=1e-6)
    # aggregation uses only the arrived rows (equal sizes: their plain mean)
    mean = out["VectorisedExecutor"][[0, 2, 3]].mean(0)
    assert torch.allclose(out["VectorisedExecutor-agg"], mean, atol=1e-6)


@pytest.mark.parametrize("name", ["scaffold", "stem", "drfa"])
def test_chunked_training_equals_one_batch(name):
    """Over a memory budget the clients train in chunks; the result does not change."""
    scenario = load_scenario(
        "default-theory",
        [
            f"algorithm.name={name}",
            "population.size=20",
            "training.clients_per_round=9",
            "training.rounds=2",
            "model.name=mlp",
            "model.hidden=[16]",
            "population.freeloaders.fraction=0.2",
            "training.local_epochs=1",
        ],
    )
    finals = {}
    for label, budget in (("one", 1024), ("chunks", 0.05)):
        world = build_world(scenario, device="cpu")
        world.executor.memory_budget_mb = budget
        if label == "chunks":
            assert world.executor.chunk_size(world.model.n_params, 32) < 9
        sim = Simulation(world)
        sim.run(2, lambda row: None)
        finals[label] = sim.state["w"]
    assert torch.allclose(finals["one"], finals["chunks"], atol=1e-6)


def test_compiled_executor_equals_the_reference():
    """--executor compiled (torch.compile of vmap(grad)) trains to the same model."""
    scenario = load_scenario("default-theory", ["training.rounds=2", "population.size=20"])
    finals = {}
    for kind in ("compiled", "sequential"):
        sim = Simulation(build_world(scenario, device="cpu", executor=kind))
        sim.run(2, lambda row: None)
        finals[kind] = sim.state["w"]
    assert (finals["compiled"] - finals["sequential"]).abs().max().item() < 1e-5
    assert (finals["compiled"] - sim.world.w0).abs().max().item() > 1e-2


RESNET_SMALL = [
    "dataset.name=torchvision",
    "dataset.class=FakeData",
    "dataset.options={size: 60, image_size: [3, 8, 8], num_classes: 4}",
    "model.name=resnet18",
    "model.width=2",
]


SPLIT_CASES = [(name, "mlp") for name in names() if name != "custom"] + [("fedavg", "resnet18")]


@pytest.mark.parametrize(("name", "model"), SPLIT_CASES)
def test_clients_split_across_threads_equal_one_thread(name, model):
    """With torch set to 2 threads the clients of a dense model train in 2 groups, one
    thread each (VectorisedExecutor.split_across_threads; a ResNet's on 2 intra-op
    threads): the same numbers as one thread to float rounding (a group's batched kernels
    see fewer rows, as in memory chunks), the same bits when run again, and torch's
    thread count is 2 again after each round."""
    scenario = load_scenario(
        "default-theory",
        [
            f"algorithm.name={name}",
            "population.size=12",
            "training.clients_per_round=5",
            "training.rounds=2",
            "training.local_steps=3",
            "training.batch_size=8",
            "population.freeloaders.fraction=0.2",
            *(["model.name=mlp", "model.hidden=[16]"] if model == "mlp" else RESNET_SMALL),
        ],
    )
    before = torch.get_num_threads()
    finals, threads_after, split = [], [], []
    try:
        for threads in (1, 2, 2):
            torch.set_num_threads(threads)
            world = build_world(scenario, device="cpu")
            sim = Simulation(world)
            sim.run(2, lambda row: threads_after.append(torch.get_num_threads()))
            finals.append(sim.state)
            split.append(world.executor.split)
    finally:
        torch.set_num_threads(before)
    assert threads_after == [1, 1, 2, 2, 2, 2]
    assert split == [model == "mlp"] * 3  # dense stacks only (DenseGradient)
    tensors = [key for key, value in finals[0].items() if isinstance(value, torch.Tensor)]
    assert "w" in tensors
    for key in tensors:
        one, two, again = finals[0][key], finals[1][key], finals[2][key]
        assert torch.allclose(one, two, rtol=1e-5, atol=1e-6, equal_nan=True), key
        assert torch.equal(two.nan_to_num(), again.nan_to_num()), key
