"""Start-up of the commands that train nothing, this checkout against another (issue 27).

Whole commands (`python -m fedjoule.cli ...`, interpreter start included), the two
checkouts alternated within each pair in a rotating order so that the machine's drift
falls on both alike; one run of each per pair. The other checkout is a folder holding its
`fedjoule` package, e.g. today's main: `git -C /work/main archive 6636263 fedjoule | tar
-x -C /tmp/startup-old`. Reported per command: the wall seconds of every run, the ratio
new/old per pair and its median, whether the command imports torch (one more run of each
under `python -X importtime`, not timed), and the load average before and after.

    PYTHONPATH=. .venv/bin/python benchmarks/startup.py --old /tmp/startup-old [--pairs 5]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from record import save_results  # benchmarks/record.py

REPO = Path(__file__).resolve().parent.parent
OUT = Path("runs/benchmark-startup").absolute()
SMALL = ["--set", "training.rounds=2"]
COMMANDS = {
    "help": ["--help"],
    "scenarios": ["scenarios"],
    "profiles": ["profiles"],
    "validate --no-train": ["validate", "--no-train", "default"],
    "run --no-train": ["run", "--no-train", "default", *SMALL, "--quiet", "--out", "run"],
    "capacity": ["capacity", "default", *SMALL],
}


def call(name: str, checkout: Path, folder: Path, *flags: str) -> tuple[float, str]:
    """Wall seconds of one command in a fresh `folder`, and its stderr."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    args = [sys.executable, *flags, "-m", "fedjoule.cli", *COMMANDS[name]]
    tic = time.perf_counter()
    # run from its own folder: `python -m` puts the working folder first on sys.path
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - tic
    if done.returncode != 0:
        raise SystemExit(f"{name} ({checkout}) failed: {done.stderr[-2000:]}")
    return wall, done.stderr


def loads_torch(name: str, checkout: Path) -> bool:
    """Whether the command imports torch (`python -X importtime`, not timed)."""
    _, stderr = call(name, checkout, OUT / "importtime", "-X", "importtime")
    # lines "import time: self | cumulative | <indent>module"
    return any(line.split("|")[-1].strip() == "torch" for line in stderr.splitlines())


def measure(name: str, checkouts: dict[str, Path], pairs: int) -> dict:
    runs = {label: [] for label in checkouts}
    for i in range(pairs):
        order = list(checkouts)[i % 2 :] + list(checkouts)[: i % 2]
        for label in order:
            wall, _ = call(name, checkouts[label], OUT / f"{label}-{i}")
            runs[label].append(round(wall, 3))
            print(f"{name} pair {i} {label}: {wall:.2f} s", flush=True)
    ratios = [n / o for n, o in zip(runs["new"], runs["old"], strict=True)]
    return {
        "wall_s": runs,
        "median_s": {label: round(statistics.median(v), 3) for label, v in runs.items()},
        "new/old": [round(r, 3) for r in ratios],
        "new/old_median": round(statistics.median(ratios), 3),
        "torch": {label: loads_torch(name, path) for label, path in checkouts.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout (its fedjoule/)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--commands", default=",".join(COMMANDS))
    options = parser.parse_args()
    checkouts = {"new": REPO, "old": options.old.resolve()}
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
        "command": " ".join(sys.argv),
    }
    for name in options.commands.split(","):
        result[name] = measure(name, checkouts, options.pairs)
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    save_results("startup", result)


if __name__ == "__main__":
    main()
