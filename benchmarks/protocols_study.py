"""Sync, buffered, async and hierarchical FL on one wireless deployment (issue 19,
docs/protocols.md): time, energy and client updates to a target accuracy, with 95 % CIs
over seeds, written to benchmarks/results/protocols_study.json and the docs page's plots.

The deployment: urban-macro-like radio (3GPP macro path loss, Rayleigh fading with
outage and retransmissions, OFDMA; three cells for the edge servers), a profile mix with
a heavy-tailed compute spread (log-normal sigma >= 1), Fashion-MNIST split Dirichlet(0.3),
an MLP. The arms (each with --seeds seeds, common random numbers per seed):

    sync          FedAvg, no deadline (waits for the slowest)
    sync-deadline FedAvg, round.deadline_s = --deadline-s
    sync-oc       FedAvg, over-commit 1.3 (keeps the first m arrivals)
    buffered      FedBuff, concurrency --concurrency, buffer_size m, 1/sqrt(1+t)
    async         FedAsync, concurrency --concurrency, mixing 0.6, polynomial a = 0.5
    hierarchical  HierFAVG, edge_rounds 2, backhaul 100 Mbit/s, 5 ms, 1e-8 J/bit

The full study (1,000 clients, 3 seeds) takes hours on a laptop-class CPU; --size and
--rounds scale it down (`--small` runs a smoke-sized version in minutes):

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/protocols_study.py \
        --size 1000 --seeds 3 --rounds 400
    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/protocols_study.py --small
"""

import argparse
import json
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from record import save_results  # noqa: E402 - benchmarks/record.py

from fedjoule.report.results import read_rounds  # noqa: E402
from fedjoule.scenarios.loading import load_scenario  # noqa: E402
from fedjoule.seeds import describe  # noqa: E402
from fedjoule.simulator.run import run_scenario  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "protocols"


def base(size: int, rounds: int, target: float, m: int, sigma: float) -> list[str]:
    """The deployment, common to every arm."""
    classes = (
        f"[{{profile: phone-lte-highend, share: 0.4, compute_spread_sigma: {sigma}}}, "
        f"{{profile: phone-lte-midrange, share: 0.4, compute_spread_sigma: {sigma}}}, "
        f"{{profile: phone-lte-lowend, share: 0.2, compute_spread_sigma: {sigma}}}]"
    )
    return [
        "dataset.name=fashion-mnist",
        "dataset.partition=dirichlet",
        "dataset.dirichlet_alpha=0.3",
        "model.name=mlp",
        "model.hidden=[200]",
        f"population.size={size}",
        f"population.device_classes={classes}",
        f"training.rounds={rounds}",
        "training.local_steps=10",
        "training.batch_size=32",
        "training.lr=0.05",
        f"training.clients_per_round={m}",
        "training.target_metric=accuracy",
        f"training.target_value={target}",
        "training.stop_at_target=true",
        "training.eval_every=1",
        "channel.path_loss=macro-3gpp",
        "channel.shadowing_sigma_db=8",
        "channel.fading=rayleigh",
        "channel.fading_per=transmission",
        "channel.uplink_bandwidth_hz=5.0e6",
        "channel.downlink_bandwidth_hz=20.0e6",
        "channel.bs_tx_power_dbm=46",
        "channel.access=ofdma",
        "channel.resource_blocks=5",
        "channel.outage=rayleigh",
        "channel.outage_target_se_bps_per_hz=2.0",
        "channel.max_retx=2",
        "topology.layout=hexagonal",
        "topology.cells=3",
        "topology.backhaul_capacity_bps=1e8",
        "topology.backhaul_latency_s=0.005",
        "availability.kind=always",
        "round.deadline_s=null",
        "round.min_clients=1",
    ]


def arms(m: int, concurrency: int, deadline_s: float) -> dict[str, list[str]]:
    return {
        "sync": [],
        "sync-deadline": [f"round.deadline_s={deadline_s}"],
        "sync-oc": ["round.overcommit=1.3"],
        "buffered": [
            "protocol.kind=buffered",
            f"protocol.concurrency={concurrency}",
            f"protocol.buffer_size={m}",
        ],
        "async": ["protocol.kind=async", f"protocol.concurrency={concurrency}"],
        "hierarchical": [
            "protocol.kind=hierarchical",
            "protocol.edge_rounds=2",
            "protocol.backhaul_energy_j_per_bit=1e-8",
        ],
    }


def one(arm: str, sets: list[str], seed: int, out: Path) -> dict:
    folder = out / f"{arm}-seed{seed}"
    scenario = load_scenario("default-theory", [*sets, f"seed={seed}"])
    tic = time.perf_counter()
    _, summary = run_scenario(scenario, folder)
    rows = read_rounds(folder / "rounds.csv")
    updates = [int(r["updates"]) if "updates" in r else int(r["arrived"]) for r in rows]
    reached = summary["rounds_to_target"]
    return {
        "arm": arm,
        "seed": seed,
        "reached": reached is not None,
        "time_to_target_s": summary["time_to_target_s"],
        "energy_to_target_j": summary["energy_to_target_j"],
        # client updates the server aggregated up to the target (sync: arrivals)
        "updates_to_target": sum(updates[:reached]) if reached else None,
        "versions_to_target": reached,
        "final_accuracy": summary["final_accuracy"],
        "wall_s": time.perf_counter() - tic,
        "curve": [(r["sim_time_end_s"], r["cumulative_energy_j"], r["accuracy"]) for r in rows],
    }


