"""Torch's CPU threads for a run: how waiting threads wait, and how many a run's work uses.

torch's CPU builds run their intra-op threads (and MKL's) on GNU OpenMP (libgomp). A
libgomp thread that has finished its share busy-waits for 300,000 spins before it
sleeps (libgomp manual, GOMP_SPINCOUNT, when OMP_WAIT_POLICY is unset): on cores shared
with other processes the spinning takes the time slices the working threads need: on a
busy 2-core machine the MNIST MLP of benchmarks/threads.py took 161 s against 20 s with
`--threads 1`, burning 6x the CPU seconds (benchmarks/RESULTS.md, "Threads"). Waiting
threads now spin 300 times, then sleep (GOMP_SPINCOUNT; OMP_WAIT_POLICY=PASSIVE for
LLVM's and Intel's runtimes). A step too small to split gains nothing from a second
thread, so such runs take one. A larger run's threads train a dense model's clients in
groups, one thread each, meeting once a round (algorithms/executor.py,
VectorisedExecutor.split_across_threads); other models split each operation.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from fedjoule.torch_import import load_torch

# forward FLOPs of one local step of a round's clients (batch x clients x FLOPs per
# sample) below which a run keeps to one thread: `fedjoule run default` does 3e4 a step,
# the MNIST MLP of benchmarks/threads.py 2e8, a ResNet-18 step of 2 clients x 16 images 4e10
SPLIT_FLOPS = 1e7


# libgomp's spins before a waiting thread sleeps: 300 bridge the shortest gaps between
# parallel regions on idle cores (0: 19 % slower than 300,000 on an idle machine, 300: 8 %)
# without burning busy ones (1000: 14 % slower than one thread there, 300: 7 %; RESULTS.md)
SPINS = "300"


def wait_passively() -> None:
    """Waiting OpenMP threads sleep after a short spin, unless OMP_WAIT_POLICY or
    GOMP_SPINCOUNT is set already. The runtime reads them when it loads, so this runs
    before torch is imported."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # LLVM's and Intel's runtimes: no spin
        os.environ["GOMP_SPINCOUNT"] = SPINS  # GNU libgomp, torch's: spin SPINS times


def step_flops(world) -> float:
    """Forward FLOPs of one local step of all clients of a round (the batched unit of work)."""
    training = world.scenario.training
    return world.forward_flops * training.batch_size * training.clients_per_round


# forward FLOPs of a step each thread beyond the second needs to pay for its meetings: on
# 16 cores the MNIST MLP (2e8 a step) took 13 s on 16 threads, 4.3 s on 2 or 4 and 7 s
# on 1 (benchmarks/RESULTS.md, "Threads", an H200 machine's CPU)
FLOPS_PER_THREAD = 5e7


def run_threads(world) -> int:
    """Threads for a run with no thread count given: one when a step is too small to split
    (SPLIT_FLOPS), else one per FLOPS_PER_THREAD of a step, at least two, at most
    torch's default (the cores, or OMP_NUM_THREADS)."""
    flops = step_flops(world)
    if flops < SPLIT_FLOPS:
        return 1
    return min(load_torch().get_num_threads(), max(2, int(flops // FLOPS_PER_THREAD)))


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's CPU threads set to `threads` inside, the setting before restored after."""
    torch = load_torch()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
