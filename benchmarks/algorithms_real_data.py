"""Real-data comparison of the algorithms (issue 3), written to benchmarks/results/.

Part `mnist`: the FedDC paper's MNIST protocol (Table 1): MLP 784-200-200-10, 100 clients,
Dirichlet 0.3, 15 % Bernoulli participation, 5 local epochs, batch 50, lr 0.1 with
decay 0.998, weight decay 1e-3, clipping at 10; rounds to 97 % test accuracy.

Part `fashion`: the DRDM paper's fairness view: Fashion-MNIST, Dirichlet 0.1 with Zipf
client sizes, 10 clients a round; worst-client, 10th-percentile and mean accuracy of
DRDM and DRFA against FedAvg and SCAFFOLD after the same number of rounds.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/algorithms_real_data.py \
        --part mnist --max-rounds 300
"""

import argparse
import json
import time
from pathlib import Path

import torch
from record import save_results  # benchmarks/record.py

from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario

MNIST = [
    "dataset.name=mnist",
    "dataset.partition=dirichlet",
    "dataset.dirichlet_alpha=0.3",
    "model.name=mlp",
    "model.zero_init=false",
    "population.size=100",
    "training.participation=bernoulli",
    "training.participation_prob=0.15",
    "training.local_epochs=5",
    "training.batch_size=50",
    "training.lr=0.1",
    "training.lr_decay=0.998",
    "training.weight_decay=0.001",
    "training.clip_grad_norm=10",
    "training.target_value=0.97",
    "training.stop_at_target=true",
    "round.deadline_s=null",
]
MNIST_ALGORITHMS = {  # options from the FedDyn/FedDC benchmark code (their example scripts)
    "fedavg": [],
    "fedprox": ["algorithm.mu=0.0001"],
    "scaffold": [],
    "feddyn": ["algorithm.alpha=0.01"],
    "feddc": ["algorithm.alpha=0.1"],
    "fedacg": [],
    "taco": [],
}

FASHION = [
    "dataset.name=fashion-mnist",
    "dataset.partition=dirichlet",
    "dataset.dirichlet_alpha=0.1",
    "dataset.sizes=zipf",
    "dataset.zipf_s=1.0",
    "dataset.min_client_samples=50",
    "model.name=mlp",
    "model.zero_init=false",
    "population.size=100",
    "training.clients_per_round=10",
    "training.local_steps=20",
    "training.batch_size=50",
    "training.lr=0.05",
    "training.target_metric=worst_client_accuracy",
    "round.deadline_s=null",
]
FASHION_ALGORITHMS = {
    "fedavg": [],
    "scaffold": [],
    "drfa": ["algorithm.dual_lr=0.01"],
    "drdm": ["algorithm.dual_lr=0.01", "algorithm.alpha=0.01"],
}


def run_part(base, algorithms, rounds, out_dir: Path, label: str) -> list[dict]:
    results = []
    for name, options in algorithms.items():
        scenario = load_scenario(
            "default-theory",
            [*base, f"algorithm.name={name}", f"training.rounds={rounds}", *options],
        )
        folder = out_dir / f"{label}-{name}"
        tic = time.perf_counter()
        _, summary = run_scenario(scenario, folder, device="auto")
        summary = {"algorithm": name, "wall_s": round(time.perf_counter() - tic, 1), **summary}
        print(
            json.dumps(
                {
                    k: summary[k]
                    for k in (
                        "algorithm",
                        "rounds_completed",
                        "rounds_to_target",
                        "final_accuracy",
                        "worst_client_accuracy",
                        "client_accuracy_p10",
                        "energy_total_j",
                        "wall_s",
                    )
                }
            ),
            flush=True,
        )
        results.append(summary)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["mnist", "fashion", "all"], default="all")
    parser.add_argument("--max-rounds", type=int, default=300, help="MNIST round cap")
    parser.add_argument("--fashion-rounds", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/benchmark-algorithms"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.part in ("mnist", "all"):
        results = run_part(MNIST, MNIST_ALGORITHMS, args.max_rounds, args.out, "mnist")
        save_results("algorithms-mnist", results)
    if args.part in ("fashion", "all"):
        results = run_part(FASHION, FASHION_ALGORITHMS, args.fashion_rounds, args.out, "fashion")
        save_results("algorithms-fashion", results)


if __name__ == "__main__":
    main()
