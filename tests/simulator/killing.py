"""kill -9 at random instants: a run (and its --resume) is killed, then continued until it
finishes, and its files are compared with an uninterrupted run's.

Used by tests/simulator/test_kill_resume.py (a few trials in `make test`, 60+ in
`make test-slow`). Each case runs the real command line in a subprocess.
"""

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WALL_FIELDS = {"wall_time_s"}
COMPARED = ("rounds.csv", "clients.csv", "summary.json", "events.jsonl")


@dataclass(frozen=True)
class Case:
    """One scenario to kill: a name, its `--set` overrides and the run's other options
    (given again to --resume)."""

    name: str
    scenario: str
    sets: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


CASES = (
    Case("fedavg", "default-theory", ("training.rounds=25",)),
    Case(
        "scaffold-spilling",
        "default-theory",
        ("algorithm.name=scaffold", "training.rounds=25"),
        ("--state-memory-mb", "0.02"),  # ~30 of the 100 clients' rows in memory
    ),
    Case("urban-macro-events", "urban-macro", ("training.rounds=8",)),
)
# the protocols (docs/protocols.md): clients in flight and a buffer at every checkpoint
PROTOCOL_CASES = (
    Case("async", "default-theory", ("training.rounds=40", "protocol.kind=async")),
    Case(
        "buffered",
        "default-theory",
        ("training.rounds=15", "protocol.kind=buffered", "protocol.concurrency=20"),
    ),
    Case(
        "hierarchical",
        "default-theory",
        ("training.rounds=8", "protocol.kind=hierarchical", "topology.layout=hexagonal",
         "topology.cells=3"),
    ),  # fmt: skip
)


def command(case: Case, out: Path, resume: bool) -> list[str]:
    base = [sys.executable, "-m", "fedjoule.cli", "run", "--out", str(out), "-q"]
    base += ["--device", "cpu", *case.options]
    if resume:
        return [*base, "--resume"]
    return [*base, case.scenario, *(a for s in case.sets for a in ("--set", s))]


def environment() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_to_end(case: Case, out: Path, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Continue a (possibly killed) run until it finishes: --resume where the folder has a
    checkpoint, else the same command anew."""
    resume = (out / "checkpoint.pt").exists()
    proc = subprocess.run(
        command(case, out, resume),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=environment(),
        cwd=out.parent,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{case.name} {'--resume' if resume else 'new run'} in {out} exited "
            f"{proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def kill_after(cmd: list[str], delay_s: float, cwd: Path, started: Path | None) -> None:
    """Start `cmd`, wait until `started` exists (if given), sleep `delay_s`, SIGKILL it."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment(), cwd=cwd
    )
    deadline = time.monotonic() + 120
    while started is not None and not started.exists() and proc.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    time.sleep(delay_s)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass
class Trial:
    case: str
    delay_s: float
    resume_delay_s: float | None
    had_checkpoint: bool = False
    finished_by: str = ""
    equal: bool = False
    differences: list[str] = field(default_factory=list)


def trial(case: Case, reference: Path, folder: Path, rng: random.Random, span_s: float,
          kill_resume: bool) -> Trial:  # fmt: skip
    """One trial: kill a new run at a random instant after its folder appears (or, one
    time in five, at a random instant from the process start), optionally kill the
    --resume too, then finish and compare."""
    from_start = rng.random() < 0.2
    delay = rng.uniform(0, span_s)
    started = None if from_start else folder
    kill_after(command(case, folder, False), delay, folder.parent, started)
    result = Trial(case.name, delay, None, had_checkpoint=(folder / "checkpoint.pt").exists())
    if kill_resume and (folder / "checkpoint.pt").exists():
        result.resume_delay_s = rng.uniform(0, span_s / 2)
        kill_after(command(case, folder, True), result.resume_delay_s, folder.parent, None)
    result.finished_by = "resume" if (folder / "checkpoint.pt").exists() else "new run"
    run_to_end(case, folder)
    result.differences = compare(reference, folder)
    result.equal = not result.differences
    return result


def compare(reference: Path, other: Path) -> list[str]:
    """The files (of COMPARED) that differ, wall-time fields aside."""
    differ = []
    for name in COMPARED:
        a, b = reference / name, other / name
        if a.exists() != b.exists():
            differ.append(f"{name}: exists in only one folder")
        elif a.exists() and _content(a) != _content(b):
            differ.append(name)
    return differ


def _content(path: Path):
    if path.suffix == ".json":
        return {k: v for k, v in json.loads(path.read_text()).items() if k not in WALL_FIELDS}
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return [
                {k: v for k, v in row.items() if k not in WALL_FIELDS} for row in csv.DictReader(f)
            ]
    return path.read_bytes()


def reference_run(case: Case, folder: Path) -> float:
    """The uninterrupted run; returns its wall time in seconds."""
    tic = time.perf_counter()
    run_to_end(case, folder)
    return time.perf_counter() - tic
