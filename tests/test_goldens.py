"""Behaviour unchanged, to the number (issue 27): every golden run of tests/goldens/cases.py
is run again and its rounds.csv, clients.csv, summary.json, events.jsonl (and plan and
capacity files) compared with what tests/goldens/record.py stored, wall-clock fields
aside; and a run stopped mid-way by the code that recorded the goldens resumes to the
uninterrupted golden's files.

On other torch or numpy versions than those that recorded the goldens (`make
test-latest`), only the figures that do not depend on training numerics are compared:
every figure of the system-only cases, the time, energy, bits and selection figures of
the training cases whose selection does not learn; the rest is skipped, saying so."""

import json
import shutil
import warnings
from pathlib import Path

import numpy
import pytest
import torch

from fedjoule.cli import invoke
from tests.goldens.cases import CASES, RESUME_DIR, RESUMED
from tests.goldens.compare import TRAINING, Differences, compare_folders

GOLDENS = Path(__file__).parent / "goldens"
RECORDED = json.loads((GOLDENS / "versions.json").read_text())
SAME_VERSIONS = (RECORDED["torch"], RECORDED["numpy"]) == (torch.__version__, numpy.__version__)
OTHER_VERSIONS = (
    f"goldens recorded with torch {RECORDED['torch']} and numpy {RECORDED['numpy']}, "
    f"this is torch {torch.__version__} and numpy {numpy.__version__}"
)


def differences(case, out: Path) -> list[str]:
    if SAME_VERSIONS or case.system:
        diff = Differences(case.name, out)
    else:  # the training numerics may differ by a rounding on other releases
        diff = Differences(case.name, out, skip=lambda name: bool(TRAINING.search(name)))
    return compare_folders(GOLDENS / case.name, out, diff)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_outputs_equal_the_goldens(case, tmp_path):
    if not (SAME_VERSIONS or case.system):
        if case.learnt:
            pytest.skip(f"{case.name}: who takes part depends on what it learns; {OTHER_VERSIONS}")
        warnings.warn(f"{case.name}: training figures not compared; {OTHER_VERSIONS}", stacklevel=1)
    out = tmp_path / "out"
    assert invoke(case.argv(out)) == 0
    found = differences(case, out)
    assert not found, "\n".join(["outputs differ from tests/goldens:", *found])


def test_a_stopped_run_resumes_to_the_goldens(tmp_path):
    """tests/goldens/sync-stopped: checkpoint.pt and the files it names, as the recording
    code wrote them after round 2 of 4; today's --resume finishes it."""
    case = next(c for c in CASES if c.name == RESUMED)
    out = tmp_path / "out"
    shutil.copytree(GOLDENS / RESUME_DIR, out)
    assert invoke(["run", "--resume", "--out", str(out), "-q", "--threads", "1",
                   "--device", "cpu"]) == 0  # fmt: skip
    stopped = (GOLDENS / RESUME_DIR / "rounds.csv").read_bytes()
    assert (out / "rounds.csv").read_bytes().startswith(stopped)  # resumed, not run anew
    found = differences(case, out)
    assert not found, "\n".join(["the resumed run differs from tests/goldens:", *found])
