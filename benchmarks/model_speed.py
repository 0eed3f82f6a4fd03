"""Speed of the new models: ResNet-18 (group norm, batch norm) and char-lstm, 10 clients.

For each model the implementations train the same 10 clients on the same minibatch
indices, round by round in turns (the order rotates every round), so that the
machine's drift cancels; ratios are taken round by round, then the median. Times are
per local step of all 10 clients. The machine is shared: a timing during which other
processes used more than 10 % of its CPUs (from /proc/stat) is marked `*` and left out
of the figures, and rounds go on (up to twice as many) until each implementation has
its number of clean ones. Page faults per step are recorded too.
- vectorised: fedjoule's executor as `make_executor("vectorised")` builds it (on a CPU,
  client by client by plain autograd into one (m, P) gradient for convolutional and
  recurrent models, LoopGradient; with batch norm's running statistics,
  BufferedGradient client by client, also by autograd);
- sequential: the reference SequentialExecutor (one client at a time, plain autograd);
- vmap: the same step loop with plain `vmap(grad(loss))` (`make_executor("vmap")`);
- loop_func (convolutional and recurrent models without running statistics): the same
  step loop with client-by-client gradients by `torch.func.grad` (FuncLoopGradient, the
  convolutional models' path before this benchmark);
- big_batch: ONE nn.Module and torch.optim.SGD trained on all 10 clients' batches of a
  step stacked into one batch (10 B samples, the same number of steps): the compute
  limit, the same arithmetic without per-client weights.

Inputs are random tensors of the real shapes (3x32x32 images, 10 classes; sequences of
80 character ids from a vocabulary of 80): speed does not depend on the values.

    .venv/bin/python benchmarks/model_speed.py [--keep-freed-memory]

`--keep-freed-memory` times the same with glibc malloc keeping freed memory (no mmap, no
trim), which removes the page faults (up to half of a ResNet-18 step on this machine);
the results file keeps one entry per mode. About 7 minutes each on 2 idle cores.
"""

