"""Record the golden outputs: `python tests/goldens/record.py` (from the repository root,
with fedjoule importable and FEDJOULE_DATA_DIR set as for the tests).

Re-record ONLY for a deliberate, explained change of numbers (a fixed bug, a new model
default), never to make tests/test_goldens.py pass after a refactoring: the goldens are
what today's code writes, and a change of structure must reproduce them to 1e-9. Say in
the commit message which numbers changed and why.

Each case of tests/goldens/cases.py runs through the real command line
(`python -m fedjoule.cli ...`, one torch thread, CPU, the scenarios' fixed seeds) into
tests/goldens/<case>/, of which the CSV, JSON and JSONL files are kept (no plots,
checkpoints or scenario copies). tests/goldens/sync-stopped/ is the `sync` case stopped
after its second round as a kill would leave it (checkpoint.pt, scenario.yaml and the
rows it names), for the resume golden. versions.json records the torch and numpy that
wrote them.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.goldens.cases import CASES, RESUME_DIR, RESUMED, STOP_AFTER  # noqa: E402
from tests.goldens.compare import OUT  # noqa: E402

GOLDENS = ROOT / "tests" / "goldens"
KEPT = (".csv", ".json", ".jsonl")
# what --resume needs of a stopped run (clients.csv and summary.json are rewritten)
RESUME_FILES = ("scenario.yaml", "checkpoint.pt", "rounds.csv", "events.jsonl")


def environment() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("PYTHONHASHSEED", None)
    return env


def record(case, out: Path) -> None:
    """Run one case into `out` (a fresh folder) and keep only its compared files."""
    command = [sys.executable, "-m", "fedjoule.cli", *case.argv(out)]
    proc = subprocess.run(command, env=environment(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{case.name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    for path in sorted(out.rglob("*"), reverse=True):
        if path.is_file() and path.suffix not in KEPT:
            path.unlink()
        elif path.is_file():  # the run's folder, where a file names it, as compare.OUT
            path.write_text(path.read_text().replace(str(out), OUT))
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def record_stopped(out: Path) -> None:
    """The RESUMED case stopped after STOP_AFTER rounds, through the API's on_round (a run
    stopped there writes what a kill after that round's checkpoint leaves)."""
    case = next(c for c in CASES if c.name == RESUMED)
    sets = ", ".join(repr(s) for s in case.sets)
    script = (
        "import fedjoule, sys, yaml\n"
        f"sets = [{sets}]\n"
        "overrides = {k: yaml.safe_load(v) for k, v in (s.split('=', 1) for s in sets)}\n"
        f"stop = lambda row: row['round'] + 1 < {STOP_AFTER}\n"
        f"fedjoule.run('default-theory', sys.argv[1], overrides=overrides, device='cpu',\n"
        "             threads=1, quiet=True, on_round=stop)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(out)], env=environment(), check=True)
    for path in list(out.iterdir()):
        if path.name not in RESUME_FILES:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def versions() -> dict:
    code = "import json, numpy, torch; print(json.dumps([torch.__version__, numpy.__version__]))"
    out = subprocess.run([sys.executable, "-c", code], env=environment(), capture_output=True)
    torch_version, numpy_version = json.loads(out.stdout)
    return {"torch": torch_version, "numpy": numpy_version, "python": sys.version.split()[0]}


def main() -> None:
    names = sys.argv[1:] or [c.name for c in CASES]
    for case in CASES:
        if case.name in names:
            out = GOLDENS / case.name
            shutil.rmtree(out, ignore_errors=True)
            record(case, out)
            print(f"{case.name}: {sum(1 for p in out.rglob('*') if p.is_file())} files")
    if RESUME_DIR in names or not sys.argv[1:]:
        shutil.rmtree(GOLDENS / RESUME_DIR, ignore_errors=True)
        record_stopped(GOLDENS / RESUME_DIR)
        print(f"{RESUME_DIR}: stopped after {STOP_AFTER} rounds")
    (GOLDENS / "versions.json").write_text(json.dumps(versions(), indent=1) + "\n")


if __name__ == "__main__":
    main()
