"""Models with random layers (dropout): each client draws from its own generator, so the
vectorised executor equals the sequential one bit for bit and a run is reproducible;
evaluation runs without dropout; a model vmap cannot batch, or one that draws when
evaluating, is refused before the run's folder exists (docs/learning-models.md)."""

import csv
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import (
    ClientDraws,
    LoopGradient,
    SequentialExecutor,
    VectorisedExecutor,
)
from fedjoule.algorithms.registry import build_algorithm
from fedjoule.algorithms.stem import StemConfig
from fedjoule.cli import invoke
from fedjoule.models.functional import FlatModel
from fedjoule.plugins import allow_plugins
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.evaluation import Evaluator
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world

NETS = textwrap.dedent(
    """
    import math
    import torch
    from torch import nn
    import torch.nn.functional as F


    def dropout(input_shape, n_classes, p=0.5):
        return nn.Sequential(
            nn.Flatten(), nn.Linear(math.prod(input_shape), 16), nn.ReLU(), nn.Dropout(p),
            nn.Linear(16, n_classes),
        )


    class Branching(nn.Module):
        forward_flops_per_sample = 100.0  # (torch's FLOP counter cannot follow the branch)

        def __init__(self, n_in, n_classes):
            super().__init__()
            self.lin = nn.Linear(n_in, n_classes)

        def forward(self, x):
            h = self.lin(x.flatten(1))
            return h if h.sum() > 0 else -h  # a Python decision on a tensor's value


    def branching(input_shape, n_classes):
        return Branching(math.prod(input_shape), n_classes)


    class AlwaysDrops(nn.Module):
        def __init__(self, n_in, n_classes):
            super().__init__()
            self.lin = nn.Linear(n_in, n_classes)

        def forward(self, x):
            return self.lin(F.dropout(x.flatten(1), 0.5, training=True))


    def always_drops(input_shape, n_classes):
        return AlwaysDrops(math.prod(input_shape), n_classes)
    """
)

SMALL = {
    "training": {"rounds": 2, "clients_per_round": 4, "local_steps": 3},
    "population": {"size": 10},
}


def scenario_file(tmp_path, factory: str, **options) -> str:
    (tmp_path / "nets.py").write_text(NETS)
    model = {"name": "custom", "factory": f"nets.py:{factory}", "options": options}
    lines = [
        "name: random-layers",
        f"model: {model}",
        f"training: {SMALL['training']}",
        f"population: {SMALL['population']}",
    ]
    path = tmp_path / "scenario.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def rounds_without_wall_time(folder) -> list[dict]:
    with open(folder / "rounds.csv") as f:
        return [{k: v for k, v in row.items() if k != "wall_time_s"} for row in csv.DictReader(f)]


def test_dropout_runs_under_the_default_executor_and_is_reproducible(tmp_path):
    scenario = scenario_file(tmp_path, "dropout")
    assert invoke(["run", scenario, "--out", str(tmp_path / "a"), "-q"]) == 0
    first = rounds_without_wall_time(tmp_path / "a")
    assert len(first) == 2 and first[-1]["accuracy"] != ""
    # the same seed again, stopped after round 1 and resumed: the same masks, the same files
    run_scenario(load_scenario(scenario), tmp_path / "b", stop_after=1)
    with allow_plugins(paths=[tmp_path]):  # the factory lives beside, not in, the run folder
        run_scenario(None, tmp_path / "b", resume=True)
    assert rounds_without_wall_time(tmp_path / "b") == first


def test_vectorised_equals_sequential_with_dropout_bit_for_bit(tmp_path):
    """STEM evaluates two gradients a step (each client's generator continues from one to
    the next), and the clients train in one batch or in chunks: the same models to the
    last bit. The batched vmap executor (randomness="different") is reproducible but draws
    other masks."""
    overrides = ["algorithm.name=stem", "training.clients_per_round=5"]
    scenario = load_scenario(scenario_file(tmp_path, "dropout"), overrides)
    finals = {}
    for kind, budget in (("vectorised", 1024), ("chunked", 0.01), ("sequential", None)):
        executor = "sequential" if kind == "sequential" else "vectorised"
        world = build_world(scenario, device="cpu", executor=executor)
        if budget is not None:
            world.executor.memory_budget_mb = budget
        sim = Simulation(world)
        sim.run(2, lambda row: None)
        finals[kind] = sim.state["w"]
    assert torch.equal(finals["vectorised"], finals["sequential"])
    assert torch.equal(finals["chunked"], finals["sequential"])
    assert not torch.equal(finals["vectorised"], world.w0)
    batched = []
    for _ in range(2):
        sim = Simulation(build_world(scenario, device="cpu", executor="vmap"))
        sim.run(2, lambda row: None)
        batched.append(sim.state["w"])
    assert torch.equal(batched[0], batched[1])
    assert not torch.equal(batched[0], finals["sequential"])


