"""The default torch thread count against `--threads 1`, on busy and on idle cores (issue 26).

Whole `fedjoule run` commands (start-up included), alternated within each pair in a
rotating order so that the machine's drift falls on every variant alike:
- default: this checkout, no `--threads` (the thread count fedjoule chooses);
- threads1: this checkout, `--threads 1`;
- GOMP_SPINCOUNT=N (with `--spin N`): the default with libgomp spinning N times before
  it sleeps;
- old (with `--old DIR`): the default of another checkout of fedjoule (DIR holds its
  `fedjoule` package), e.g. the code before the change: `git archive BASE fedjoule | tar
  -x -C /tmp/old`.
Workloads:
- small: `fedjoule run default` (logistic, 10 clients a round, batch 10), 30 rounds;
- w: workload W, MNIST MLP 784-200-200-10, 100 clients, 10 a round, 60 steps of batch 50,
  20 rounds (scenarios/mnist-mlp-w.yaml; MNIST under $FEDJOULE_DATA_DIR);
- resnet: one round of a CIFAR-style ResNet-18 on generated 3x32x32 images
  (scenarios/resnet18-round.yaml, torchvision FakeData: no files).
`--busy N` starts N CPU-burning neighbours (`python -c 'while True: pass'`) for the whole
measurement and kills them at the end. Reported per workload: wall and CPU (user + sys)
seconds of every command, the ratios default/threads1 and default/old per pair and their
medians, the load average before and after, and whether rounds.csv (without wall_time_s)
is equal between default and threads1.

    FEDJOULE_DATA_DIR=../shared/datasets PYTHONPATH=. .venv/bin/python benchmarks/threads.py \
        [--busy 1] [--pairs 3] [--workloads small,w,resnet] [--old /tmp/old] [--label busy]
"""

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from record import save_results  # benchmarks/record.py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKLOADS = {
    "small": ["default", "--set", "training.rounds=30"],
    "w": [str(HERE / "scenarios" / "mnist-mlp-w.yaml")],
    "resnet": [str(HERE / "scenarios" / "resnet18-round.yaml")],
}
OUT = Path("runs/benchmark-threads").absolute()


def command(workload: str, variant: str, out: Path, old: Path | None) -> tuple[list, dict]:
    """The command line and environment of one variant."""
    env = dict(os.environ, PYTHONPATH=str((old if variant == "old" else REPO).absolute()))
    args = [sys.executable, "-m", "fedjoule.cli", "run", *WORKLOADS[workload]]
    args += ["--quiet", "--device", "cpu", "--out", str(out)]
    if variant.startswith("GOMP_SPINCOUNT="):  # (--spin) libgomp's busy-wait, in spins
        env["GOMP_SPINCOUNT"] = variant.split("=")[1]
    if variant == "threads1":
        args += ["--threads", "1"]
    return args, env


def timed(args: list, env: dict) -> tuple[float, float]:
    """Wall and CPU (user + sys, the child's) seconds of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tic = time.perf_counter()
    # run from the output folder: `python -m` puts the working folder first on sys.path,
    # where this checkout's fedjoule/ would hide the one PYTHONPATH names
    subprocess.run(args, env=env, check=True, capture_output=True, cwd=OUT)
    wall = time.perf_counter() - tic
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def rounds_rows(folder: Path) -> list[dict]:
    with (folder / "rounds.csv").open() as f:
        return [{k: v for k, v in row.items() if k != "wall_time_s"} for row in csv.DictReader(f)]


def measure(workload: str, variants: list[str], pairs: int, old: Path | None) -> dict:
    times = {v: [] for v in variants}
    for i in range(pairs):
        order = variants[i % len(variants) :] + variants[: i % len(variants)]
        for variant in order:
            out = OUT / workload / f"{variant}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu = timed(*command(workload, variant, out, old))
            times[variant].append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
            print(f"{workload} pair {i} {variant}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    result = {"runs": times}
    for other in variants[1:]:
        ratios = [
            a["wall_s"] / b["wall_s"] for a, b in zip(times["default"], times[other], strict=True)
        ]
        result[f"default/{other}"] = [round(r, 3) for r in ratios]
        result[f"default/{other}_median"] = round(statistics.median(ratios), 3)
    result["rounds_equal_default_threads1"] = rounds_rows(
        OUT / workload / "default-0"
    ) == rounds_rows(OUT / workload / "threads1-0")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--busy", type=int, default=1, help="CPU-burning neighbours")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workloads", default="small,w,resnet")
    parser.add_argument("--old", type=Path, help="a checkout of the old code (its fedjoule/)")
    parser.add_argument("--label", default=None, help="results/threads-<label>.json")
    parser.add_argument("--spin", type=int, help="also the default with GOMP_SPINCOUNT=N")
    options = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    variants = ["default", "threads1"] + (["old"] if options.old else [])
    variants += [f"GOMP_SPINCOUNT={options.spin}"] if options.spin is not None else []
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(options.busy)
    ]
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "busy_neighbours": options.busy,
        "load_before": os.getloadavg(),
        "command": " ".join(sys.argv),
    }
    try:
        for workload in options.workloads.split(","):
            result[workload] = measure(workload, variants, options.pairs, options.old)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    save_results(f"threads-{options.label or ('busy' if options.busy else 'idle')}", result)


if __name__ == "__main__":
    main()
