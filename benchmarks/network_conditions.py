"""Network-conditions study (issue 20), written to benchmarks/results/network_conditions/.

Part `interference`: dense-small-cells without interference, and with co-channel
interference at reuse 1 and 3 (reuse 7 on its 7 cells, no co-channel cell, as the
interference-free reference of the SINR), over seeds: the clients' mean uplink SINR
against their SNR (system-only runs), time and energy to a target accuracy with 95 % CIs
(training runs), and `fedjoule capacity`'s answers (the largest clients_per_round and the
smallest uplink_bandwidth_hz meeting the scenario's 2 s deadline), per configuration.

Part `walking`: walking-trace-links with 100 clients, all selected every round
(system-only, events.jsonl): the distribution of upload times and energies, plotted.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/network_conditions.py \\
        --part all --seeds 3
"""

import argparse
import csv
import json
import math
import time
from pathlib import Path

import numpy as np

import fedjoule
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_run import run_system

OUT = Path(__file__).resolve().parent / "results" / "network_conditions"
COCHANNEL = "channel.interference=cochannel"
CONFIGS = {
    "none": [],
    "cochannel-reuse1": [COCHANNEL, "topology.reuse_factor=1"],
    "cochannel-reuse3": [COCHANNEL, "topology.reuse_factor=3"],
}
REFERENCE = {"cochannel-reuse7 (no co-channel cell)": [COCHANNEL, "topology.reuse_factor=7"]}


def ci95(values) -> dict:
    """Mean, sample std and the 95 % t-interval half-width (None with fewer than 2)."""
    from scipy import stats

    x = np.asarray([v for v in values if v is not None], dtype=float)
    if len(x) == 0:
        return {"mean": None, "ci95": None, "n": 0}
    half = None
    if len(x) > 1:
        half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return {"mean": float(x.mean()), "ci95": half, "n": int(len(x))}


