"""Client state at scale: SCAFFOLD, 10,000 clients, MNIST MLP, 100 a round, 50 rounds.

Runs the same scenario twice, each in a fresh process so that its peak resident memory
is its own: with the client-state store spilling past a memory budget, and with
everything in memory. Prints both peaks and checks the final global models are equal.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/client_state_scale.py
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from record import save_results  # benchmarks/record.py

SCENARIO = [
    "algorithm.name=scaffold",
    "dataset.name=mnist",
    "dataset.partition=iid",
    "model.name=mlp",
    "model.zero_init=false",
    "population.size=10000",
    "training.clients_per_round=100",
    "training.local_steps=5",
    "training.batch_size=10",
    "training.lr=0.05",
    "training.eval_every=10",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    "dataset.local_test_samples=20",
]


def child(out: Path, rounds: int, budget_mb: float | None) -> None:
    """One run; prints its peak RSS and wall time as JSON."""
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.run import run_scenario

    tic = time.perf_counter()
    scenario = load_scenario("default-theory", [*SCENARIO, f"training.rounds={rounds}"])
    _, summary = run_scenario(scenario, out, device="cpu", state_memory_mb=budget_mb)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB -> GB
    print(
        json.dumps(
            {
                "peak_rss_gb": round(peak_gb, 3),
                "wall_s": round(time.perf_counter() - tic, 1),
                "final_accuracy": summary["final_accuracy"],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--budget-mb", type=float, default=512)
    parser.add_argument("--out", type=Path, default=Path("runs/benchmark-client-state"))
    parser.add_argument("--child", nargs=2, metavar=("OUT", "BUDGET"))
    args = parser.parse_args()
    if args.child:
        out, budget = args.child
        child(Path(out), args.rounds, None if budget == "none" else float(budget))
        return
    results = {}
    for label, budget in (("spilling", str(args.budget_mb)), ("in_memory", "none")):
        folder = args.out / label
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--rounds",
                str(args.rounds),
                "--child",
                str(folder),
                budget,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(label, results[label], flush=True)

    import torch

    from fedjoule.simulator.checkpoint import read_checkpoint

    w = {
        k: read_checkpoint(args.out / k / "checkpoint.pt")["simulation"]["state"]["w"]
        for k in results
    }
    results["final_models_equal"] = bool(torch.equal(w["spilling"], w["in_memory"]))
    for label in ("spilling", "in_memory"):  # client_state.bin, or a compacted -N.bin
        size = sum(f.stat().st_size for f in (args.out / label).glob("client_state*.bin"))
        results[label]["state_file_gb"] = round(size / 2**30, 2)
    print(json.dumps(results))
    save_results("client-state-scale", results)


if __name__ == "__main__":
    main()
