"""docs/policies.md's example runs as written and prints what its comment says."""

import contextlib
import io
import re
from pathlib import Path

from fedjoule.cli import invoke

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def test_the_docs_example_runs():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOC), "exec"), {})
    assert printed.getvalue().startswith("[1 3 4] ")


def test_the_docs_scenario_runs_on_both_engines_alike(tmp_path):
    """docs/policies.md's `policy:` scenario, run --no-train on each system engine: the
    same selections and steps, every client within the deadline's step count."""
    text = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    rows = {}
    for engine in ("numpy", "simpy"):
        out = tmp_path / engine
        argv = ["run", str(scenario), "--no-train", "-q", "--engine", engine, "--out", str(out)]
        assert invoke(argv) == 0
        lines = (out / "rounds.csv").read_text().splitlines()
        rows[engine] = [line.rsplit(",", 1)[0] for line in lines]  # wall_time_s aside
    assert rows["numpy"] == rows["simpy"] and len(rows["numpy"]) == 1 + 5
