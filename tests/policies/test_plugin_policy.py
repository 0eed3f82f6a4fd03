"""Plug-in policies (issue 29 item 4): docs/writing-a-policy.md's example is the example file
and runs as written, choosing exactly its rule's clients; the trust rules, validate, a
raising or a violating plug-in, --resume's SHA-256 check and an installed (entry-point)
policy."""

import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import fedjoule
from fedjoule.cli import invoke
from fedjoule.plugins import REGISTRY, load_spec
from fedjoule.policies.plugin import Plan
from fedjoule.report.table import read_table
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.checkpoint import read_checkpoint
from fedjoule.simulator.run import run_scenario
from tests.policies.helpers import observation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "battery_floor.py"
DOC = ROOT / "docs" / "writing-a-policy.md"
SPEC = "battery_floor.py:FullestWithFloor"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)


def example_class():
    cls, _ = load_spec(f"{EXAMPLE}:FullestWithFloor")
    return cls


def scenario_file(folder: Path, policy: dict, plugin: str = "", **more) -> Path:
    """A small --no-train scenario naming `policy`, with `plugin` as pol.py beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    if plugin:
        (folder / "pol.py").write_text(plugin)
    data = {"name": "pol", "seed": 2, "training": {"rounds": 2, "clients_per_round": 3},
            "population": {"size": 8}, "availability": {"kind": "always"}, "policy": policy,
            **more}  # fmt: skip
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(path: Path, out: Path, *more) -> int:
    return invoke(["run", str(path), "--no-train", "-q", "--out", str(out), *map(str, more)])


# --------------------------------------------------------------------------- the docs page


def test_the_page_builds_exactly_the_example_file():
    lines = [line for block in code_blocks("python") for line in block.splitlines()]
    expected = [line for line in EXAMPLE.read_text().splitlines() if line.strip()]
    assert [line for line in lines if line.strip()] == expected
    import tomllib

    points = tomllib.loads(code_blocks("toml")[0])["project"]["entry-points"]
    assert points == {
        "fedjoule.policies": {"battery-floor": "mypkg.battery_floor:FullestWithFloor"}
    }


def test_the_rule_on_a_hand_made_observation():
    """W = 2: clients 4 (age 5) and 1 (age 3) are overdue, the longest waiting first; then
    the fullest batteries 3 (0.9) and 0 (0.8, the lower id of a tie with 5)."""
    policy = example_class()(max_wait_rounds=2, low_battery=0.5)
    obs = observation(
        6, round_index=4,
        battery_fraction=np.array([0.8, 0.1, 0.3, 0.9, 0.2, 0.8]),
        age_rounds=np.array([1, 3, 2, 1, 5, 2]),
    )  # fmt: skip
    gen = np.random.default_rng(0)
    assert policy.select(obs, 3, gen).tolist() == [1, 3, 4]
    assert policy.select(obs, 4, gen).tolist() == [0, 1, 3, 4]
    chosen = np.array([0, 1, 3, 4])
    plan = Plan(chosen, np.array([10, 10, 7, 1]), *(np.full(4, np.nan),) * 3,
                np.ones(4), np.ones(4), None)  # fmt: skip
    picked = observation(4, battery_fraction=np.array([0.8, 0.1, 0.9, 0.2]), client_id=chosen)
    assert policy.allocate(picked, plan)["local_steps"].tolist() == [10, 5, 7, 1]


def selections(run_dir: Path) -> tuple[list[list[int]], dict]:
    """Each round's clients, and (round, client) -> its energy and compute energy."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    rounds = max(e["round"] for e in events) + 1
    chosen = [sorted({e["client"] for e in events if e["round"] == r}) for r in range(rounds)]
    energy: dict = {}
    for e in events:
        total, compute = energy.get((e["round"], e["client"]), (0.0, 0.0))
        energy[e["round"], e["client"]] = (
            total + e["energy_j"],
            compute + e["energy_j"] * (e["kind"] == "compute"),
        )
    return chosen, energy


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch):
    """The page's scenario and command, run in a folder with the example beside them: each
    round's clients are the rule's on the observation replayed from the outputs (battery
    = initial less the energy of earlier rounds; age from the earlier selections), and a
    client below 70 % charge spends half the compute energy of the same run without the
    halving (low_battery 0)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "battery_floor.py").write_text(EXAMPLE.read_text())
    scenario = code_blocks("yaml")[0]
    (tmp_path / "battery-floor.yaml").write_text(scenario)
    command = re.search(r"^    (fedjoule run battery-floor\.yaml.*)$", DOC.read_text(), re.M)
    argv = shlex.split(command.group(1))[1:]
    assert invoke(argv) == 0
    out = tmp_path / argv[argv.index("--out") + 1]
    chosen, energy = selections(out)
    initial_j = [float(row["battery_initial_j"]) for row in read_table(out / "clients.csv")]
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())
    capacity_j = recorded["population"]["device_classes"][0]["battery_j"]
    battery_j = np.array(initial_j)
    last = np.full(len(battery_j), -1)
    ids = np.arange(len(battery_j))
    for r, got in enumerate(chosen):
        age = r - last
        overdue = age > 4
        order = np.lexsort((ids, -battery_j, -np.where(overdue, age, 0), ~overdue))
        assert got == sorted(order[:3].tolist()), r
        last[got] = r
        for k in got:
            battery_j[k] -= energy[r, k][0]
    assert chosen[:5] == [[1, 2, 10]] * 4 + [[0, 7, 8]] and (last >= 0).all()
    # the allocation: half the compute energy below 70 % (replayed the same way)
    assert invoke([*argv, "-q", "--out", "full", "--set", "policy.options.low_battery=0"]) == 0
    _, unhalved = selections(tmp_path / "full")
    battery_j = np.array(initial_j)
    halved = set()
    for (r, k), (total_j, compute_j) in sorted(energy.items()):
        low = battery_j[k] / capacity_j < 0.7
        halved.add(k) if low else None
        assert compute_j == pytest.approx(unhalved[r, k][1] * (0.5 if low else 1), rel=1e-12)
        battery_j[k] -= total_j
    assert halved == {3, 5, 9, 11}


# --------------------------------------------------------------------------- trust

MARKER = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n"
SELECTS = (
    "import numpy as np\nfrom fedjoule.policies.plugin import Policy\n"
    "class First(Policy):\n    def select(self, obs, m, gen):\n        return obs.client_id[:m]\n"
)


def test_validate_imports_nothing_and_a_file_outside_is_refused(tmp_path, capsys):
    marker = tmp_path / "marker"
    path = scenario_file(tmp_path / "exp", {"select": "custom", "class": "pol.py:First"},
                         MARKER.format(marker=str(marker)) + SELECTS)  # fmt: skip
    assert invoke(["validate", str(path)]) == 0
    assert "not imported" in capsys.readouterr().out and not marker.exists()
    assert invoke(["validate", str(path), "--import-plugins"]) == 0 and marker.exists()
    marker.unlink()
    # the same file one folder up: not run, by validate or run, unless its folder is allowed
    (tmp_path / "pol.py").write_text((tmp_path / "exp" / "pol.py").read_text())
    inner = scenario_file(
        tmp_path / "exp" / "in", {"select": "custom", "class": "../../pol.py:First"}
    )
    ran = ["run", str(inner), "--no-train", "-q", "--out", str(tmp_path / "o")]
    for argv in (["validate", str(inner), "--import-plugins"], ran):
        assert invoke(argv) == 2
        err = capsys.readouterr().err
        assert "is outside the scenario's folder" in err and "Traceback" not in err
        assert f"--allow-plugin-path {tmp_path}" in err
    assert not marker.exists() and not (tmp_path / "o").exists()
    assert run(inner, tmp_path / "o", "--allow-plugin-path", tmp_path) == 0 and marker.exists()
    recorded = yaml.safe_load((tmp_path / "o" / "scenario.yaml").read_text())["policy"]
    assert recorded["class"] == "../../pol.py:First"
    assert recorded["source"]["file"] == str((tmp_path / "pol.py").resolve())


# --------------------------------------------------------------------------- mistakes

BAD = """
class Boom(Policy):
    def select(self, obs, m, gen):
        raise ValueError("no candidate I like")
