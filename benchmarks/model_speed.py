"""Speed of the new models: ResNet-18 (group norm, batch norm) and char-lstm, 10 clients.

For each model the implementations train the same 10 clients on the same minibatch
indices, round by round in turns (the order rotates every round), so that the
machine's drift cancels; ratios are taken round by round, then the
median. Times are per local step of all 10 clients.
- vectorised: fedjoule's executor as `make_executor("vectorised")` builds it (on a CPU,
  client by client by plain autograd into one (m, P) gradient for convolutional and
  recurrent models, LoopGradient; with batch norm's running statistics,
  BufferedGradient client by client, also by autograd);
- sequential: the reference SequentialExecutor (one client at a time, plain autograd);
- vmap: the same step loop with plain `vmap(grad(loss))` (`make_executor("vmap")`);
- loop_func (convolutional and recurrent models without running statistics): the same
  step loop with client-by-client gradients by `torch.func.grad` (FuncLoopGradient), the
  convolutional models' path before plain autograd was measured faster;
- big_batch: ONE nn.Module and torch.optim.SGD trained on all 10 clients' batches of a
  step stacked into one batch (10 B samples, the same number of steps): the compute
  limit, the same arithmetic without per-client weights.

Inputs are random tensors of the real shapes (3x32x32 images, 10 classes; sequences of
80 character ids from a vocabulary of 80): speed does not depend on the values.

    .venv/bin/python benchmarks/model_speed.py
"""

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from record import RESULTS, save_results  # benchmarks/record.py
from torch.func import grad

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import LoopGradient, VectorisedExecutor, minibatch_indices
from fedjoule.algorithms.fedavg import FedAvg, FedAvgConfig
from fedjoule.models import build_model
from fedjoule.scenarios.schema import ModelSection
from fedjoule.simulator.world import make_executor

CLIENTS = 10
WORKLOADS = {
    # name: (model section, input shape, classes, batch per client, local steps, rounds,
    #        rounds of the slow implementations: vmap and loop_func of the LSTM take 20-50x
    #        the others' time; they are timed in the first rounds only)
    "resnet18-group": ({"name": "resnet18", "norm": "group"}, (3, 32, 32), 10, 8, 2, 5, 5),
    "resnet18-batch": ({"name": "resnet18", "norm": "batch"}, (3, 32, 32), 10, 8, 2, 5, 5),
    "char-lstm": ({"name": "char-lstm"}, (80,), 80, 10, 2, 8, 3),
}
SLOW = {"char-lstm": ("vmap", "loop_func")}


