"""The command line: usage mistakes, interruptions, literal user text, safe output folders
and exit codes (docs/command-line.md, "Messages and exit codes")."""

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fedjoule.cli import invoke
from fedjoule.errors import FedjouleError
from fedjoule.folders import check_out_folder, safe_name, stamped_folder
from fedjoule.scenarios.loading import load_scenario

FEDJOULE = [sys.executable, "-m", "fedjoule.cli"]
# name and description that rich would read as markup and emoji codes
ODD_NAME = "x[/] [bold]b :x:"
ODD_DESCRIPTION = "a :x: code, [red]m[/red] and x[/]"


def fedjoule(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*FEDJOULE, *args], capture_output=True, text=True, cwd=cwd)


def odd_scenario(tmp_path: Path, name: str = ODD_NAME, **sections) -> Path:
    path = tmp_path / "odd.yaml"
    raw = {"name": name, "description": ODD_DESCRIPTION, "training": {"rounds": 1}}
    path.write_text(yaml.safe_dump({**raw, **sections}))
    return path


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--thread", "1"], "No such option: --thread"),
        (["runn"], "No such command 'runn'"),
        (["run", "--threads", "abc"], "'--threads'"),
        (["sweep", "default-theory"], "'--grid'"),
        (["validate", "default-theory", "--set", "training.rounds=[1"], "not valid YAML"),
    ],
)
def test_usage_mistakes_are_one_short_message_and_exit_2(args, words):
    proc = fedjoule(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("error: ") and words in proc.stderr
    assert len(proc.stderr.splitlines()) <= 3 and proc.stdout == ""


def interruptible() -> None:
    """In the child before it starts: SIGINT at its default, as in a terminal. A test suite
    started in the background by a non-interactive shell (`make test &`) inherits SIGINT
    ignored, and a Python started with SIGINT ignored never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_run_with_a_resume_hint(tmp_path, signame):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            *FEDJOULE,
            "run",
            "default-theory",
            "--out",
            str(out),
            "--set",
            "training.rounds=1000",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    rounds = out / "rounds.csv"
    deadline = time.monotonic() + 120
    while not (rounds.exists() and len(rounds.read_text().splitlines()) >= 3):  # 2 rounds
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(getattr(signal, signame))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[signame], stderr
    assert "Traceback" not in stderr
    match = re.fullmatch(r"interrupted after round (\d+); continue with: (.*)\n", stderr)
    assert match and match[2] == f"fedjoule run --resume --out {out}", stderr
    # the last round of the checkpoint; rounds.csv may hold the next one, cut on resume
    rows = len(rounds.read_text().splitlines()) - 1
    assert rows - 2 <= int(match[1]) <= rows - 1
    assert (out / "checkpoint.pt").exists()


def test_ctrl_c_stops_a_sweep_and_its_workers(tmp_path):
    """SIGINT to the sweep: exit 130 with the restart hint, at once: the runs in flight
    stop and the queued ones never start."""
    out = tmp_path / "sweep"
    args = ["sweep", "default-theory", "--grid", "seed=0,1,2,3", "--set", "training.rounds=2000"]
    proc = subprocess.Popen(
        [*FEDJOULE, *args, "--workers", "2", "--out", str(out), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 180
    while not any(
        len(p.read_text().splitlines()) >= 3 for p in out.glob("runs/*/rounds.csv")
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)  # a hang guard; it stops in about a second
    assert proc.returncode == 130, stderr
    assert f"--out {out}" in stderr and "Traceback" not in stderr
    assert not (out / "sweep.csv").exists()
    started = [p for p in out.glob("runs/*") if (p / "checkpoint.pt").exists()]
    assert 1 <= len(started) <= 2  # the two in flight; the queued ones never started


def fake_run(exception: BaseException, write_scenario: bool = False):
    """A run_scenario that creates the folder (if asked) and raises `exception`."""

    def run_scenario(scenario, out, **kwargs):
        if write_scenario:
            Path(out).mkdir(parents=True)
            (Path(out) / "scenario.yaml").write_text("name: x\n")
        raise exception

    return run_scenario


class Diverged(FedjouleError):
    exit_code = 3


@pytest.mark.parametrize(
    ("exception", "written", "code", "message"),
    [
        (KeyboardInterrupt(), False, 130, "interrupted before the run started"),
        (KeyboardInterrupt(), True, 130, "interrupted before the first round finished; "),
        (FedjouleError("bad [bold]x[/] :x:"), False, 2, "error: bad [bold]x[/] :x:"),
        (Diverged("diverged in round 3"), False, 3, "error: diverged in round 3"),
        (
            OSError(errno.ENOSPC, "No space left on device", "/full/rounds.csv"),
            True,
            1,
            "error: /full/rounds.csv: No space left on device",
        ),
    ],
)
def test_exit_codes_and_messages(tmp_path, monkeypatch, capsys, exception, written, code, message):
    monkeypatch.setattr("fedjoule.simulator.run.run_scenario", fake_run(exception, written))
    out = tmp_path / "run"
    assert invoke(["run", "default-theory", "--out", str(out), "-q"]) == code
    stderr = capsys.readouterr().err
    assert message in stderr
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1
    if code == 130 and written:
        assert f"continue with: fedjoule run --resume --out {out}" in stderr


def test_sigterm_exits_143(tmp_path, monkeypatch, capsys):
    def terminated(scenario, out, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here
        time.sleep(10)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr("fedjoule.simulator.run.run_scenario", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert invoke(["run", "default-theory", "--out", str(tmp_path / "run"), "-q"]) == 143
    assert "interrupted before the run started" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("scenario", ["mnist-dirichlet", "long"])
def test_validate_show_writes_the_resolved_scenario_as_yaml(tmp_path, capsys, scenario):
    if scenario == "long":  # a line rich would have wrapped
        scenario = str(odd_scenario(tmp_path))
        text = yaml.safe_load(Path(scenario).read_text())
        text["description"] = "long " * 60 + "[/] :x: end"
        Path(scenario).write_text(yaml.safe_dump(text, width=1000))
    assert invoke(["validate", scenario, "--show"]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out) == load_scenario(scenario).model_dump(mode="json")
    assert f"{scenario}: valid" in err


def test_user_text_is_printed_literally(tmp_path, monkeypatch, capsys):
    path = odd_scenario(tmp_path)
    assert invoke(["validate", str(path)]) == 0
    assert f"{path}: valid" in capsys.readouterr().out
    # the scenarios table, as if this scenario were built in
    loaded = load_scenario(path)
    monkeypatch.setattr("fedjoule.scenarios.loading.builtin_names", lambda: [ODD_NAME])
    monkeypatch.setattr("fedjoule.scenarios.loading.load_scenario", lambda name: loaded)
    assert invoke(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert ODD_NAME in out and ODD_DESCRIPTION in out and "❌" not in out


def test_a_run_prints_its_name_literally_and_stays_under_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    name = "../../" + ODD_NAME
    path = odd_scenario(tmp_path, name, population={"size": 10})
    assert invoke(["run", str(path), "-q"]) == 0
    out = capsys.readouterr().out
    assert f"{name}: 10 clients" in out
    (folder,) = (tmp_path / "runs").iterdir()
    assert (folder / "summary.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.yaml", "runs"]


@pytest.mark.parametrize(
    "name",
    ["../../x", "/tmp/x", "a\nb\x00c", "..", "", " . ", "a\\..\\b", "é" * 300, ".hidden"],
)
def test_scenario_names_become_one_safe_folder_under_top(tmp_path, name):
    folder = stamped_folder(str(tmp_path / "runs"), name)
    assert folder.parent == tmp_path / "runs"
    assert folder.resolve().parent == (tmp_path / "runs").resolve()
    assert folder.name.isprintable() and not folder.name.startswith(".")
    assert "/" not in folder.name and "\\" not in folder.name
    assert len(safe_name(name).encode()) <= 100 and safe_name(name)
    folder.mkdir(parents=True)  # a name the file system takes
    assert stamped_folder(str(tmp_path / "runs"), name) != folder  # taken: another one


def test_out_folder_checks(tmp_path):
    check_out_folder(tmp_path / "new" / "deeper")  # creatable: fine, and not created
    assert not (tmp_path / "new").exists()
    check_out_folder(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(FedjouleError, match="a file is in its place"):
        check_out_folder(tmp_path / "file")
    with pytest.raises(FedjouleError, match="is a file"):
        check_out_folder(tmp_path / "file" / "sub")
    if os.geteuid() == 0:  # root writes anywhere: the permission cases cannot be seen
        return
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(FedjouleError, match="not writable"):
        check_out_folder(locked)
    with pytest.raises(FedjouleError, match="not writable"):
        check_out_folder(locked / "sub")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "default-theory", "--device", "bogus"],
        ["run", "default-theory", "--executor", "bogus"],
        ["run", "default-theory", "--out", "FILE"],
        ["run", "default-theory", "--no-train", "--out", "FILE"],
        ["capacity", "default-theory", "--out", "FILE"],
        ["sweep", "default-theory", "-g", "training.rounds=1,2", "--out", "FILE"],
        ["plan", "default-theory", "--out", "FILE"],
    ],
)
def test_bad_options_and_out_folders_fail_before_anything_is_created(
    tmp_path, monkeypatch, capsys, args
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("")
    assert invoke(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    if "FILE" in args:
        assert "output folder FILE: a file is in its place" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_resume_says_from_which_round_and_checkpoint(tmp_path, capsys):
    """(issue 22) `run --resume` and the API's resume=True say where they continue."""
    from typer.testing import CliRunner

    import fedjoule
    from fedjoule.cli import app

    out = tmp_path / "r"
    tiny = {"training.rounds": 4, "population.size": 10, "round.min_clients": 1}
    fedjoule.run("default-theory", out, overrides=tiny, on_round=lambda row: row["round"] < 1)
    capsys.readouterr()
    fedjoule.run(None, out, resume=True, quiet=False, on_round=lambda row: False)
    said = capsys.readouterr().err
    checkpoint = out / "checkpoint.pt"
    assert (
        f"resuming from round 3 of 4: 2 rounds done (rounds.csv rows 0-1), checkpoint "
        f"{checkpoint}" in said
    )
    result = CliRunner().invoke(app, ["run", "--resume", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert (
        f"resuming from round 4 of 4: 3 rounds done (rounds.csv rows 0-2), checkpoint "
        f"{checkpoint}" in " ".join(result.output.split())
    )
