"""The command line's first line of defence (issue 21, items 4, 5 and 13): the internal-error
report in a new private file, --out refusing the empty string, system folders and paths
the file system cannot hold (exit 2), and --version."""

import stat
import tempfile
from pathlib import Path

import pytest

from fedjoule import __version__
from fedjoule.cli import internal_error, invoke


def test_version_flag(capsys):
    assert invoke(["--version"]) == 0
    assert capsys.readouterr().out.strip() == __version__


@pytest.mark.parametrize(
    "out", ["", " ", "/", "/etc", "/usr", "/tmp/" + "a" * 300, "/tmp/x" + "/b" * 2100]
)
def test_out_refuses_empty_system_and_too_long_paths(out, capsys):
    assert invoke(["run", "default-theory", "--no-train", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and ("empty path" in err or "system folder" in err or "too long" in err)
    assert not Path("/etc/rounds.csv").exists()


def test_internal_error_report_is_a_new_private_file(tmp_path, monkeypatch, capsys):
    """Two reports in the same second are two files; a link planted at a predictable name
    is not followed (the report never overwrites its target)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("FEDJOULE_DEBUG", raising=False)
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    (tmp_path / f"fedjoule-error-{stamp}.txt").symlink_to(target)
    assert internal_error(RuntimeError("first")) == 1
    assert internal_error(RuntimeError("second")) == 1
    reports = [p for p in tmp_path.glob("fedjoule-error-*") if not p.is_symlink()]
    assert len(reports) == 2
    texts = sorted(p.read_text() for p in reports)
    assert "RuntimeError: first" in texts[0] and "RuntimeError: second" in texts[1]
    for p in reports:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert target.read_text() == "keep"


@pytest.mark.parametrize("option", ["--deadline-s", "--energy-budget-j"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_capacity_refuses_limits_that_are_not_finite(option, value, tmp_path, capsys):
    """(issue 21, item 6) exit 2 naming the option, and no folder left behind."""
    out = tmp_path / "cap"
    assert (
        invoke(["capacity", "default-theory", option, value, "--rounds", "2", "--out", str(out)])
        == 2
    )
    assert option in capsys.readouterr().err
    assert not out.exists()


def test_too_long_trace_file_name_is_an_input_error(tmp_path, capsys):
    """(issue 21, item 13) exit 2 naming availability.trace_file, not 1 ("File name too long")."""
    overrides = ["availability.kind=trace", "availability.trace_file=" + "t" * 300 + ".csv"]
    args = ["run", "default-theory", "--no-train", "--out", str(tmp_path / "run")]
    for o in overrides:
        args += ["--set", o]
    assert invoke(args) == 2
    assert "availability.trace_file" in capsys.readouterr().err
