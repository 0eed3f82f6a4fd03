"""What dropout costs the vectorised executor: client-by-client gradients with each client's
own generator (exact: equal to the sequential executor) against vmap's batched draws.

The MNIST MLP of the executor benchmark (784-200-200-10) with dropout (p=0.5) after each
hidden layer, trained by FedAvg on the same clients and minibatches, round by round in
turns (the machine's drift cancels in the paired ratios):
- vectorised: fedjoule's default for a model with random layers (LoopGradient with
  ClientDraws: plain autograd, client after client);
- vmap: vmap(grad(loss), randomness="different") with one generator per round
  (`--executor vmap`: reproducible, other masks than the sequential executor);
- sequential: the reference executor;
- no_dropout: the same network without dropout under the vectorised executor (the
  hand-batched dense path), for scale.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/random_layers_speed.py
"""

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from record import RESULTS, save_results  # benchmarks/record.py
from torch import nn

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import minibatch_indices
from fedjoule.algorithms.fedavg import FedAvg, FedAvgConfig
from fedjoule.data.federated import build_federated_data
from fedjoule.models.functional import FlatModel
from fedjoule.scenarios.schema import DatasetSection
from fedjoule.simulator.world import make_executor


def mlp(p: float) -> FlatModel:
    torch.manual_seed(0)
    layers = [nn.Flatten(), nn.Linear(784, 200), nn.ReLU()]
    layers += [nn.Dropout(p)] if p else []
    layers += [nn.Linear(200, 200), nn.ReLU()]
    layers += [nn.Dropout(p)] if p else []
    return FlatModel.wrap(nn.Sequential(*layers, nn.Linear(200, 10)))


def measure(m: int, steps: int, batch: int, rounds: int, dataset: str) -> dict:
    n_clients = max(m, 100)
    data = build_federated_data(DatasetSection(name=dataset), n_clients, seed=0)
    cpu = torch.device("cpu")
    dropout, plain = mlp(0.5), mlp(0.0)
    executors = {
        "vectorised": make_executor("vectorised", dropout, data, cpu, 0, batch),
        "vmap": make_executor("vmap", dropout, data, cpu, 0, batch),
        "sequential": make_executor("sequential", dropout, data, cpu, 0, batch),
        "no_dropout": make_executor("vectorised", plain, data, cpu, 0, batch),
    }
    assert executors["vectorised"].draws is not None and executors["no_dropout"].draws is None
    w0 = dropout.flat_parameters()
    algorithm = FedAvg(FedAvgConfig(), n_clients, torch.as_tensor(data.client_samples))
    state = algorithm.init_state(w0)
    times = {k: [] for k in executors}
    gen = np.random.default_rng(0)
    for r in range(rounds + 1):  # round 0 warms up
        ids = np.sort(gen.choice(n_clients, m, replace=False))
        idx = minibatch_indices(0, r, ids, data.client_train, steps, batch)
        for label, executor in executors.items():
            setup = RoundSetup(0.05, torch.full((m,), steps), r, client_ids=torch.as_tensor(ids))
            ctx = algorithm.context(state, torch.as_tensor(ids), {}, setup)
            tic = time.perf_counter()
            executor.train(algorithm, ctx, setup, idx)
            if r:
                times[label].append(time.perf_counter() - tic)
    paired = {
        f"{a}/{b}": statistics.median(p / q for p, q in zip(times[a], times[b], strict=True))
        for a, b in (
            ("vectorised", "vmap"),
            ("sequential", "vectorised"),
            ("vectorised", "no_dropout"),
        )
    }
    return {
        "workload": f"mlp-dropout-{dataset}-{m}",
        "clients": m,
        "steps": steps,
        "batch": batch,
        "rounds": rounds,
        "seconds_per_round": {k: statistics.median(v) for k, v in times.items()},
        "paired": paired,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="*", default=[10, 50])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    machine = f"{platform.machine()} {torch.get_num_threads()} threads, torch {torch.__version__}"
    results = []
    for m in args.clients:
        row = measure(m, args.steps, args.batch, args.rounds, args.dataset)
        row["machine"] = machine
        print(json.dumps(row), flush=True)
        results.append(row)
    save_results("random-layers-cpu", results, args.out)


if __name__ == "__main__":
    main()