import argparse
import ctypes
import json
import os
import platform
import resource
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
# A timing is clean when other processes used at most this share of the machine's CPUs
# meanwhile (from /proc/stat). The machine is shared: another process's test run slows a
# step of these models 2-10x, so the figures are medians of the clean rounds, and rounds
# go on (up to twice as many) until every implementation has its number of clean ones.
CLEAN = 0.1
_HZ = os.sysconf("SC_CLK_TCK")


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
    slow = [k for k in SLOW.get(name, ()) if k in labels]
    x, y = data.x_train.to(device), data.y_train.to(device)
    ids = np.arange(CLIENTS)
    runs = {k: [] for k in labels}  # (round, s per step, others' CPU share, page faults/step)
    warm_up = {}

    def wanted(label, r):
        """Rounds go on until every implementation has its clean rounds (or 2x rounds)."""
        need = slow_rounds if label in slow else rounds
        return sum(o <= CLEAN for _, _, o, _ in runs[label]) < need and r <= 2 * rounds

    r = 0
    while r == 0 or any(wanted(k, r) for k in labels):
        n_steps = steps if r else 1  # round 0 (one step) warms up
        idx = minibatch_indices(0, r, ids, client_train, n_steps, batch)
        setup = RoundSetup(0.05, torch.full((CLIENTS,), n_steps), r)
        if r == 0 or r <= rounds:
            now = [k for k in labels if r <= slow_rounds or k not in slow]
        else:  # extra rounds for those short of clean ones (and their partners)
            now = [k for k in labels if k not in slow or wanted(k, r)]
        shift = r % len(now)  # every implementation takes every place in the order
        for label in now[shift:] + now[:shift]:
            _sync(device)
            before = _cpu_seconds()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            tic = time.perf_counter()
            if label == "big_batch":
                big_batch_round(model, w0, b0, x, y, idx.to(device), 0.05)
            else:
                ctx = algorithm.context(state, torch.as_tensor(ids), {}, setup)
                buffers = b0.expand(CLIENTS, -1).clone() if model.n_buffers else None
                executors[label].train(algorithm, ctx, setup, idx, buffers)
            _sync(device)
            wall = time.perf_counter() - tic
            others = _others_share(before, _cpu_seconds(), wall)
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            if r:
                runs[label].append((r, wall / n_steps, others, faults // n_steps))
            else:
                warm_up[label] = wall
        shown = {k: runs[k][-1][1:3] if r else (warm_up[k], 0) for k in now}
        print(
            f"  {name} round {r}: "
            + ", ".join(f"{k} {v:.3f}{'' if o <= CLEAN else '*'}" for k, (v, o) in shown.items()),
            flush=True,
        )
        r += 1
    clean = {k: [s for _, s, o, _ in v if o <= CLEAN] for k, v in runs.items()}
    pairs = [
        ("vectorised", "sequential"),
        ("vectorised", "big_batch"),
        ("sequential", "big_batch"),
        ("vmap", "vectorised"),
        ("vmap", "big_batch"),
        ("loop_func", "vectorised"),
        ("loop_autograd", "vectorised"),
    ]
    paired, paired_rounds = {}, {}
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        of_b = {r: (s, o) for r, s, o, _ in runs[b]}
        both = [(s / of_b[r][0], max(o, of_b[r][1])) for r, s, o, _ in runs[a] if r in of_b]
        good = [q for q, o in both if o <= CLEAN]
        use = good if len(good) >= 2 else [q for q, _ in both]  # too few clean: all rounds
        paired[f"{a}/{b}"] = statistics.median(use)
        paired_rounds[f"{a}/{b}"] = f"{len(use)} of {len(both)}" + ("" if use is good else " (all)")
    return {
        "workload": name,
        "model": section,
        "clients": CLIENTS,
        "batch_per_client": batch,
        "local_steps": steps,
        "rounds_run": r - 1,
        "n_params": model.n_params,
        "vectorised_gradient": gradient_name(executors["vectorised"]),
        "seconds_per_step": {  # medians of the clean rounds (of all where fewer than 2)
            k: statistics.median(clean[k] if len(clean[k]) >= 2 else [s for _, s, _, _ in v])
            for k, v in runs.items()
        },
        "seconds_per_step_min": {k: min(s for _, s, _, _ in v) for k, v in runs.items()},
        "page_faults_per_step": {  # minor faults: memory freed to the kernel, touched again
            k: statistics.median(f for *_, f in v) for k, v in runs.items()
        },
        "clean_rounds": {k: len(v) for k, v in clean.items()},
        "paired": paired,
        "paired_rounds": paired_rounds,
        "rounds": {  # every timed round: [round, s per step, others' CPU share, faults/step]
            k: [[r, round(s, 4), round(o, 3), f] for r, s, o, f in v] for k, v in runs.items()
        },
        "warm_up_seconds": warm_up,
    }


def _cpu_seconds() -> tuple[float, float]:
    """(CPU seconds the whole machine has been busy, CPU seconds of this process)."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:9]]  # user .. steal
    busy = sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    own = os.times()
    return busy / _HZ, own.user + own.system


def _others_share(before, after, wall) -> float:
    """The share of the machine's CPUs other processes used while one thing was timed."""
    others = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, others) / (os.cpu_count() * wall)


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


def keep_freed_memory() -> bool:
    """glibc malloc without mmap and without trimming: freed memory is reused instead of
    returned to the kernel and faulted in again (ResNet-18 at batch 8: about 500,000 page
    faults a step otherwise, here half the step's time). Same as GLIBC_TUNABLES=
    glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647; False where not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(
            libc.mallopt(m_trim_threshold, ctypes.c_int(2**31 - 1))
        )
    except (OSError, AttributeError):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=None, help="default: per workload")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="glibc malloc keeps freed memory (no mmap, no trim): no page faults; recorded "
        "apart in the results file",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*batching rule.*")  # vmap of nn.LSTM: measured
    device = torch.device(args.device)
    mode = "default"
    if args.keep_freed_memory:
        if not keep_freed_memory():
            parser.error("--keep-freed-memory needs glibc's mallopt")
        mode = "keep_freed_memory"
    results = {"machine": machine(device), "allocator": mode, "workloads": []}
    print(json.dumps(results["machine"]), flush=True)
    for name in args.workloads:
        row = measure(name, device, args.rounds)
        shown = {k: row[k] for k in ("workload", "seconds_per_step", "paired")}
        print(json.dumps(shown), flush=True)
        results["workloads"].append(row)
    name = f"model-speed-{device.type}"
    path = args.out / f"{name}.json"  # one entry per allocator mode, each from its own run
    runs = json.loads(path.read_text()).get("runs", {}) if path.exists() else {}
    runs[mode] = results
    save_results(name, {"runs": dict(sorted(runs.items()))}, args.out)


if __name__ == "__main__":
    main()
