"""A script that calls fedjoule.sweep at its top level, without `if __name__ ==
"__main__":`, runs its sweep once on a pool of spawned workers: the workers do not run the
script again (Python's spawn would, and every run would fail)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedjoule.api import SweepResult

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """\
import fedjoule

print("top level", flush=True)
result = fedjoule.sweep(
    "default-theory",
    {"training.lr": [0.05, 0.1]},
    "out",
    overrides={
        "training.rounds": 2,
        "population.size": 10,
        "training.clients_per_round": 3,
        "round.min_clients": 1,
        "dataset.synthetic.avg_samples": 30,
    },
    workers=2,
)
print(sorted(result.status.values()))
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_script_without_a_main_guard_sweeps_on_two_workers(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["top level", "['ran', 'ran']"]
    result = SweepResult.from_folder(tmp_path / "out")
    assert [r["training.lr"] for r in result.table] == [0.05, 0.1]
    assert all(r["rounds_completed"] == 2 for r in result.table)
