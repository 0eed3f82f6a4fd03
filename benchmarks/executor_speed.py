"""Executor speed: vectorised vs vmap vs a sequential loop vs the big-batch limit.

For each workload the implementations train the same clients on the same minibatch
indices, round by round in turns, so that the machine's drift (up to 1.6x within a run on
a 2-core CPU) cancels, and the ratios are taken round by round:
- vectorised: fedjoule's executor (the hand-batched dense path for MLP/logistic;
  FedAvg's plain SGD steps fused: each layer's gradient goes straight into its weights);
- vectorised_flat: the same without fusing, through the flat (m, P) gradient, the path
  of every algorithm with a correction term (FedProx, SCAFFOLD, FedDyn, ...);
- vmap: the same executor with plain torch.func vmap(grad(loss));
- compiled (with --compiled): vmap(grad(loss)) through torch.compile; its first
  round, compilation included, is reported apart;
- sequential: one nn.Module and torch.optim.SGD per client, client after client
  (what FedScale, FLGo, FedLab and Plato do);
- big_batch: ONE model trained on all m clients' samples of a step stacked into one
  batch: the same arithmetic without per-client weights, the compute limit.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/executor_speed.py
"""

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from record import RESULTS, save_results  # benchmarks/record.py

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import minibatch_indices
from fedjoule.algorithms.fedavg import FedAvg, FedAvgConfig
from fedjoule.data.federated import build_federated_data
from fedjoule.models import build_model
from fedjoule.scenarios.schema import DatasetSection, ModelSection
from fedjoule.simulator.world import make_executor

WORKLOADS = {
    # name: (dataset, model, clients per round, local steps, batch)
    "logistic-synthetic-100": ("synthetic", "logistic", 100, 60, 10),
    "mlp-mnist-10": ("mnist", "mlp", 10, 60, 50),
    "mlp-mnist-100": ("mnist", "mlp", 100, 60, 50),
    "cnn-mnist-10": ("mnist", "cnn", 10, 60, 50),
}


def big_batch_round(model, w0, x, y, batch_idx, lr):
    """The limit: one model, K steps, each on all clients' batches stacked."""
    module = model.module
    with torch.no_grad():
        for p, v in zip(module.parameters(), model.unflatten(w0.clone()).values(), strict=True):
            p.copy_(v)
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    for k in range(batch_idx.shape[1]):
        idx = batch_idx[:, k].reshape(-1)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(module(x[idx]), y[idx]).backward()
        opt.step()


def sequential_round(model, w0, x, y, batch_idx, lr):
    """The per-client loop of the peers: load the global model, K SGD steps, next client."""
    module = model.module
    for client in range(batch_idx.shape[0]):
        with torch.no_grad():
            for p, v in zip(module.parameters(), model.unflatten(w0).values(), strict=True):
                p.copy_(v)
        opt = torch.optim.SGD(module.parameters(), lr=lr)
        for k in range(batch_idx.shape[1]):
            idx = batch_idx[client, k]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(module(x[idx]), y[idx]).backward()
            opt.step()


def measure(name, rounds, device, compiled=False):
    dataset, model_name, m, steps, batch = WORKLOADS[name]
    section = DatasetSection(name=dataset)
    if dataset == "synthetic":
        section = DatasetSection.model_validate(
            {"name": "synthetic", "synthetic": {"dim": 60, "classes": 10, "avg_samples": 600}}
        )
    n_clients = max(m, 100)
    data = build_federated_data(section, n_clients, seed=0)
    model, w0 = build_model(ModelSection(name=model_name), data.input_shape, data.n_classes, 0)
    model.module.to(device)
    w0 = w0.to(device)
    samples = torch.as_tensor(data.client_samples)
    algorithm = FedAvg(FedAvgConfig(), n_clients, samples)
    state = algorithm.init_state(w0)
    executors = {
        "vectorised": make_executor("vectorised", model, data, device),
        "vmap": make_executor("vmap", model, data, device),
    }
    flat = make_executor("vectorised", model, data, device)
    if flat.fuse:
        flat.fuse = False
        executors["vectorised_flat"] = flat
    if compiled:
        executors["compiled"] = make_executor("compiled", model, data, device)
    first_round = {}
    x, y = data.x_train.to(device), data.y_train.to(device)
    loops = {"sequential": sequential_round, "big_batch": big_batch_round}
    times = {k: [] for k in [*executors, *loops]}
    gen = np.random.default_rng(0)
    for r in range(rounds + 1):  # round 0 warms up
        ids = np.sort(gen.choice(n_clients, m, replace=False))
        idx = minibatch_indices(0, r, ids, data.client_train, steps, batch)
        setup = RoundSetup(0.05, torch.full((m,), steps), r)
        for label, executor in executors.items():
            ctx = algorithm.context(state, torch.as_tensor(ids), {}, setup)
            _sync(device)
            tic = time.perf_counter()
            executor.train(algorithm, ctx, setup, idx)
            _sync(device)
            if r:
                times[label].append(time.perf_counter() - tic)
            else:
                first_round[label] = time.perf_counter() - tic
        for label, loop in loops.items():
            _sync(device)
            tic = time.perf_counter()
            loop(model, w0, x, y, idx.to(device), 0.05)
            _sync(device)
            if r:
                times[label].append(time.perf_counter() - tic)
    result = {k: statistics.median(v) for k, v in times.items()}
    paired = {  # ratios taken round by round, then the median
        f"{a}/{b}": statistics.median(p / q for p, q in zip(times[a], times[b], strict=True))
        for a, b in (
            ("vectorised", "big_batch"),
            ("vectorised_flat", "big_batch"),
            ("vmap", "big_batch"),
            ("compiled", "big_batch"),
            ("sequential", "vectorised"),
            ("sequential", "vectorised_flat"),
        )
        if a in times and b in times
    }
    return {
        "workload": name,
        "rounds": rounds,
        "seconds_per_round": result,
        "paired": paired,
        "first_round_s": first_round,
    }


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compiled", action="store_true", help="also time torch.compile")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    device = torch.device(args.device)
    machine = f"{platform.machine()} {torch.get_num_threads()} threads, torch {torch.__version__}"
    if device.type == "cuda":
        machine += f", {torch.cuda.get_device_name()}"
    results = []
    for name in args.workloads:
        row = measure(name, args.rounds, device, args.compiled)
        row["machine"] = machine
        print(json.dumps(row), flush=True)
        results.append(row)
    save_results(f"executor-{device.type}", results, args.out)


if __name__ == "__main__":
    main()
