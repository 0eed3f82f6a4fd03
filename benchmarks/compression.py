"""Compression study (issue 18): accuracy against uplink energy on mnist-dirichlet.

Seven uplink encodings of FedAvg's update (none, QSGD 8 and 2 levels, top-k 1 % and 10 %
with and without error feedback, scaled sign with error feedback) on the built-in
`mnist-dirichlet` scenario (MLP, 100 clients, 10 a round), each over 3 seeds, through
the sweep machinery. Writes benchmarks/results/compression.json, the Pareto plot
benchmarks/results/compression_pareto.png and prints the Markdown table of
benchmarks/RESULTS.md ("Compression").

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/compression.py \
        --rounds 100 --seeds 3 --workers 1 --out sweeps/compression
"""

import argparse
import csv
import math
import statistics
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from record import RESULTS, save_results  # noqa: E402 (benchmarks/record.py)
from scipy import stats  # noqa: E402

import fedjoule  # noqa: E402

CONFIGS = {
    "none": {"kind": "none"},
    "qsgd s=8": {"kind": "qsgd", "levels": 8},
    "qsgd s=2": {"kind": "qsgd", "levels": 2},
    "topk 1%": {"kind": "topk", "fraction": 0.01, "error_feedback": False},
    "topk 1% + EF": {"kind": "topk", "fraction": 0.01, "error_feedback": True},
    "topk 10%": {"kind": "topk", "fraction": 0.1, "error_feedback": False},
    "topk 10% + EF": {"kind": "topk", "fraction": 0.1, "error_feedback": True},
    "sign + EF": {"kind": "sign", "error_feedback": True},
}
FIELDS = ("uplink_bits_per_client", "energy_tx_j", "final_accuracy", "best_accuracy")


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and 95 % Student-t half-width."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default="sweeps/compression")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    tic = time.perf_counter()
    result = fedjoule.sweep(
        "mnist-dirichlet",
        {"compression.uplink": list(CONFIGS.values()), "seed": list(range(args.seeds))},
        args.out,
        overrides={"training.rounds": args.rounds},
        workers=args.workers,
        threads_per_run=1,
        device="cpu",
        data_dir=args.data_dir,
    )
    wall_s = time.perf_counter() - tic
    with open(Path(result.folder) / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    table = {}
    for label, spec in CONFIGS.items():
        own = [
            r
            for r in rows
            if fedjoule.load_scenario(
                Path(result.folder) / "runs" / r["run"] / "scenario.yaml"
            ).compression.uplink.model_dump()
            == {**_defaults(), **spec}
        ]
        figures = {}
        for name in FIELDS:
            if name == "uplink_bits_per_client":
                values = [_bits_per_upload(Path(result.folder) / "runs" / r["run"]) for r in own]
            else:
                values = [float(r[name]) for r in own]
            figures[name] = mean_ci(values)
        table[label] = {"spec": spec, "runs": len(own), **figures}
    save_results(
        "compression",
        {"rounds": args.rounds, "seeds": args.seeds, "wall_time_s": wall_s, "table": table},
    )
    plot(table, RESULTS / "compression_pareto.png", args.rounds)
    print(markdown(table))


def _defaults() -> dict:
    return {"kind": "none", "levels": None, "fraction": None, "error_feedback": False}


def _bits_per_upload(run: Path) -> float:
    """Uplink bits of one upload: the run's uplink bits over its upload attempts."""
    with open(run / "rounds.csv") as f:
        rows = list(csv.DictReader(f))
    bits = sum(float(r["uplink_bits"]) for r in rows)
    return bits / sum(float(r["uplink_attempts"]) for r in rows)


def markdown(table: dict) -> str:
    head = (
        "| uplink encoding | bits per upload | uplink energy energy_tx_j (J) | final accuracy "
        "| best accuracy |\n|---|---:|---:|---:|---:|"
    )
    lines = [head]
    for label, t in table.items():
        bits = t["uplink_bits_per_client"][0]
        cells = [f"{t[n][0]:.2f} ± {t[n][1]:.2f}" for n in ("energy_tx_j",)]
        cells += [f"{t[n][0]:.4f} ± {t[n][1]:.4f}" for n in ("final_accuracy", "best_accuracy")]
        lines.append(f"| {label} | {bits:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(table: dict, path: Path, rounds: int) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = []
    for label, t in table.items():
        x, xe = t["energy_tx_j"]
        y, ye = t["final_accuracy"]
        points.append((x, y, label))
        ax.errorbar(x, y, xerr=xe, yerr=ye, fmt="o", capsize=3, label=label)
    front, best = [], -1.0
    for x, y, _ in sorted(points):
        if y > best:
            front.append((x, y))
            best = y
    ax.step(*zip(*front, strict=True), where="post", color="grey", lw=0.8, zorder=0)
    ax.set_xscale("log")
    ax.set_xlabel("uplink energy energy_tx_j (J, log scale)")
    ax.set_ylabel("final test accuracy")
    ax.set_title(f"mnist-dirichlet, FedAvg, {rounds} rounds: mean and 95 % CI over seeds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
