"""Plug-in trust (issue 21): a scenario file from someone else never runs code the reader
did not opt into. Each reproducer writes a marker file if its code runs; the marker must
not exist afterwards, and the message must say how to allow what was refused."""

import shutil
from pathlib import Path

import pytest
import yaml

import fedjoule
from fedjoule.cli import invoke
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario

MARKER_CODE = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n"
PLUGIN = MARKER_CODE + "def factory(**options):\n    raise RuntimeError('the factory ran')\n"


def scenario_with(folder: Path, dataset: dict, name: str = "s.yaml") -> Path:
    data = {"name": "trust", "dataset": dataset, "training": {"rounds": 1}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "factory, options",
    [
        ("os:system", {"command": "touch {marker}"}),
        ("subprocess:run", {"args": ["touch", "{marker}"]}),
    ],
)
@pytest.mark.parametrize("allow", [[], ["--allow-module-plugins", "os,subprocess"]])
def test_a_standard_library_callable_is_never_a_plugin(factory, options, allow, tmp_path, capsys):
    marker = tmp_path / "marker"
    filled = {k: v.format(marker=marker) if isinstance(v, str) else [a.format(marker=marker)
              for a in v] for k, v in options.items()}  # fmt: skip
    path = scenario_with(tmp_path, {"name": "custom", "factory": factory, "options": filled})
    for command in (["run", str(path), "--out", str(tmp_path / "run")], ["validate", str(path)]):
        assert invoke([*command, *allow]) == 2
        err = capsys.readouterr().err
        assert "standard library" in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "run").exists()
    with pytest.raises(FedjouleError, match="standard library"):
        fedjoule.run(path, out=tmp_path / "api", allow_module_plugins=["os", "subprocess"])
    assert not marker.exists()


def test_a_module_plugin_needs_the_users_allowance(tmp_path, capsys, monkeypatch):
    """An installed package's module is imported only when the user names its package."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "marker"
    (site / "fjtrust_pkg.py").write_text(PLUGIN.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(site))
    path = scenario_with(tmp_path / "exp", {"name": "custom", "factory": "fjtrust_pkg:factory"})
    assert invoke(["validate", str(path)]) == 2
    assert "--allow-module-plugins fjtrust_pkg" in capsys.readouterr().err
    assert not marker.exists()
    # allowed: validate checks the spec without importing it ...
    assert invoke(["validate", str(path), "--allow-module-plugins", "fjtrust_pkg"]) == 0
    assert "not imported" in capsys.readouterr().out and not marker.exists()
    # ... and imports it when asked to
    invoke(["validate", str(path), "--allow-module-plugins", "fjtrust_pkg", "--import-plugins"])
    assert marker.exists()


@pytest.mark.parametrize("where", ["climb", "absolute"])
def test_a_plugin_file_outside_the_scenarios_folder_is_not_run(where, tmp_path, capsys):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil_plugin.py"
    evil.write_text(PLUGIN.format(marker=str(marker)))
    folder = tmp_path / "a" / "b" / "c"
    spec = "../../../evil_plugin.py:factory" if where == "climb" else f"{evil}:factory"
    path = scenario_with(folder, {"name": "custom", "factory": spec})
    for command in (["validate", str(path)], ["validate", str(path), "--import-plugins"],
                    ["run", str(path), "--out", str(tmp_path / "run")]):  # fmt: skip
        assert invoke(command) == 2
        err = capsys.readouterr().err
        assert "outside the scenario's folder" in err and "--allow-plugin-path" in err
    assert not marker.exists()
    with pytest.raises(FedjouleError, match="outside the scenario's folder"):
        load_scenario(path)
    assert not marker.exists()
    # the user allows the folder: now it runs (and fails in its factory, a clean error)
    assert invoke(["validate", str(path), "--import-plugins", "--allow-plugin-path",
                   str(tmp_path)]) == 2  # fmt: skip
    assert marker.exists() and "the factory ran" in capsys.readouterr().err


def test_validate_imports_nothing_unless_asked(tmp_path, capsys):
    """A plug-in file beside the scenario is checked by name (found, allowed, hashed), not
    run; `this:s` (which prints the Zen of Python on import) is refused unimported."""
    marker = tmp_path / "marker"
    (tmp_path / "plug.py").write_text(PLUGIN.format(marker=str(marker)))
    path = scenario_with(tmp_path, {"name": "custom", "factory": "plug.py:factory"})
    assert invoke(["validate", str(path)]) == 0
    assert "not imported" in capsys.readouterr().out and not marker.exists()
    zen = scenario_with(tmp_path, {"name": "custom", "factory": "this:s"}, "zen.yaml")
    assert invoke(["validate", str(zen)]) == 2
    out = capsys.readouterr()
    assert "Beautiful is better" not in out.out + out.err and "standard library" in out.err


def test_resume_checks_scenario_yaml_before_reading_it(tmp_path, capsys):
    """A run folder whose scenario.yaml was edited to name a plug-in (one placed in the
    folder itself, inside its tree) is refused before anything it names is loaded."""
    out = tmp_path / "run"
    assert invoke(["run", "default-theory", "--out", str(out), "-q", "--set", "training.rounds=2",
                   "--device", "cpu"]) == 0  # fmt: skip
    marker = tmp_path / "marker"
    (out / "evil.py").write_text(PLUGIN.format(marker=str(marker)))
    text = (out / "scenario.yaml").read_text()
    data = yaml.safe_load(text)
    data["dataset"] = {"name": "custom", "factory": "evil.py:factory"}
    (out / "scenario.yaml").write_text(text.splitlines()[0] + "\n" + yaml.safe_dump(data))
    assert invoke(["run", "--resume", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "was changed" in err and "nothing it names is loaded" in err
    assert not marker.exists()
    shutil.rmtree(out)
