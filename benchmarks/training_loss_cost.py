"""The cost of recording each client's training loss (docs/policies.md#the-training-loss).

20 rounds of the MNIST MLP (20 clients x 10 steps x 32 samples, FedAvg, one thread),
trained with and without `record_loss`, in turns within one process so that the machine's
drift cancels; CPU time of the process (less sensitive to a busy machine than wall time).
Also checks that recording leaves the trained model the same bit for bit.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/training_loss_cost.py
"""

import argparse
import statistics
import time

import numpy as np
import torch

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import minibatch_indices
from fedjoule.algorithms.learning import train_clients
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.world import build_world

N, M, STEPS, BATCH, ROUNDS = 100, 20, 10, 32, 20


def twenty_rounds(world, record_loss: bool) -> torch.Tensor:
    """The 20 rounds' training (the same clients and batches each time); the final model."""
    algorithm = world.algorithm
    state = algorithm.init_state(world.w0)
    for r in range(ROUNDS):
        ids = np.sort(np.random.default_rng(r).choice(N, M, replace=False))
        batches = minibatch_indices(0, r, ids, world.data.client_train, STEPS, BATCH)
        setup = RoundSetup(0.05, torch.full((M,), STEPS), r)
        result = train_clients(
            algorithm, world.executor, state, torch.as_tensor(ids), setup, batches,
            record_loss=record_loss,
        )  # fmt: skip
        state = algorithm.aggregate(state, result.uploads, torch.as_tensor(ids))
    return state["w"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", default="vectorised", choices=("vectorised", "sequential"))
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    scenario = load_scenario("default", [
        "dataset.name=mnist", "model.name=mlp", f"population.size={N}",
    ])  # fmt: skip
    world = build_world(scenario, device="cpu", executor=args.executor)
    cpu_s = {False: [], True: []}
    finals = {}
    for turn in range(args.turns):
        for record in (False, True) if turn % 2 == 0 else (True, False):
            start = time.process_time()
            finals[record] = twenty_rounds(world, record)
            cpu_s[record].append(time.process_time() - start)
    off, on = (statistics.median(cpu_s[flag]) for flag in (False, True))
    print(f"{args.executor}: {args.turns} turns, CPU s without {cpu_s[False]}, with {cpu_s[True]}")
    print(f"median {off:.3f} s -> {on:.3f} s ({100 * (on / off - 1):+.1f} %); fastest "
          f"{min(cpu_s[False]):.3f} s -> {min(cpu_s[True]):.3f} s")  # fmt: skip
    print("the same model bit for bit:", torch.equal(finals[False], finals[True]))


if __name__ == "__main__":
    main()