def random_data(input_shape, n_classes, n_samples, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if len(input_shape) == 1:  # character ids, each position labelled with the next one
        x = torch.randint(0, n_classes, (n_samples, *input_shape), generator=gen)
        y = torch.randint(0, n_classes, (n_samples, *input_shape), generator=gen)
    else:
        x = torch.randn((n_samples, *input_shape), generator=gen)
        y = torch.randint(0, n_classes, (n_samples,), generator=gen)
    return SimpleNamespace(x_train=x, y_train=y)


def big_batch_round(model, w0, b0, x, y, batch_idx, lr):
    """The limit: one model, K steps, each on all clients' batches stacked."""
    module = model.module
    module.train()
    with torch.no_grad():
        for p, v in zip(module.parameters(), model.unflatten(w0).values(), strict=True):
            p.copy_(v)
        named = dict(module.named_buffers())
        for name, v in model.unflatten_buffers(b0).items():
            named[name].copy_(v)
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    for k in range(batch_idx.shape[1]):
        idx = batch_idx[:, k].reshape(-1)
        opt.zero_grad(set_to_none=True)
        model.objective(module(x[idx]), y[idx]).backward()
        opt.step()


class FuncLoopGradient(LoopGradient):
    """The same per-client loop with torch.func.grad instead of autograd (for comparison)."""

    def __init__(self, loss):
        super().__init__(loss)
        self.grad = grad(loss)


def executors_for(model, data, device):
    out = {
        "vectorised": make_executor("vectorised", model, data, device),
        "sequential": make_executor("sequential", model, data, device),
        "vmap": make_executor("vmap", model, data, device),
    }
    kinds = (torch.nn.Conv2d, torch.nn.RNNBase)
    if model.n_buffers or not any(isinstance(m, kinds) for m in model.module.modules()):
        return out  # (a batch-norm model's per-client loop is BufferedGradient's)
    loops = {"loop_func": FuncLoopGradient, "loop_autograd": LoopGradient}
    for label, cls in loops.items():
        if type(out["vectorised"].batched_grad) is not cls:  # not the default already
            out[label] = VectorisedExecutor(
                model.loss, data.x_train, data.y_train, device, cls(model.loss)
            )
    return out


def measure(name, device, rounds=None):
    section, input_shape, n_classes, batch, steps, default_rounds, slow_rounds = WORKLOADS[name]
    rounds = rounds or default_rounds
    slow_rounds = min(rounds, slow_rounds)
    per_client = 5 * steps * batch
    data = random_data(input_shape, n_classes, CLIENTS * per_client)
    client_train = [np.arange(k * per_client, (k + 1) * per_client) for k in range(CLIENTS)]
    model, w0 = build_model(ModelSection(**section), input_shape, n_classes, 0)
    model.module.to(device)
    w0, b0 = w0.to(device), model.flat_buffers().to(device)
    algorithm = FedAvg(FedAvgConfig(), CLIENTS, torch.full((CLIENTS,), per_client))
    state = algorithm.init_state(w0)
    executors = executors_for(model, data, device)
    labels = [*executors, "big_batch"]
    x, y = data.x_train.to(device), data.y_train.to(device)
    ids = np.arange(CLIENTS)
    times = {k: [] for k in labels}
    warm_up = {}
    load = [os.getloadavg()[0]]
    for r in range(rounds + 1):  # round 0 (one step) warms up
        n_steps = steps if r else 1
        idx = minibatch_indices(0, r, ids, client_train, n_steps, batch)
        setup = RoundSetup(0.05, torch.full((CLIENTS,), n_steps), r)
        now = [k for k in labels if r <= slow_rounds or k not in SLOW.get(name, ())]
        shift = r % len(now)  # every implementation takes every place in the order
        for label in now[shift:] + now[:shift]:
            _sync(device)
            tic = time.perf_counter()
            if label == "big_batch":
                big_batch_round(model, w0, b0, x, y, idx.to(device), 0.05)
            else:
                ctx = algorithm.context(state, torch.as_tensor(ids), {}, setup)
                buffers = b0.expand(CLIENTS, -1).clone() if model.n_buffers else None
                executors[label].train(algorithm, ctx, setup, idx, buffers)
            _sync(device)
            seconds = (time.perf_counter() - tic) / n_steps
            if r:
                times[label].append(seconds)
            else:
                warm_up[label] = seconds
        load.append(os.getloadavg()[0])
        shown = {k: times[k][-1] if r else warm_up[k] for k in now}
        print(f"  {name} round {r}: " + ", ".join(f"{k} {v:.3f}" for k, v in shown.items()))
    per_step = {k: statistics.median(v) for k, v in times.items()}
    pairs = [
        ("vectorised", "sequential"),
        ("vectorised", "big_batch"),
        ("sequential", "big_batch"),
        ("vmap", "vectorised"),
        ("vmap", "big_batch"),
        ("loop_func", "vectorised"),
        ("loop_autograd", "vectorised"),
    ]
    paired = {  # round by round (the first rounds only where one of them is slow)
        f"{a}/{b}": statistics.median(p / q for p, q in zip(times[a], times[b], strict=False))
        for a, b in pairs
        if a in times and b in times
    }
    return {
        "workload": name,
        "model": section,
        "clients": CLIENTS,
        "batch_per_client": batch,
        "local_steps": steps,
        "rounds": rounds,
        "rounds_of_slow": {k: slow_rounds for k in SLOW.get(name, ()) if k in labels},
        "n_params": model.n_params,
        "vectorised_gradient": gradient_name(executors["vectorised"]),
        "seconds_per_step": per_step,
        "seconds_per_step_min": {k: min(v) for k, v in times.items()},  # least disturbed
        "seconds_per_step_all": times,
        "paired": paired,
        "warm_up_seconds_per_step": warm_up,
        "load_average_1min": load,
    }


def gradient_name(executor):
    if executor.buffered is not None:
        loop = executor.buffered.batched is None
        return f"BufferedGradient({'client by client' if loop else 'vmap'})"
    return type(executor.batched_grad).__name__


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def machine(device):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=None, help="default: per workload")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*batching rule.*")  # vmap of nn.LSTM: measured
    device = torch.device(args.device)
    results = {"machine": machine(device), "workloads": []}
    print(json.dumps(results["machine"]), flush=True)
    for name in args.workloads:
        row = measure(name, device, args.rounds)
        shown = {k: row[k] for k in ("workload", "seconds_per_step", "paired")}
        print(json.dumps(shown), flush=True)
        results["workloads"].append(row)
    save_results(f"model-speed-{device.type}", results, args.out)


if __name__ == "__main__":
    main()