def plot(results: list[dict], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index, (name, unit) in enumerate((("time", "s"), ("energy", "J"))):
        fig, ax = plt.subplots(figsize=(6, 4))
        for arm in dict.fromkeys(r["arm"] for r in results):
            runs = [r for r in results if r["arm"] == arm]
            for i, r in enumerate(runs):
                xs = [c[index] for c in r["curve"] if c[2] == c[2]]
                ys = [c[2] for c in r["curve"] if c[2] == c[2]]
                ax.step(xs, ys, where="post", alpha=0.8, label=arm if i == 0 else None,
                        color=f"C{list(dict.fromkeys(x['arm'] for x in results)).index(arm)}")
        ax.set_xscale("log")
        ax.set_xlabel(f"simulated {name} ({unit})" if name == "time" else f"device {name} ({unit})")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / f"accuracy_vs_{name}.png", dpi=120)
        plt.close(fig)


TO_TARGET = (
    ("time_to_target_s", "simulated time to target (s)"),
    ("energy_to_target_j", "device energy to target (J)"),
    ("updates_to_target", "client updates to target"),
)


def plot_to_target(table: dict, folder: Path) -> Path:
    """The judged quantities per arm: mean with its 95 % CI over the seeds (clipped at 0,
    none of them can be negative), the seeds' own values as dots."""
    folder.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    names = list(table)
    for ax, (field, label) in zip(axes, TO_TARGET, strict=True):
        for i, arm in enumerate(names):
            d = table[arm][field]
            if d is None:
                continue
            mean, half = d["mean"], _ci(d)
            low = max(mean - half, 0.0)
            ax.bar(i, mean, color=f"C{i}", alpha=0.75)
            ax.errorbar(i, mean, yerr=[[mean - low], [half]], color="black", capsize=3)
            ax.plot([i] * len(d.get("values", [])), d.get("values", []), "k.", ms=3)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    path = folder / "to_target.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=400, help="versions at most per run")
    parser.add_argument("--m", type=int, default=10, help="clients_per_round (buffer size)")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--deadline-s", type=float, default=20.0)
    parser.add_argument("--target", type=float, default=0.75)
    parser.add_argument("--sigma", type=float, default=1.0, help="compute spread (>= 1)")
    parser.add_argument("--small", action="store_true", help="a smoke-sized study")
    parser.add_argument("--out", type=Path, default=Path("runs/protocols-study"))
    parser.add_argument("--arms", default=None, help="comma-separated subset of the arms")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the docs plots from the saved results")
    args = parser.parse_args()
    if args.replot:
        saved = json.loads((Path(__file__).parent / "results" / "protocols_study.json").read_text())
        plot(saved["runs"], DOCS)
        plot_to_target(saved["table"], DOCS)
        return
    if args.small:
        args.size, args.seeds, args.rounds, args.target = 60, 2, 60, 0.6
        args.concurrency = 10
    sets = base(args.size, args.rounds, args.target, args.m, args.sigma)
    chosen = arms(args.m, args.concurrency, args.deadline_s)
    if args.arms:
        chosen = {k: v for k, v in chosen.items() if k in args.arms.split(",")}
    results = []
    for arm, extra in chosen.items():
        for seed in range(args.seeds):
            result = one(arm, [*sets, *extra], seed, args.out)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)
    table = {}
    for arm in chosen:
        runs = [r for r in results if r["arm"] == arm]
        table[arm] = {"reached": sum(r["reached"] for r in runs), "seeds": len(runs)}
        for field in ("time_to_target_s", "energy_to_target_j", "updates_to_target"):
            values = [r[field] for r in runs if r[field] is not None]
            table[arm][field] = {**describe(values), "values": values} if values else None
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    name = "protocols_study_small" if args.small else "protocols_study"
    path = save_results(name, {"settings": settings, "table": table, "runs": results})
    plot(results, DOCS if not args.small else args.out)
    plot_to_target(table, DOCS if not args.small else args.out)
    for arm, row in table.items():
        cells = []
        for field in ("time_to_target_s", "energy_to_target_j", "updates_to_target"):
            d = row[field]
            cells.append("—" if d is None else f"{d['mean']:.4g} ± {_ci(d):.2g}")
        print(f"| {arm} | {row['reached']}/{row['seeds']} | " + " | ".join(cells) + " |")
    print(f"results in {path}")


def _ci(d: dict) -> float:
    value = d.get("ci95")
    return value if value is not None and math.isfinite(value) else float("nan")


if __name__ == "__main__":
    main()
