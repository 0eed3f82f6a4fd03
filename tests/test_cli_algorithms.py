"""`fedjoule algorithms`: every name a scenario can use, with its options and where it
comes from (built in, an installed package's entry point, a plug-in file), broken
packages shown as broken, and how to name a custom class."""

import subprocess
import sys

import pytest

from fedjoule import cli
from fedjoule.algorithms.registry import ALGORITHMS
from tests.algorithms.test_plugin_algorithms import (
    DIST,
    EXAMPLE,
    install_package,
    installed,
    with_pythonpath,
)

WIDE = 240  # columns: no option row is wrapped
SERVER_LR = (
    "Server learning rate eta; the paper's grid is 10^-3 to 10^1 and its best FedAdam "
    "values lie around 10^-2.5 to 10^-0.5."
)
TAU = "Adaptivity tau: added to sqrt(v); smaller is more adaptive (the paper tries 10^-5 to 10^-1)."
VARIATE_LR = (
    "lr in the option-II variate update: the round's lr (paper) or the undecayed base lr "
    "(FedDyn reference code)."
)


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setattr(cli.console, "width", WIDE)


def run(capsys, *args) -> tuple[int, str, str]:
    code = cli.invoke(["algorithms", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def row(out: str, *cells: str) -> bool:
    """Some line of `out` holds `cells` in order, separated by spaces only."""
    lines = [" ".join(line.split()) for line in out.splitlines()]
    return " ".join(cells) in lines


def test_lists_every_builtin_with_its_options_and_how_to_use_custom(capsys, wide):
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    for name in ALGORITHMS:
        assert f"{name}  (built in)" in out, name
    assert row(out, "option type allowed default meaning")
    assert row(out, "mu float >= 0 0.01 Proximal weight mu (paper tunes 0.001-1).")
    assert row(out, "server_momentum float >= 0, < 1 0.85 Server momentum lambda.")
    assert row(out, "variate_lr round | base round", VARIATE_LR)
    fedavg = out.split("fedavg  (built in)")[1].split("fedprox")[0]
    assert "plain local SGD" in fedavg and "no options" in fedavg
    custom = out.split("custom  (")[1]
    assert 'algorithm: {name: custom, class: "file.py:ClassName", options: {...}}' in custom
    assert "SHA-256" in custom and "--resume" in custom
    assert out.index("fedacg  (built in)") < out.index("custom  (")  # custom last


def test_shows_one_algorithm(capsys, wide):
    code, out, _ = run(capsys, "scaffold")
    assert code == 0
    assert out.startswith("scaffold  (built in)\n  Local step y <- y - lr (g(y) - c_i + c)")
    assert row(out, "server_lr float > 0 1.0 Global step eta_g (paper mostly 1).")
    assert "fedprox" not in out and "custom" not in out
    code, out, _ = run(capsys, "custom")
    assert code == 0 and out.startswith("custom  (a plug-in class from a Python file or module)")


def test_shows_a_plugin_class_from_a_file(capsys, wide, tmp_path, monkeypatch):
    (tmp_path / "fedadam.py").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "fedadam.py:FedAdam")
    assert code == 0
    assert out.startswith(f"fedadam.py:FedAdam  (custom class from {tmp_path / 'fedadam.py'}, ")
    assert "SHA-256 " in out.splitlines()[0]
    assert row(out, "server_lr float > 0, <= 10 0.01", SERVER_LR)
    assert row(out, "beta1 float >= 0, < 1 0.9 Decay of the first moment m.")
    assert row(out, "beta2 float >= 0, < 1 0.99 Decay of the second moment v.")
    assert row(out, "tau float > 0, <= 1 0.001", TAU)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("fedadamx", ["unknown algorithm 'fedadamx'; available: fedavg, fedprox", "custom"]),
        ("missing.py:X", ["plug-in file 'missing.py' not found"]),
        ("fedadam.py:pseudo_gradient", ["is function 'pseudo_gradient', not a subclass"]),
        ("nonexistent_module_xyz:X", ["cannot import module 'nonexistent_module_xyz'"]),
    ],
)
def test_unknown_names_are_usage_errors(capsys, tmp_path, monkeypatch, name, words):
    (tmp_path / "fedadam.py").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, name)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def test_lists_installed_packages_in_a_fresh_process(tmp_path):
    """A package on PYTHONPATH with a .dist-info declaring three entry points: the working
    one is listed with its distribution and options, the two broken ones as broken, with
    the reason, and the command still succeeds."""
    site = install_package(tmp_path)
    env = {**with_pythonpath(site), "COLUMNS": str(WIDE)}
    proc = subprocess.run(
        [sys.executable, "-m", "fedjoule.cli", "algorithms"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Traceback" not in out + proc.stderr
    origin = f"(entry point fedjoule.algorithms from {DIST} 0.1)"
    assert f"fedadam  {origin}" in out
    assert row(out, "server_lr float > 0, <= 10 0.01", SERVER_LR)
    broken = out.split(f"brokenalg  {origin}")[1].splitlines()[1]
    assert broken.startswith("  broken: algorithm 'brokenalg'")
    assert "failed to load: ModuleNotFoundError" in broken
    assert "fjtest_missing_dependency" in broken
    notalg = out.split(f"notalg  {origin}")[1].splitlines()[1]
    assert notalg.startswith("  broken: ") and "not a subclass" in notalg
    # the built-ins first, installed names next, custom last
    assert out.index("fedacg  (built in)") < out.index("fedadam  (entry") < out.index("custom  (")


def test_one_installed_algorithm_and_a_broken_one(tmp_path, capsys, wide):
    with installed(install_package(tmp_path)):
        code, out, _ = run(capsys, "fedadam")
        assert code == 0
        assert out.startswith(f"fedadam  (entry point fedjoule.algorithms from {DIST} 0.1)")
        assert row(out, "beta1 float >= 0, < 1 0.9 Decay of the first moment m.")
        code, out, err = run(capsys, "brokenalg")
        assert code == 1 and "Traceback" not in out + err
        assert "broken: algorithm 'brokenalg'" in out and "fjtest_missing_dependency" in out
    code, _, err = run(capsys, "fedadam")  # uninstalled again
    assert code == 2 and "unknown algorithm 'fedadam'" in err


def test_help_names_the_command(capsys):
    assert cli.invoke(["--help"]) == 0
    assert "algorithms" in capsys.readouterr().out
