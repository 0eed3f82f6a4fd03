"""System-only engine at deployment scale: device-rounds per second at 10k, 100k and 1M
devices (100 rounds each), peak memory, and `fedjoule capacity` at 100k devices.

Run: PYTHONPATH=. python benchmarks/system_engine.py  (each measurement in a fresh process,
so the peak resident memory is that of one run)."""

import json
import resource
import subprocess
import sys
import time

from record import save_results  # benchmarks/record.py

SCENARIO = ["--set", "training.clients_per_round=100"]


def one_run(n: int, rounds: int) -> dict:
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system import SystemEngine
    from fedjoule.simulator.system_world import build_system_world

    tic = time.perf_counter()
    s = load_scenario("default-theory", [f"population.size={n}", "training.clients_per_round=100"])
    world = build_system_world(s)
    build_s = time.perf_counter() - tic
    tic = time.perf_counter()
    SystemEngine(world).run(rounds, lambda row: None)
    run_s = time.perf_counter() - tic
    return {
        "devices": n, "rounds": rounds, "build_s": build_s, "run_s": run_s,
        "total_s": build_s + run_s, "device_rounds_per_s": n * rounds / run_s,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }  # fmt: skip


def capacity_run(n: int) -> dict:
    from fedjoule.planning.capacity import plan_capacity
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system_world import build_system_world

    tic = time.perf_counter()
    s = load_scenario("default-theory", [f"population.size={n}"])
    plan = plan_capacity(s, build_system_world(s), deadline_s=0.5, energy_budget_j=0.05)
    return {
        "devices": n, "capacity_s": time.perf_counter() - tic, "answer": plan["answer"],
        "candidates": len(plan["evaluations"]),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1:  # child: one measurement
        kind, n = sys.argv[1], int(sys.argv[2])
        print(json.dumps(one_run(n, 100) if kind == "run" else capacity_run(n)))
        return
    results = []
    for kind, n in [("run", 10_000), ("run", 100_000), ("run", 1_000_000), ("capacity", 100_000)]:
        line = (
            subprocess.run(
                [sys.executable, __file__, kind, str(n)], capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        r = json.loads(line)
        results.append({"kind": kind, **r})
        if kind == "run":
            print(
                f"system engine {n:>9,} devices x {r['rounds']} rounds: run {r['run_s']:.2f} s "
                f"(+ build {r['build_s']:.2f} s), {r['device_rounds_per_s']:.3g} device-rounds/s, "
                f"peak RSS {r['peak_rss_gb']:.2f} GB"
            )
        else:
            print(
                f"fedjoule capacity {n:,} devices: {r['capacity_s']:.2f} s for "
                f"{r['candidates']} candidates (answer m={r['answer']}), peak RSS "
                f"{r['peak_rss_gb']:.2f} GB"
            )
    save_results("system-engine", results)


if __name__ == "__main__":
    main()