class BoomLater(Policy):
    def allocate(self, obs, plan):
        return {"local_steps": plan.local_steps[:1] * [][0]}
class NoInit(Policy):
    def __init__(self, size):
        raise RuntimeError("cannot start")
    def select(self, obs, m, gen):
        return obs.client_id[:m]
class Twice(Policy):
    def select(self, obs, m, gen):
        return [obs.client_id[0]] * m
class Many(Policy):
    def select(self, obs, m, gen):
        return obs.client_id
class Stranger(Policy):
    def select(self, obs, m, gen):
        return [99]
class ZeroSteps(Policy):
    def allocate(self, obs, plan):
        return {"local_steps": np.where(plan.client_id == plan.client_id[-1], 0, 5)}
class Fast(Policy):
    def allocate(self, obs, plan):
        return {"cpu_freq_hz": plan.freq_max_hz * 2}
class Wide(Policy):
    def allocate(self, obs, plan):
        return {"band_share": np.full(len(plan.client_id), 0.5)}
class Odd(Policy):
    def allocate(self, obs, plan):
        return {"power_w": 1}
"""


@pytest.mark.parametrize(
    "policy, message",
    [
        ({"select": "custom", "class": "pol.py:Boom"},
         "error: policy 'pol.py:Boom' select failed: ValueError: no candidate I like"),
        ({"class": "pol.py:BoomLater"},
         "error: policy 'pol.py:BoomLater' allocate failed: IndexError: list index out of range"),
        ({"select": "custom", "class": "pol.py:NoInit", "options": {"size": 1}},
         "error: policy 'pol.py:NoInit' (its constructor) failed: RuntimeError: cannot start"),
        ({"select": "custom", "class": "pol.py:Twice"},
         "error: policy 'pol.py:Twice' selected client 0 more than once"),
        ({"select": "custom", "class": "pol.py:Many"},
         "error: policy 'pol.py:Many' selected 8 clients; this round selects at most 3"),
        ({"select": "custom", "class": "pol.py:Stranger"},
         "error: policy 'pol.py:Stranger' selected client 99, which is not among the round's 8"),
        ({"select": "age", "class": "pol.py:ZeroSteps"},
         "error: policy 'pol.py:ZeroSteps': client 2's local steps are 0; allowed: a whole "
         "number, at least 1"),
        ({"select": "age", "class": "pol.py:Fast"},
         "error: policy 'pol.py:Fast': client 0's CPU frequency 4e+09 Hz is outside its DVFS "
         "range, 1e+09 to 2e+09 Hz"),
        ({"select": "age", "class": "pol.py:Wide"},
         "error: policy 'pol.py:Wide': the band shares of the 3 selected clients sum to 1.5, "
         "more than the whole band (1); the largest is client 0's 0.5"),
        ({"class": "pol.py:Odd"},
         "error: policy 'pol.py:Odd' allocate returned {'power_w': 1}; expected None or a "
         "dict with any of local_steps, cpu_freq_hz, band_share"),
    ],
)  # fmt: skip
def test_a_failing_or_violating_plugin_is_one_error_line(policy, message, tmp_path, capsys):
    path = scenario_file(tmp_path, policy, SELECTS + BAD)
    assert run(path, tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err, err


@pytest.mark.parametrize(
    "policy, message",
    [
        ({"select": "custom"}, "select=custom needs class: 'file.py:ClassName'"),
        ({"select": "custom", "class": "pol.py:ZeroSteps"},
         "'pol.py:ZeroSteps' has no select, which select=custom uses"),
        ({"class": "pol.py:First"}, "'pol.py:First' has no allocate, so with select=random it "
         "decides nothing"),
        ({"select": "custom", "class": "pol.py:First", "options": {"size": 2}},
         "'pol.py:First' does not take options {'size': 2}"),
        ({"select": "custom", "class": "pol.py:json"}, "not a subclass of "
         "fedjoule.policies.plugin.Policy"),
        ({"select": "custom", "class": "nothing-installed"}, "unknown policy 'nothing-installed'"),
    ],
)  # fmt: skip
def test_a_misnamed_plugin_is_refused_when_loaded(policy, message, tmp_path, capsys):
    path = scenario_file(tmp_path, policy, "import json\n" + SELECTS + BAD)
    assert invoke(["validate", str(path), "--import-plugins"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_a_plugin_dispatches_under_async(tmp_path):
    """Under async the plug-in fills the free slots: at time 0, with 3 slots and every
    client idle, First takes the three lowest ids."""
    path = scenario_file(tmp_path, {"select": "custom", "class": "pol.py:First"}, SELECTS,
                         protocol={"kind": "async", "concurrency": 3},
                         training={"rounds": 6, "clients_per_round": 3},
                         round={"interval_s": None}, output={"events": True})  # fmt: skip
    out = tmp_path / "run"
    assert run(path, out) == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert sorted({e["client"] for e in events if e["start_s"] == 0.0}) == [0, 1, 2]


# --------------------------------------------------------------------------- resume


def test_resume_checks_the_plugins_sha256(tmp_path, capsys):
    """A training run stopped after a round: a changed plug-in file is refused on resume
    (its recorded SHA-256), the restored one resumes."""
    policy = {"select": "custom", "class": SPEC, "options": {"max_wait_rounds": 1}}
    folder = tmp_path / "exp"
    path = scenario_file(folder, policy, dataset={"synthetic": {"avg_samples": 20,
                         "test_samples": 20}}, round={"deadline_s": None})  # fmt: skip
    (folder / "battery_floor.py").write_text(EXAMPLE.read_text())
    out = tmp_path / "run"
    _, partial = run_scenario(load_scenario(path), out, device="cpu", stop_after=1)
    assert partial["rounds_completed"] == 1
    (folder / "battery_floor.py").write_text(EXAMPLE.read_text().replace("// 2", "// 3"))
    capsys.readouterr()
    allow = ["--allow-plugin-path", str(folder)]
    assert invoke(["run", "--resume", "--out", str(out), "-q", *allow]) == 2
    err = capsys.readouterr().err
    assert "has changed since this scenario was recorded" in err and "Traceback" not in err
    (folder / "battery_floor.py").write_text(EXAMPLE.read_text())
    assert invoke(["run", "--resume", "--out", str(out), "-q", *allow]) == 0
    assert len(read_table(out / "rounds.csv")) == 2


STATEFUL = """
import numpy as np
from fedjoule.policies.plugin import Policy