def dropout_model() -> FlatModel:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.5), nn.Linear(12, 3))
    return FlatModel.wrap(net)


def test_a_clients_masks_do_not_depend_on_the_others_selected():
    model = dropout_model()
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(200, 6, generator=gen), torch.randint(0, 3, (200,), generator=gen)
    batches = torch.randint(0, 200, (4, 3, 8), generator=gen)
    algorithm = build_algorithm(StemConfig(), 10, torch.full((10,), 20))
    state = algorithm.init_state(model.flat_parameters())
    cpu = torch.device("cpu")

    def train(kind, rows: list[int], ids: list[int] | None, steps=None, r: int = 3) -> torch.Tensor:
        draws = ClientDraws(7, cpu)
        if kind == "vectorised":  # client by client, each its own generator
            executor = VectorisedExecutor(
                model.loss, x, y, cpu, LoopGradient(model.loss, draws), draws=draws
            )
        else:
            executor = SequentialExecutor(model.loss, x, y, cpu, draws=draws)
        steps = torch.full((len(rows),), 3) if steps is None else torch.tensor(steps)
        known = torch.arange(len(rows)) if ids is None else torch.tensor(ids)
        setup = RoundSetup(0.1, steps, r, client_ids=None if ids is None else known)
        ctx = algorithm.context(state, known, {}, setup)
        return executor.train(algorithm, ctx, setup, batches[rows])

    for kind in ("vectorised", "sequential"):
        together = train(kind, [0, 1, 2, 3], [2, 5, 7, 9])
        alone = train(kind, [2], [7])
        assert torch.equal(together[2], alone[0])
        # another round or another client id: other masks
        assert not torch.equal(train(kind, [2], [7], r=4)[0], alone[0])
        assert not torch.equal(train(kind, [2], [8])[0], alone[0])
    assert torch.equal(together, train("vectorised", [0, 1, 2, 3], [2, 5, 7, 9]))
    # clients not named: numbered 0..m-1 by either executor
    unnamed = [train(kind, [0, 1, 2], None) for kind in ("vectorised", "sequential")]
    assert torch.equal(unnamed[0], unnamed[1])
    assert torch.equal(unnamed[0], train("sequential", [0, 1, 2], [0, 1, 2]))
    # unequal local steps: the vectorised executor's masked steps round differently
    # (addcmul), as for any model: equal to float rounding, the same masks
    unequal = [
        train(kind, [0, 1, 2, 3], [2, 5, 7, 9], [3, 1, 0, 2])
        for kind in ("vectorised", "sequential")
    ]
    assert torch.allclose(unequal[0], unequal[1], atol=1e-6, rtol=0)
    assert torch.equal(unequal[0][2], state["w"])  # no steps: unchanged


def test_evaluation_runs_without_dropout():
    model = dropout_model()
    w = model.flat_parameters()
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(300, 6, generator=gen), torch.randint(0, 3, (300,), generator=gen)
    halves = [np.arange(150), np.arange(150, 300)]
    evaluator = Evaluator(model, x, y, halves, torch.device("cpu"))
    first, second = evaluator(w), evaluator(w)
    assert first == second
    plain = nn.Sequential(*[m for m in model.module if not isinstance(m, nn.Dropout)])
    with torch.no_grad():
        expected = (plain(x).argmax(1) == y).double().mean().item()
    assert first["accuracy"] == pytest.approx(expected, abs=1e-12)
    # and training does drop: two training losses of the same batch differ
    assert model.loss(w, x, y) != model.loss(w, x, y)


@pytest.mark.parametrize(
    ("factory", "words"),
    [
        ("branching", ["cannot be trained by the vectorised executor", "--executor sequential"]),
        ("always_drops", ["draws random numbers in evaluation mode", "training=self.training"]),
    ],
)
def test_a_model_that_cannot_run_is_refused_before_the_folder_exists(
    tmp_path, capsys, factory, words
):
    out = tmp_path / "run"
    assert invoke(["run", scenario_file(tmp_path, factory), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert "internal error" not in err and not out.exists()
    # validate, importing the plug-in, checks as run does
    assert invoke(["validate", scenario_file(tmp_path, factory), "--import-plugins"]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_the_refused_vmap_model_runs_sequentially(tmp_path):
    out = tmp_path / "run"
    scenario = scenario_file(tmp_path, "branching")
    assert invoke(["run", scenario, "--out", str(out), "-q", "--executor", "sequential"]) == 0
    assert len(rounds_without_wall_time(out)) == 2