def read_clients(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def sinr_figures(out: Path, seed: int, overrides: list[str], rounds: int) -> dict:
    """Mean over the clients that sent of their mean SINR (dB), and of their SNR (dB)."""
    scenario = load_scenario(
        "dense-small-cells",
        [*overrides, f"seed={seed}", f"training.rounds={rounds}", "output.timeline_rounds=[]"],
    )
    folder, summary = run_system(scenario, out, engine="simpy")
    rows = [r for r in read_clients(folder / "clients.csv") if int(r["selected"]) > 0]
    snr = [float(r["mean_uplink_snr_db"]) for r in rows]
    sinr = [float(r["mean_uplink_sinr_db"]) for r in rows if r.get("mean_uplink_sinr_db")]
    p5 = [float(r["p5_uplink_sinr_db"]) for r in rows if r.get("p5_uplink_sinr_db")]
    return {
        "mean_snr_db": float(np.mean(snr)),
        "mean_sinr_db": float(np.mean(sinr)) if sinr else None,
        "mean_p5_sinr_db": float(np.mean(p5)) if p5 else None,
        "system_energy_j": summary["energy_total_j"],
        "system_time_s": summary["sim_time_s"],
        "dropped_deadline": summary["dropped_deadline"],
    }


def part_interference(seeds: list[int], target: float, rounds: int, train: bool) -> dict:
    result = {"target_accuracy": target, "seeds": seeds, "configs": {}}
    for name, overrides in {**CONFIGS, **REFERENCE}.items():
        per_seed = []
        for seed in seeds:
            tic = time.perf_counter()
            row = sinr_figures(OUT / "runs" / f"{name}-system-s{seed}", seed, overrides, rounds)
            if train and name in CONFIGS:
                scenario = load_scenario(
                    "dense-small-cells",
                    [
                        *overrides,
                        f"seed={seed}",
                        f"training.rounds={rounds}",
                        f"training.target_value={target}",
                        "output.timeline_rounds=[]",
                    ],
                )
                _, summary = run_scenario(
                    scenario, OUT / "runs" / f"{name}-train-s{seed}", device="cpu"
                )
                row.update(
                    time_to_target_s=summary["time_to_target_s"],
                    energy_to_target_j=summary["energy_to_target_j"],
                    rounds_to_target=summary["rounds_to_target"],
                    final_accuracy=summary["final_accuracy"],
                )
            row["wall_s"] = time.perf_counter() - tic
            per_seed.append(row)
            print(name, seed, json.dumps(row), flush=True)
        keys = [k for k in per_seed[0] if k != "wall_s"]
        result["configs"][name] = {
            "per_seed": per_seed,
            **{k: ci95([r.get(k) for r in per_seed]) for k in keys},
        }
        if name in CONFIGS:
            result["configs"][name]["capacity"] = capacity_answers(name, overrides, seeds)
    return result


# (search, deadline_s): the scenario's 2 s deadline, and a tight 0.5 s one
CAPACITY_QUESTIONS = [
    ("clients_per_round", 2.0),
    ("clients_per_round", 0.5),
    ("uplink_bandwidth_hz", 2.0),
]


def capacity_answers(name: str, overrides: list[str], seeds: list[int]) -> dict:
    """`fedjoule capacity` on each configuration: the answer per seed and its mean/CI."""
    import shutil

    out = {}
    for search, deadline_s in CAPACITY_QUESTIONS:
        answers = []
        for seed in seeds:
            scenario = load_scenario(
                "dense-small-cells", [*overrides, f"seed={seed}", "output.timeline_rounds=[]"]
            )
            folder = OUT / "runs" / f"{name}-capacity-{search}-{deadline_s:g}s-s{seed}"
            shutil.rmtree(folder, ignore_errors=True)
            result = fedjoule.capacity(
                scenario, folder, search=search, rounds=20, deadline_s=deadline_s
            )
            answers.append(result.answer)
        key = f"{search} (deadline {deadline_s:g} s)"
        out[key] = {"per_seed": answers, **ci95(answers)}
        print(name, "capacity", key, answers, flush=True)
    return out


def part_walking(clients: int, rounds: int) -> dict:
    """Upload times and energies of `clients` phones on the walking trace."""
    scenario = load_scenario(
        "walking-trace-links",
        [
            f"population.size={clients}",
            f"training.clients_per_round={clients}",
            f"training.rounds={rounds}",
            "output.events=true",
            "round.deadline_s=null",
        ],
    )
    folder, summary = run_system(scenario, OUT / "runs" / "walking", engine="simpy")
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    ups = [e for e in events if e["kind"] == "uplink"]
    downs = [e for e in events if e["kind"] == "downlink"]
    times = np.array([e["end_s"] - e["start_s"] for e in ups])
    energies = np.array([e["energy_j"] for e in ups])
    rates = np.array([e["bits"] / (e["end_s"] - e["start_s"]) for e in ups]) / 1e6

    def quantiles(x):
        q = np.percentile(x, [5, 25, 50, 75, 95])
        return {
            "mean": float(x.mean()),
            "min": float(x.min()),
            "max": float(x.max()),
            **{f"p{p}": float(v) for p, v in zip((5, 25, 50, 75, 95), q, strict=True)},
        }

    plot_walking(times, energies, OUT / "walking_uploads.png", clients, rounds)
    return {
        "clients": clients,
        "rounds": rounds,
        "uploads": len(ups),
        "upload_bits": ups[0]["bits"],
        "upload_time_s": quantiles(times),
        "upload_energy_j": quantiles(energies),
        "upload_mean_rate_mbps": quantiles(rates),
        "download_time_s": quantiles(np.array([e["end_s"] - e["start_s"] for e in downs])),
        "energy_total_j": summary["energy_total_j"],
    }


def plot_walking(times, energies, path: Path, clients: int, rounds: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, values, label in (
        (axes[0], times * 1e3, "upload time (ms)"),
        (axes[1], energies * 1e3, "upload energy (mJ)"),
    ):
        ax.hist(values, bins=np.logspace(np.log10(values.min()), np.log10(values.max()), 40))
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("uploads")
        ax.axvline(np.median(values), color="k", ls="--", lw=1, label="median")
        ax.legend()
    fig.suptitle(
        f"walking-trace-links: {clients} clients x {rounds} rounds on the 5Gophers walking "
        "trace (downlink data, uplink at 0.1x)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["interference", "walking", "all"], default="all")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.40)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-train", action="store_true", help="SINR and capacity only")
    parser.add_argument("--walking-clients", type=int, default=100)
    parser.add_argument("--walking-rounds", type=int, default=20)
    parser.add_argument(
        "--capacity-only", action="store_true", help="redo only the capacity answers"
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results_path = OUT / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    if args.capacity_only:
        seeds = list(range(args.seeds))
        for name, overrides in CONFIGS.items():
            config = results["interference"]["configs"][name]
            config["capacity"] = capacity_answers(name, overrides, seeds)
            results_path.write_text(json.dumps(results, indent=1))
        return
    if args.part in ("walking", "all"):
        results["walking"] = part_walking(args.walking_clients, args.walking_rounds)
        results_path.write_text(json.dumps(results, indent=1))
    if args.part in ("interference", "all"):
        seeds = list(range(args.seeds))
        results["interference"] = part_interference(
            seeds, args.target, args.rounds, not args.no_train
        )
        results_path.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
