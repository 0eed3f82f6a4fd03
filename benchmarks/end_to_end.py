"""A whole run as a user starts it, timed end to end (start-up included), against Flower.

The workload of benchmarks/RESULTS.md ("End to end against Flower"): MNIST, MLP
784-200-200-10, FedAvg, 10 clients a round,
60 local steps of batch 50, 20 rounds. Flower's simulation of it (flwr 1.41 on Ray,
measured on this kind of machine in an earlier session): 15-19 s to start and 0.65-0.95 s a
round, i.e. 28-38 s for 20 rounds. Flower is not installed here (never a project
dependency); its figures are quoted, ours are measured in the same way (wall clock of
the whole command, medians of fresh processes).

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/end_to_end.py
"""

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from record import save_results  # benchmarks/record.py

FLOWER_20_ROUNDS_S = (15 + 20 * 0.65, 19 + 20 * 0.95)  # quoted in benchmarks/RESULTS.md
COMMAND = [
    sys.executable,
    "-m",
    "fedjoule.cli",
    "run",
    "mnist-dirichlet",
    "--quiet",
    "--device",
    "cpu",
    "--set",
    "training.rounds=20",
    "--set",
    "training.local_steps=60",
    "--set",
    "training.batch_size=50",
    "--set",
    "training.clients_per_round=10",
]


def main(repeats: int = 3) -> None:
    times = []
    for i in range(repeats):
        out = Path("runs/benchmark-end-to-end") / str(i)
        shutil.rmtree(out, ignore_errors=True)
        tic = time.perf_counter()
        subprocess.run([*COMMAND, "--out", str(out)], check=True, capture_output=True)
        times.append(time.perf_counter() - tic)
    ours = statistics.median(times)
    result = {
        "fedjoule_20_rounds_s": round(ours, 1),
        "runs_s": [round(t, 1) for t in times],
        "flower_20_rounds_s": FLOWER_20_ROUNDS_S,
        "speedup_vs_flower": [round(f / ours, 2) for f in FLOWER_20_ROUNDS_S],
    }
    print(json.dumps(result))
    save_results("end-to-end", result)


if __name__ == "__main__":
    main()
