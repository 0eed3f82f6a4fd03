"""User algorithms end to end: the FedAdam example's arithmetic, the tutorial's code, a
custom class from a file run from the command line (both executors, a stopped run
resumed, a changed file refused), an algorithm installed by another package through
an entry point (validated, run, resumed, swept), Ray workers loading a plug-in file,
and the messages of every mistake in naming one."""

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import yaml

from fedjoule.cli import invoke
from fedjoule.errors import FedjouleError
from fedjoule.plugins import REGISTRY, load_spec
from fedjoule.report.table import read_table
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.checkpoint import read_checkpoint
from fedjoule.simulator.run import run_scenario
from tests.simulator.killing import compare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fedadam.py"
DOC = ROOT / "docs" / "writing-an-algorithm.md"
FEDJOULE = [sys.executable, "-m", "fedjoule.cli"]

# a small run: 10 clients, 5 a round, 5 local steps, 3 rounds, no losses on the way
SMALL = {
    "name": "plug",
    "seed": 3,
    "training": {"rounds": 3, "clients_per_round": 5, "local_steps": 5, "lr": 0.1},
    "population": {"size": 10},
    "dataset": {"synthetic": {"avg_samples": 60, "test_samples": 60}},
    "availability": {"kind": "always"},
    "round": {"deadline_s": None, "min_clients": 1},
}
OPTIONS = {"server_lr": 0.05, "beta1": 0.9, "beta2": 0.99, "tau": 0.001}
CUSTOM = {"name": "custom", "class": "fedadam.py:FedAdam", "options": OPTIONS}


def fedadam():
    """The example's module, loaded as a scenario loads a plug-in file."""
    cls, _ = load_spec(f"{EXAMPLE}:FedAdam")
    return sys.modules[cls.__module__]