class Turns(Policy):
    \"\"\"The m candidates it picked least often, ties along a ring its round count turns.\"\"\"
    def __init__(self, n_clients=8):
        self.rounds, self.picked = 0, np.zeros(n_clients)
    def select(self, obs, m, gen):
        ring = (obs.client_id - 3 * self.rounds) % obs.n_clients
        chosen = obs.client_id[np.lexsort((ring, self.picked[obs.client_id]))[:m]]
        self.picked[chosen] += 1
        self.rounds += 1
        return chosen
    def state_dict(self):
        return {"rounds": self.rounds, "picked": self.picked, "note": ["turns", None]}
    def load_state_dict(self, state):
        assert isinstance(state["picked"], np.ndarray), type(state["picked"])
        self.rounds, self.picked = state["rounds"], state["picked"]
class Opaque(Policy):
    def select(self, obs, m, gen):
        return obs.client_id[:m]
    def state_dict(self):
        return {"seen": {1, 2}}
class Wide(Opaque):
    def state_dict(self):
        return {"x": [np.zeros(2, dtype=np.longdouble)]}
"""
TRAINING = {"dataset": {"synthetic": {"avg_samples": 20, "test_samples": 20}},
            "round": {"deadline_s": None}}  # fmt: skip


def without_wall_times(path: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if "wall" not in k} for row in read_table(path)]


def test_a_plugins_own_state_is_checkpointed_and_resumes_to_the_straight_run(tmp_path):
    """Turns keeps its round count and pick counts: 8 clients, 3 a round, rounds 0 and 1
    take 0-2 and 3-5 (ring offsets 0 and 3), so the checkpoint after round 2 holds
    rounds 2 and picks [1 1 1 1 1 1 0 0]; resumed from it, the run equals the straight one
    (a fresh object would start round 2 from clients 0-2 again)."""
    policy = {"select": "custom", "class": "pol.py:Turns"}
    path = scenario_file(tmp_path / "exp", policy, STATEFUL, training={"rounds": 4,
                         "clients_per_round": 3}, **TRAINING)  # fmt: skip
    options = {"quiet": True, "device": "cpu", "allow_plugin_paths": [tmp_path / "exp"]}
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    fedjoule.run(path, whole, **options)
    fedjoule.run(path, cut, on_round=lambda row: row["round"] < 1, **options)
    saved = read_checkpoint(cut / "checkpoint.pt")["simulation"]["policy"]["plugin"]
    assert saved["rounds"] == 2 and saved["note"] == ["turns", None]
    assert saved["picked"].tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    fedjoule.run(None, cut, resume=True, **options)
    for name in ("rounds.csv", "clients.csv"):
        assert without_wall_times(cut / name) == without_wall_times(whole / name)
    picked = [int(c["selected"]) for c in read_table(whole / "clients.csv")]
    assert picked == [2, 2, 2, 2, 1, 1, 1, 1]  # round 2: 0, 6, 7; round 3 (ring from 1): 1-3


def test_a_plugin_state_that_is_not_plain_data_is_one_error_line(tmp_path, capsys):
    path = scenario_file(tmp_path, {"select": "custom", "class": "pol.py:Opaque"}, STATEFUL,
                         **TRAINING)  # fmt: skip
    assert invoke(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: policy 'pol.py:Opaque' state_dict returned {'seen': {1, 2}} (['seen']: a set); "
        "a checkpoint holds plain data only: a dict of numbers, strings, None, lists, dicts "
        "with string keys, numpy arrays of numbers"
    ), err


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="long double is float64")
def test_a_plugin_state_with_a_long_double_array_is_one_error_line(tmp_path, capsys):
    """numpy numbers a tensor cannot hold (long double; complex) are refused at the save,
    where they stopped the run with an internal error (torch.from_numpy refuses them)."""
    path = scenario_file(tmp_path, {"select": "custom", "class": "pol.py:Wide"}, STATEFUL,
                         **TRAINING)  # fmt: skip
    assert invoke(["run", str(path), "-q", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    dtype = np.dtype(np.longdouble)
    assert err.startswith("error: policy 'pol.py:Wide' state_dict returned {'x': [array(")
    assert f"(['x'][0]: an array of {dtype}); a checkpoint holds plain data only" in err, err
    assert len(err.splitlines()) == 1


# --------------------------------------------------------------------------- entry points


def test_an_installed_policy_is_named_by_its_entry_point(tmp_path, monkeypatch):
    """A package whose entry_points.txt declares a policy: scenarios name it without a
    file, the run records the module and its SHA-256, and selects as the file does."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "fjtest_floor.py").write_text(EXAMPLE.read_text())
    info = site / "fjtest_floor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fjtest-floor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[fedjoule.policies]\nbattery-floor = fjtest_floor:FullestWithFloor\n"
    )
    monkeypatch.syspath_prepend(str(site))
    REGISTRY.reload_installed()
    try:
        by_name = scenario_file(tmp_path / "a", {"select": "custom", "class": "battery-floor"})
        assert run(by_name, tmp_path / "named") == 0
        recorded = yaml.safe_load((tmp_path / "named" / "scenario.yaml").read_text())["policy"]
        assert recorded["source"]["module"] == "fjtest_floor"
        assert recorded["source"]["entry_point"] == "fjtest_floor:FullestWithFloor"
        by_file = scenario_file(tmp_path / "b", {"select": "custom", "class": SPEC})
        (tmp_path / "b" / "battery_floor.py").write_text(EXAMPLE.read_text())
        assert run(by_file, tmp_path / "file") == 0
        rows = [
            [
                line.rsplit(",", 1)[0]
                for line in (tmp_path / name / "rounds.csv").read_text().splitlines()
            ]
            for name in ("named", "file")
        ]  # wall_time_s aside
        assert rows[0] == rows[1] and len(rows[0]) == 3
    finally:
        sys.modules.pop("fjtest_floor", None)
        monkeypatch.undo()
        REGISTRY.reload_installed()


def test_band_shares_need_the_fdma_band(tmp_path, capsys):
    policy = {"select": "age", "class": "pol.py:Wide"}
    path = scenario_file(tmp_path, policy, SELECTS + BAD, channel={"access": "tdma"})
    assert run(path, tmp_path / "o") == 2
    assert capsys.readouterr().err.strip() == (
        "error: policy 'pol.py:Wide' set band shares; a policy that sets shares of an FDMA "
        "band on the channel model's rates: needs channel.access fdma and no trace (got "
        "channel.access=tdma)"
    )
