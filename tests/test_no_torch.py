"""The commands that train nothing import no torch (issue 27): real commands, run one
after another in a fresh interpreter, each followed by whether torch is loaded."""

import subprocess
import sys

# each command line (tab-separated words) as `python -m fedjoule.cli WORDS`, then one line:
# its name, whether torch is loaded, its exit code
PROBE = """
import runpy, sys
for words in sys.argv[1:]:
    sys.argv = ["fedjoule", *words.split("\\t")]
    try:
        runpy.run_module("fedjoule.cli", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print(f"\\n{words.split()[0]}: torch loaded {'torch' in sys.modules}, exit code {code}")
"""
# (validate, run --no-train and capacity on the default scenario: the system-only world
# counts the model by arithmetic (model_sizes.py) and reads the algorithm's declaration
# (algorithms/declarations.py); folders relative to the test's temporary cwd)
COMMANDS = [
    ["--help"],
    ["scenarios"],
    ["profiles"],
    ["profiles", "nbiot-sensor"],
    ["validate", "--no-train", "default"],
    ["run", "--no-train", "default", "--out", "run", "--set", "training.rounds=2"],
    ["capacity", "default", "--rounds", "5", "--out", "capacity"],
    # the protocols' servers leave the model arithmetic to the learning engine
    ["run", "--no-train", "default", "--out", "run-buffered", "--set", "training.rounds=2",
     "--set", "protocol.kind=buffered", "--set", "round.interval_s=null"],
    ["run", "--no-train", "default", "--out", "run-hierarchical", "--set", "training.rounds=2",
     "--set", "protocol.kind=hierarchical"],
]  # fmt: skip


def test_the_commands_that_train_nothing_import_no_torch(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *("\t".join(c) for c in COMMANDS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stdout.splitlines() if ": torch loaded " in line]
    assert said == [f"{c[0]}: torch loaded False, exit code 0" for c in COMMANDS]
    assert (tmp_path / "run" / "summary.json").is_file()
    assert (tmp_path / "capacity" / "capacity.json").is_file()
    assert (tmp_path / "run-buffered" / "summary.json").is_file()
    assert (tmp_path / "run-hierarchical" / "summary.json").is_file()