def scenario_file(folder: Path, algorithm: dict, name: str = "plug.yaml") -> Path:
    """A small scenario naming `algorithm`, next to a copy of the FedAdam example."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "fedadam.py").exists():
        (folder / "fedadam.py").write_text(EXAMPLE.read_text())
    path = folder / name
    path.write_text(yaml.safe_dump({**SMALL, "algorithm": algorithm}, sort_keys=False))
    return path


def cli(*args) -> int:
    return invoke([str(a) for a in args])


def final_state(run: Path) -> dict:
    return read_checkpoint(run / "checkpoint.pt")["simulation"]["state"]


# --------------------------------------------------------------------------- the maths


def make(n_clients=4, samples=(1.0, 2.0, 1.0, 4.0), **options):
    module = fedadam()
    config = module.FedAdamConfig(**options)
    return module.FedAdam(config, n_clients, torch.tensor(samples, dtype=torch.float64))


def test_one_aggregate_is_the_hand_computed_adam_step():
    algorithm = make(server_lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
    w0 = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    models = torch.tensor(
        [[1.5, -2.0, 0.0], [0.5, -1.0, 0.5], [3.0, -4.0, 1.0]], dtype=torch.float64
    )
    ids = torch.tensor([0, 1, 3])  # sizes 1, 2 and 4
    state = algorithm.init_state(w0)
    assert torch.equal(state["m"], torch.zeros(3, dtype=torch.float64))
    assert torch.allclose(state["v"], torch.full((3,), 1e-6, dtype=torch.float64))

    # by hand, coordinate by coordinate: the n_i-weighted mean 1/7 (1 a + 2 b + 4 c)
    mean = [(1 * a + 2 * b + 4 * c) / 7 for a, b, c in zip(*models.tolist(), strict=True)]
    delta = [mu - w for mu, w in zip(mean, w0.tolist(), strict=True)]
    assert delta == pytest.approx([14.5 / 7 - 1, -20 / 7 + 2, 5 / 7 - 0.5])
    m = [0.1 * d for d in delta]
    v = [0.99 * 1e-6 + 0.01 * d * d for d in delta]
    w = [
        w_ + 0.1 * m_ / (math.sqrt(v_) + 1e-3) for w_, m_, v_ in zip(w0.tolist(), m, v, strict=True)
    ]

    new = algorithm.aggregate(state, {"model": models}, ids)
    assert new["m"].tolist() == pytest.approx(m, rel=1e-12)
    assert new["v"].tolist() == pytest.approx(v, rel=1e-12)
    assert new["w"].tolist() == pytest.approx(w, rel=1e-12)
    assert torch.equal(state["w"], w0)  # the old state is left as it was

    # a second round continues from m and v
    again = algorithm.aggregate(new, {"model": models[:2]}, ids[:2])
    mean2 = [(1 * a + 2 * b) / 3 for a, b in zip(*models[:2].tolist(), strict=True)]
    delta2 = [mu - w_ for mu, w_ in zip(mean2, w, strict=True)]
    m2 = [0.9 * a + 0.1 * d for a, d in zip(m, delta2, strict=True)]
    v2 = [0.99 * a + 0.01 * d * d for a, d in zip(v, delta2, strict=True)]
    w2 = [x + 0.1 * a / (math.sqrt(b) + 1e-3) for x, a, b in zip(w, m2, v2, strict=True)]
    assert again["w"].tolist() == pytest.approx(w2, rel=1e-12)


def test_without_memory_the_step_is_the_normalised_pseudo_gradient():
    """beta1 = beta2 = 0: m = Delta, v = Delta^2, so w moves by lr Delta / (|Delta| + tau)."""
    algorithm = make(server_lr=1.0, beta1=0.0, beta2=0.0, tau=0.5, samples=(1.0, 1.0))
    w0 = torch.zeros(3, dtype=torch.float64)
    models = torch.tensor([[0.5, -2.0, 0.0], [0.5, -2.0, 0.0]], dtype=torch.float64)
    new = algorithm.aggregate(algorithm.init_state(w0), {"model": models}, torch.tensor([0, 1]))
    # 0.5 / (0.5 + 0.5), -2 / (2 + 0.5), 0 / (0 + 0.5)
    assert new["w"].tolist() == pytest.approx([0.5, -0.8, 0.0], abs=1e-15)


def test_the_first_step_moves_each_coordinate_by_about_server_lr():
    """From m = 0, v = tau^2 with the paper's betas: the step is lr (1 - b1) Delta /
    sqrt(b2 tau^2 + (1 - b2) Delta^2) + ..., which is lr sign(Delta) for |Delta| >> tau,
    whatever the scale of Delta; a coordinate that did not change does not move."""
    algorithm = make(samples=(1.0,), n_clients=1)  # defaults: lr 0.01, 0.9, 0.99, 1e-3
    w0 = torch.zeros(4, dtype=torch.float64)
    models = torch.tensor([[1e3, -5.0, 20.0, 0.0]], dtype=torch.float64)
    new = algorithm.aggregate(algorithm.init_state(w0), {"model": models}, torch.tensor([0]))
    assert new["w"].tolist() == pytest.approx([0.01, -0.01, 0.01, 0.0], rel=1e-2, abs=1e-12)
    assert new["w"][3] == 0 and torch.all(new["v"] > 0)


def test_options_are_checked_by_the_config_class():
    module = fedadam()
    assert module.FedAdam.config_class is module.FedAdamConfig
    assert module.FedAdamConfig().model_dump() == {
        "server_lr": 0.01,
        "beta1": 0.9,
        "beta2": 0.99,
        "tau": 0.001,
    }
    for bad in ({"beta1": 1.0}, {"beta2": -0.1}, {"tau": 0.0}, {"server_lr": 0}, {"x": 1}):
        with pytest.raises(ValueError):
            module.FedAdamConfig(**bad)


# --------------------------------------------------------------------------- the tutorial


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_tutorial_builds_exactly_the_example_file():
    """Every Python block of docs/writing-an-algorithm.md is a piece of examples/fedadam.py
    (or, for the hooks FedAdam leaves alone, of SCAFFOLD's module); the FedAdam blocks
    together, in order, are the whole file."""
    text = DOC.read_text()
    example = EXAMPLE.read_text()
    scaffold = (ROOT / "fedjoule" / "algorithms" / "scaffold.py").read_text()
    ours = []
    for block in code_blocks(text, "python"):
        if block in example:
            ours.append(block)
        else:
            assert block in scaffold, f"a Python block of {DOC.name} is in no file:\n{block}"
    lines = [line for block in ours for line in block.splitlines() if line.strip()]
    assert lines == [line for line in example.splitlines() if line.strip()]
    # no link to a file outside the repository, and the YAML and TOML blocks parse
    for target in re.findall(r"\]\(([^)]+)\)", text):
        assert not target.startswith(("http", "/", "..")), target
    for block in code_blocks(text, "yaml"):
        assert isinstance(yaml.safe_load(block), dict)
    import tomllib

    points = tomllib.loads(code_blocks(text, "toml")[0])["project"]["entry-points"]
    assert points == {"fedjoule.algorithms": {"fedadam": "mypkg.fedadam:FedAdam"}}


def test_the_tutorial_scenario_validates(tmp_path):
    """The scenario of 'Step 5' loads with the example next to it."""
    text = DOC.read_text()
    block = next(b for b in code_blocks(text, "yaml") if b.startswith("name: fedadam"))
    (tmp_path / "fedadam.py").write_text(EXAMPLE.read_text())
    (tmp_path / "my.yaml").write_text(block)
    scenario = load_scenario(tmp_path / "my.yaml")
    assert scenario.algorithm.options.server_lr == 0.1
    assert scenario.algorithm.source.sha256 == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- mistakes

NOT_ALGORITHM = "class NotAlgorithm:\n    pass\n"
BROKEN = "import torch\n\nraise RuntimeError('boom at import')\n"
BAD_CONFIG = (
    "from fedjoule.algorithms.base import Algorithm\n\n\n"
    "class Odd(Algorithm):\n    config_class = dict\n"
)


@pytest.mark.parametrize(
    ("algorithm", "words"),
    [
        (
            {"name": "fedadamx"},
            [
                "field 'algorithm.name'",
                "unknown algorithm 'fedadamx'",
                "'fedavg'",
                "'scaffold'",
                "'custom'",
                "(got 'fedadamx')",
            ],
        ),
        (
            {"name": "custom"},
            ["field 'algorithm.class'", "a custom algorithm needs class: 'file.py:ClassName'"],
        ),
        (
            {"name": "custom", "options": {"beta1": 0.5}},
            ["field 'algorithm.class'", "needs class"],
        ),
        (
            {"name": "custom", "class": "missing.py:FedAdam"},
            [
                "field 'algorithm.class'",
                "plug-in file 'missing.py' not found",
                "missing.py:FedAdam",
            ],
        ),
        (
            {"name": "custom", "class": "notalg.py:NotAlgorithm"},
            [
                "field 'algorithm.class'",
                "notalg.py:NotAlgorithm is type 'NotAlgorithm'",
                "not a subclass of fedjoule.algorithms.base.Algorithm",
            ],
        ),
        (
            {"name": "custom", "class": "fedadam.py:pseudo_gradient"},
            ["field 'algorithm.class'", "is function 'pseudo_gradient'", "not a subclass"],
        ),
        (
            {"name": "custom", "class": "fedadam.py:FedAdamm"},
            ["field 'algorithm.class'", "fedadam.py has no 'FedAdamm'"],
        ),
        (
            {"name": "custom", "class": "fedadam"},
            ["field 'algorithm.class'", "'fedadam' is not a plug-in spec"],
        ),
        (
            {"name": "custom", "class": "broken.py:X"},
            ["field 'algorithm.class'", "broken.py (line 3): RuntimeError: boom at import"],
        ),
        (
            {"name": "custom", "class": "odd.py:Odd"},
            ["field 'algorithm.class'", "config_class must be a subclass of"],
        ),
        (
            {**CUSTOM, "options": {"beta1": 1.5}},
            ["field 'algorithm.options.beta1'", "less than 1", "(got 1.5)"],
        ),
        (
            {**CUSTOM, "options": {"server_lr": -0.1}},
            ["field 'algorithm.options.server_lr'", "greater than 0", "(got -0.1)"],
        ),
        (
            {**CUSTOM, "options": {"tau": "small"}},
            ["field 'algorithm.options.tau'", "(got 'small')"],
        ),
        (
            {**CUSTOM, "options": {"betaa": 0.5}},
            ["field 'algorithm.options.betaa'", "unknown field 'betaa'", "beta1, beta2"],
        ),
    ],
)
def test_naming_mistakes_are_one_clean_message(tmp_path, capsys, algorithm, words):
    (tmp_path / "notalg.py").write_text(NOT_ALGORITHM)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "odd.py").write_text(BAD_CONFIG)
    path = scenario_file(tmp_path, algorithm)
    with pytest.raises(FedjouleError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "invalid scenario (1 problem)" in message, message
    for word in words:
        assert word in message, (word, message)
    # from the command line, importing the plug-ins: that message, exit code 2, no traceback
    assert cli("validate", path, "--import-plugins") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words[-1] in err and "Traceback" not in err


# --------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted vectorised run of the custom FedAdam scenario (in process)."""
    folder = tmp_path_factory.mktemp("reference")
    path = scenario_file(folder, CUSTOM)
    assert cli("run", path, "--out", folder / "run", "--device", "cpu", "-q") == 0
    return path, folder / "run"


def test_a_custom_file_runs_three_rounds_from_the_command_line(tmp_path, reference):
    """`fedjoule run plug.yaml` in a fresh process: the class is found next to the
    scenario, recorded with its SHA-256, and gives the in-process run's numbers."""
    path = scenario_file(tmp_path, CUSTOM)
    out = tmp_path / "run"
    proc = subprocess.run(
        [*FEDJOULE, "run", path.name, "--out", str(out), "--device", "cpu", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "plug: 10 clients, custom" in proc.stdout
    rows = read_table(out / "rounds.csv")
    assert [r["round"] for r in rows] == ["0", "1", "2"]
    assert all(r["arrived"] == "5" and r["failed"] == "0" for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds_completed"] == 3 and summary["final_accuracy"] > 0.3
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())["algorithm"]
    assert recorded["class"] == "fedadam.py:FedAdam" and recorded["options"] == OPTIONS
    assert recorded["source"]["file"] == str((tmp_path / "fedadam.py").resolve())
    assert recorded["source"]["sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    state = final_state(out)
    assert set(state) == {"w", "m", "v"} and state["m"].abs().max() > 0
    assert compare(reference[1], out) == []  # the same numbers as in process


def test_vectorised_and_sequential_executors_agree(tmp_path, reference):
    path, vectorised = reference
    out = tmp_path / "sequential"
    assert cli("run", path, "--out", out, "--executor", "sequential", "--device", "cpu", "-q") == 0
    a, b = final_state(vectorised), final_state(out)
    for key in ("w", "m", "v"):
        assert torch.allclose(a[key], b[key], atol=1e-5, rtol=0), key
    assert (a["w"] - load_w0(path)).abs().max() > 1e-2  # it trained
    for ra, rb in zip(
        read_table(vectorised / "rounds.csv"), read_table(out / "rounds.csv"), strict=True
    ):
        for column in ("accuracy", "loss", "energy_total_j"):
            assert float(ra[column]) == pytest.approx(float(rb[column]), abs=1e-5), column


def load_w0(path: Path) -> torch.Tensor:
    from fedjoule.simulator.world import build_world

    return build_world(load_scenario(path), device="cpu").w0


def test_a_stopped_run_resumes_to_the_uninterrupted_files(tmp_path, reference):
    path, full = reference
    out = tmp_path / "stopped"
    _, partial = run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    assert partial["rounds_completed"] == 1
    # the plug-in lies outside the run folder: resumed only where the user allows it
    assert cli("run", "--resume", "--out", out, "-q") == 2
    allow = ("--allow-plugin-path", path.parent)
    assert cli("run", "--resume", "--out", out, "-q", *allow) == 0
    assert compare(full, out) == []
    assert torch.equal(final_state(full)["v"], final_state(out)["v"])


# FedAdam as plug-ins were written before typed states: a plain dict state, updated as
# {**state, ...}; appended to the example, whose functions it uses
DICT_WAY = """

class DictFedAdam(FedAdam):
    def init_state(self, w0):
        m, v = torch.zeros_like(w0), torch.full_like(w0, self.config.tau**2)
        return {"w": w0.clone(), "m": m, "v": v}

    def aggregate(self, state, uploads, client_ids):
        c = self.config
        delta = pseudo_gradient(uploads["model"], self.client_samples[client_ids], state["w"])
        m = first_moment(state["m"], delta, c.beta1)
        v = second_moment(state["v"], delta, c.beta2)
        return {**state, "w": adam_step(state["w"], m, v, c.server_lr, c.tau), "m": m, "v": v}
"""


def test_a_dict_state_plugin_runs_and_resumes_as_the_typed_example(tmp_path, reference):
    """The older way still works: stopped after a round and resumed, the dict-state FedAdam
    gives the typed example's files and final state, its checkpoint a dict of the same names."""
    (tmp_path / "dictadam.py").write_text(EXAMPLE.read_text() + DICT_WAY)
    path = scenario_file(tmp_path, {**CUSTOM, "class": "dictadam.py:DictFedAdam"})
    out = tmp_path / "run"
    run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    assert cli("run", "--resume", "--out", out, "-q", "--allow-plugin-path", tmp_path) == 0
    assert compare(reference[1], out) == []
    ours, typed = final_state(out), final_state(reference[1])
    assert type(ours) is dict and list(ours) == list(typed) == ["w", "m", "v"]
    assert all(torch.equal(ours[key], typed[key]) for key in typed)


def test_a_changed_plugin_file_refuses_resume(tmp_path, capsys):
    path = scenario_file(tmp_path, CUSTOM)
    out = tmp_path / "run"
    run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    plugin = tmp_path / "fedadam.py"
    plugin.write_text(EXAMPLE.read_text().replace("(1 - beta1) * delta", "delta"))
    capsys.readouterr()
    allow = ("--allow-plugin-path", tmp_path)
    assert cli("run", "--resume", "--out", out, "-q", *allow) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert f"{plugin.resolve()} has changed since this scenario was recorded" in err
    assert "field 'algorithm.class'" in err
    # restored, it resumes
    plugin.write_text(EXAMPLE.read_text())
    assert cli("run", "--resume", "--out", out, "-q", *allow) == 0
    assert json.loads((out / "summary.json").read_text())["rounds_completed"] == 3


def test_a_same_named_file_in_the_working_folder_is_not_taken(tmp_path, monkeypatch, reference):
    """The scenario's plug-in file is found next to it and recorded; a different
    fedadam.py in the working folder is neither run nor mistaken for a changed file, when
    the run builds its algorithm or when it resumes."""
    path = scenario_file(tmp_path / "experiment", CUSTOM)
    (tmp_path / "fedadam.py").write_text("raise RuntimeError('the wrong fedadam.py')\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())["algorithm"]["source"]
    assert recorded["file"] == str((tmp_path / "experiment" / "fedadam.py").resolve())
    allow = ("--allow-plugin-path", tmp_path / "experiment")
    assert cli("run", "--resume", "--out", out, "-q", *allow) == 0
    assert compare(reference[1], out) == []


# --------------------------------------------------------------------------- entry points

DIST = "fedjoule-test-algos"
MODULE = "fjtest_fedadam"
BROKEN_MODULE = "fjtest_broken"


def install_package(folder: Path) -> Path:
    """A package as pip would leave it in site-packages: the module and a .dist-info
    folder whose entry_points.txt declares three algorithms, one that imports cleanly,
    one that fails to import and one that names no Algorithm. Returns the folder to put on
    sys.path (or PYTHONPATH)."""
    site = folder / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{MODULE}.py").write_text(EXAMPLE.read_text())
    (site / f"{BROKEN_MODULE}.py").write_text("import fjtest_missing_dependency  # noqa\n")
    info = site / f"{DIST.replace('-', '_')}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[fedjoule.algorithms]\n"
        f"fedadam = {MODULE}:FedAdam\n"
        f"brokenalg = {BROKEN_MODULE}:Thing\n"
        f"notalg = {MODULE}:pseudo_gradient\n"
    )
    return site


@contextmanager
def installed(site: Path):
    """The package importable in this process, its entry points read again; undone after."""
    sys.path.insert(0, str(site))
    REGISTRY.reload_installed()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        for name in (MODULE, BROKEN_MODULE):
            sys.modules.pop(name, None)
        REGISTRY.reload_installed()


def with_pythonpath(site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    site = install_package(tmp_path_factory.mktemp("package"))
    with installed(site):
        yield site


ENTRY = {"name": "fedadam", **OPTIONS}


def test_entry_points_load_after_the_importlib_metadata_backport_is_imported(package):
    """Once `importlib_metadata` is imported (MLflow and W&B import it), its finder hands
    out its own EntryPoint class: the registry still loads the installed algorithm."""
    import importlib.metadata

    import importlib_metadata  # noqa: F401 (a dependency of the dev extra's trackers)

    from fedjoule.algorithms.base import Algorithm
    from fedjoule.plugins import entry_target

    REGISTRY.reload_installed()
    entry = REGISTRY.get("algorithm", "fedadam")
    assert not isinstance(entry.target, importlib.metadata.EntryPoint)  # the case at hand
    target, source = entry_target(entry)
    assert issubclass(target, Algorithm) and target.__name__ == "FedAdam"
    assert source["entry_point"] == "fjtest_fedadam:FedAdam"


def test_an_entry_point_algorithm_validates_runs_and_matches_the_file(tmp_path, package, reference):
    entry = REGISTRY.get("algorithm", "fedadam")
    assert entry.origin == f"entry point fedjoule.algorithms from {DIST} 0.1"
    path = scenario_file(tmp_path, ENTRY)
    scenario = load_scenario(path)
    assert scenario.algorithm.name == "fedadam" and scenario.algorithm.server_lr == 0.05
    assert type(scenario.algorithm).__name__ == "FedAdamConfigSection"
    out = tmp_path / "run"
    assert cli("run", path, "--out", out, "--device", "cpu", "-q") == 0
    # the installed class is the example's code: the same numbers as the custom file
    assert compare(reference[1], out) == []
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())["algorithm"]
    source = recorded.pop("source")  # the installed code is recorded: module file, SHA-256
    assert recorded == ENTRY
    assert source["entry_point"] == "fjtest_fedadam:FedAdam"
    assert source["sha256"] == hashlib.sha256(Path(source["file"]).read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("algorithm", "words"),
    [
        ({"name": "fedadam", "beta2": 2}, ["field 'algorithm.beta2'", "less than 1", "(got 2)"]),
        ({"name": "fedadam", "options": {}}, ["field 'algorithm.options'", "unknown field"]),
        (
            {"name": "brokenalg"},
            [
                "field 'algorithm.name'",
                f"algorithm 'brokenalg' (entry point fedjoule.algorithms from {DIST} 0.1, "
                f"{BROKEN_MODULE}:Thing) failed to load: ModuleNotFoundError",
                "fjtest_missing_dependency",
            ],
        ),
        (
            {"name": "notalg"},
            ["field 'algorithm.name'", "is function 'pseudo_gradient'", "not a subclass"],
        ),
    ],
)
def test_entry_point_mistakes_are_clean_messages(tmp_path, package, algorithm, words):
    with pytest.raises(FedjouleError) as caught:
        load_scenario(scenario_file(tmp_path, algorithm))
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_an_entry_point_run_resumes(tmp_path, package, reference):
    path = scenario_file(tmp_path, ENTRY)
    out = tmp_path / "stopped"
    run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    assert cli("run", "--resume", "--out", out, "-q") == 0
    assert compare(reference[1], out) == []


def sweep_summaries(out: Path) -> dict:
    found = {}
    for folder in sorted((out / "runs").iterdir()):
        summary = json.loads((folder / "summary.json").read_text())
        summary.pop("wall_time_s")
        found[folder.name] = summary
    return found


def test_an_entry_point_algorithm_sweeps_in_worker_processes(tmp_path, package):
    """`fedjoule sweep` over two server learning rates, two spawned workers that find the
    package on PYTHONPATH; the same numbers as the sweep run in this process."""
    path = scenario_file(tmp_path, ENTRY)
    grid = ["--grid", "algorithm.server_lr=0.01,0.05"]
    args = ["sweep", str(path), *grid, "--device", "cpu", "--quiet"]
    proc = subprocess.run(
        [*FEDJOULE, *args, "--workers", "2", "--out", str(tmp_path / "procs")],
        capture_output=True,
        text=True,
        env=with_pythonpath(package),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    described = json.loads((tmp_path / "procs" / "sweep.json").read_text())
    assert [r["status"] for r in described["runs"]] == ["ran", "ran"]
    assert cli(*args, "--workers", "1", "--out", tmp_path / "here") == 0
    found = sweep_summaries(tmp_path / "procs")
    assert list(found) == ["server_lr=0.01", "server_lr=0.05"]
    assert found == sweep_summaries(tmp_path / "here")
    assert found["server_lr=0.01"]["final_accuracy"] != found["server_lr=0.05"]["final_accuracy"]


def test_ray_workers_load_a_custom_file(tmp_path, monkeypatch):
    """A 2-point Ray sweep of a custom-file scenario: the Ray workers, which get the
    scenario as data, load the plug-in file and give the local sweep's numbers."""
    pytest.importorskip("ray")
    path = scenario_file(tmp_path, CUSTOM)
    monkeypatch.chdir(tmp_path)  # (see the next test)
    args = ["sweep", path, "--grid", "algorithm.options.server_lr=0.01,0.05", "--device", "cpu"]
    args += ["--quiet"]
    assert cli(*args, "--backend", "local", "--workers", "1", "--out", tmp_path / "local") == 0
    assert cli(*args, "--backend", "ray", "--workers", "2", "--out", tmp_path / "ray") == 0
    described = json.loads((tmp_path / "ray" / "sweep.json").read_text())
    assert described["backend"] == "ray" and [r["status"] for r in described["runs"]] == [
        "ran",
        "ran",
    ]
    assert sweep_summaries(tmp_path / "ray") == sweep_summaries(tmp_path / "local")


def test_a_sweep_finds_a_plugin_file_next_to_its_scenario(tmp_path):
    path = scenario_file(tmp_path, CUSTOM)
    args = ["sweep", path, "--grid", "seed=1,2", "--device", "cpu", "--quiet", "--workers", "1"]
    assert cli(*args, "--out", tmp_path / "sweep") == 0
