"""One energy answer from every engine (issue 26): every built-in device profile and every
built-in scenario through `fedjoule capacity --search none`, `run --no-train` on both
engines, a learning run and plan's replay gives the SimPy engine's energy per kind to 1e-9
relative, or the documented refusal or fallback (docs/system-engine.md). The profiles'
measured radios (promotion, tails across rounds, idle, rate-dependent power) run on the
numpy engine in closed form (simulator/vector_radio.py).

Every online client is selected (clients_per_round = population) and no deadline is set,
so capacity's own selection keys pick the same clients as the runs, and its candidate
(which plays without a deadline) is the runs' scenario."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fedjoule
from fedjoule.cli import app
from fedjoule.errors import FedjouleError
from fedjoule.planning.capacity import (
    ENERGY_KINDS,
    CommonDrawsEngine,
    SimpyCommonDraws,
    evaluate_on,
    plan_capacity,
    variant,
)
from fedjoule.planning.replay import reprice
from fedjoule.report.results import ENERGY_FIELDS
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system import unmodelled
from fedjoule.simulator.system_run import choose_engine, run_system
from fedjoule.simulator.system_world import build_system_world
from fedjoule.simulator.world import build_world

ROOT = Path(fedjoule.__file__).parent
PROFILES = sorted(p.stem for p in (ROOT / "devices" / "profiles").glob("*.yaml"))
BUILTINS = sorted(p.stem for p in (ROOT / "scenarios" / "builtin").glob("*.yaml"))
ROUNDS = 3
SIZE = 12


def small(name: str, *extra: str):
    """`name` with SIZE clients, every one selected, ROUNDS rounds, no deadline."""
    return load_scenario(name, [
        f"population.size={SIZE}", f"training.clients_per_round={SIZE}",
        f"training.rounds={ROUNDS}", "round.deadline_s=null", "output.events=false",
        "output.timeline_rounds=[]", *extra,
    ])  # fmt: skip


def with_profiles(*profiles: str, extra=()):
    classes = ", ".join(f"{{profile: {p}, share: {1 / len(profiles)!r}}}" for p in profiles)
    return small("default", f"population.device_classes=[{classes}]", *extra)


def assert_kinds(reference: dict, other: dict, what: str) -> None:
    for kind in ENERGY_KINDS:
        assert other[kind] == pytest.approx(reference[kind], rel=1e-9, abs=1e-15), (what, kind)


def capacity_kinds(scenario) -> tuple[dict, dict]:
    """capacity --search none over the run's rounds: its energy per kind over all rounds."""
    plan = plan_capacity(scenario, search="none", rounds=ROUNDS)
    figures = plan["scenario"]
    kinds = {k: v * ROUNDS for k, v in figures["energy_per_round_by_kind_j"].items()}
    kinds["energy_total_j"] = figures["energy_per_round_j"] * ROUNDS
    return plan, kinds


def check_system_paths(scenario, tmp_path: Path) -> dict:
    """The SimPy engine's summary; the numpy engine and capacity agree with it per kind,
    or (what the numpy engine does not model) refuse and fall back, saying why."""
    _, reference = run_system(scenario, tmp_path / "simpy", engine="simpy", clients_csv=False)
    parts = sum(reference[k] for k in ENERGY_FIELDS)
    assert reference["energy_total_j"] == pytest.approx(parts, rel=1e-12)
    reasons = unmodelled(scenario)
    plan, capacity = capacity_kinds(scenario)
    assert {f["engine"] for f in plan["evaluations"]} == {"simpy" if reasons else "numpy"}
    if reasons:
        field = reasons[0].split("=")[0].split(" ")[0]
        with pytest.raises(FedjouleError, match="numpy system engine does not support"):
            run_system(scenario, tmp_path / "numpy", engine="numpy")
        assert not (tmp_path / "numpy").exists()  # refused before its folder
        engine, notices = choose_engine(scenario, "auto")
        assert engine == "simpy" and any(field in n and "falling back" in n for n in notices)
        assert plan["engine"] == "simpy" and field in plan["engine_notice"]
        assert_kinds(reference, capacity, "capacity on the SimPy engine")
        return reference
    _, numpy = run_system(scenario, tmp_path / "numpy", engine="numpy", clients_csv=False)
    assert plan["engine"] == "numpy" and plan["engine_notice"] is None
    assert_kinds(numpy, capacity, "capacity on the numpy engine")  # the same engine
    if scenario.availability.kind == "markov":  # documented: same law, other draws
        _, notices = choose_engine(scenario, "numpy")
        assert any("availability.kind=markov" in n for n in notices)
    else:
        assert_kinds(reference, numpy, "numpy engine")
    return reference


def learning_kinds(scenario) -> dict:
    sim = Simulation(build_world(scenario, device="cpu"))
    sim.run(ROUNDS, lambda row: None)
    return sim.summary()


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_has_one_energy_answer(profile, tmp_path):
    """Each profile alone (its radio model: promotion, tail, idle, throughput-dependent
    power) through every path; tails run across rounds and past the last one."""
    scenario = with_profiles(profile)
    reference = check_system_paths(scenario, tmp_path)
    assert not unmodelled(scenario)  # the numpy engine runs every built-in profile
    assert reference["energy_radio_tail_j"] > 0 and reference["energy_end_of_run_tail_j"] > 0
    assert_kinds(reference, learning_kinds(scenario), "learning run")


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_scenario_has_one_energy_answer(name, tmp_path):
    scenario = small(name)
    reference = check_system_paths(scenario, tmp_path)
    if scenario.dataset.name == "synthetic":  # a learning run where it is cheap
        assert_kinds(reference, learning_kinds(scenario), "learning run")


def test_every_profile_together_replays_and_charges_the_last_tails(tmp_path):
    """All profiles in one run, the tails still running at its end charged to its last
    row: the learning run's folder, plan's replay of its selections (planning/replay.py),
    the SimPy and numpy paths and capacity agree per kind; plan's total is its kinds'."""
    scenario = with_profiles(
        *PROFILES,
        extra=["energy.end_of_run_tail=charge", "output.events=true", "round.interval_s=2"],
    )
    _, learned = run_scenario(scenario, tmp_path / "learn", device="cpu")
    system = scenario.model_copy(
        update={"output": scenario.output.model_copy(update={"events": False})}
    )
    reference = check_system_paths(system, tmp_path / "system")
    assert_kinds(reference, learned, "learning run")
    assert learned["energy_end_of_run_tail_j"] == 0 < learned["end_of_run_tail_energy_j"]
    priced = reprice(scenario, tmp_path / "learn", ROUNDS)
    assert priced.violations == []
    assert priced.energy_total_j == learned["energy_total_j"]
    assert priced.energy_total_j == pytest.approx(sum(priced.energy_j.values()), rel=1e-12)
    assert_kinds(learned, {**priced.energy_j, "energy_end_of_run_tail_j": 0.0}, "replay")


def test_a_battery_stop_with_radio_states_goes_to_the_simpy_engine(tmp_path):
    """A client with radio states that could reach its battery threshold: the numpy engine
    refuses the round (it does not place that stop), run --no-train (auto) starts over on
    the SimPy engine and says so, capacity plays the candidate there and says so; the
    energy per kind is the SimPy engine's."""
    low = "battery_j: 0.4, initial_charge_min: 0.5, initial_charge_max: 0.6"
    scenario = small(
        "default",
        f"population.device_classes=[{{profile: phone-lte-midrange, share: 1.0, {low}}}]",
    )
    with pytest.raises(FedjouleError, match="battery threshold.*use --engine simpy or auto"):
        run_system(scenario, tmp_path / "numpy", engine="numpy", clients_csv=False)
    assert not (tmp_path / "numpy").exists()  # refused: no folder left
    _, reference = run_system(scenario, tmp_path / "simpy", engine="simpy", clients_csv=False)
    assert reference["dropped_battery"] > 0
    told = []
    _, auto = run_system(scenario, tmp_path / "auto", on_start=lambda w, e, n: told.append((e, n)))
    assert auto["engine"] == "simpy" and told[0] == ("numpy", [])
    assert told[1][0] == "simpy" and "starting over on the SimPy engine" in told[1][1][0]
    assert_kinds(reference, auto, "run --no-train, auto")
    rows = (tmp_path / "auto" / "rounds.csv").read_text().splitlines()
    assert len(rows) == 1 + ROUNDS  # the numpy rows were dropped
    plan, capacity = capacity_kinds(scenario)
    assert plan["engine"] == "numpy+simpy" and "battery threshold" in plan["engine_notice"]
    assert_kinds(reference, capacity, "capacity")


def test_capacity_says_which_engine_played(tmp_path):
    """The command prints the notice for what the numpy engine does not model (link
    traces) and capacity.json names the engine; its energy per round is run --no-train's
    energy over its rounds, measured radios on the numpy engine too."""
    sets = ["--set", f"population.size={SIZE}", "--set", f"training.clients_per_round={SIZE}"]
    sets += ["--set", f"training.rounds={ROUNDS}"]
    for name, engine in (("walking-trace-links", "simpy"), ("fashion-drdm-rpi4", "numpy")):
        out = tmp_path / name
        args = ["capacity", name, "--search", "none", "--rounds", str(ROUNDS), *sets]
        result = CliRunner().invoke(app, [*args, "--out", str(out)])
        assert result.exit_code == 0, (result.output, result.exception)
        text = " ".join(result.output.split())
        plan = json.loads((out / "capacity.json").read_text())
        assert plan["engine"] == engine
        if engine == "simpy":
            assert "notice: the candidates play on the SimPy engine without training" in text
            assert "channel.trace" in text
        else:
            assert "notice:" not in text and plan["engine_notice"] is None
        scenario = load_scenario(name, [s for s in sets if s != "--set"])
        variant = scenario.model_copy(
            update={"round": scenario.round.model_copy(update={"deadline_s": None})}
        )
        _, summary = run_system(variant, tmp_path / f"{name}-run", clients_csv=False)
        per_round = plan["scenario"]["energy_per_round_j"]
        assert per_round * ROUNDS == pytest.approx(summary["energy_total_j"], rel=1e-9)


def test_capacity_figures_are_the_same_on_both_engines():
    """Radio states, a scenario's m below its population and more rounds than its own
    training.rounds: capacity's figures per candidate on the numpy engine equal the SimPy
    engine's (the candidate's run ends after its rounds: the tails still running then
    follow energy.end_of_run_tail on both)."""
    scenario = small(
        "default",
        "population.device_classes=[{profile: phone-lte-lowend, share: 0.6}, "
        "{profile: rpi4-wifi, share: 0.4}]",
        "training.clients_per_round=5",
        "training.rounds=2",
    )
    world = build_system_world(scenario)
    for m, own_rounds in ((2, 7), (6, 7), (6, 2)):  # 2: rounds past the run's end
        candidate = variant(scenario, m)
        candidate = candidate.model_copy(
            update={"training": candidate.training.model_copy(update={"rounds": own_rounds})}
        )
        a = evaluate_on(CommonDrawsEngine, world, candidate, 7, 0.9)
        b = evaluate_on(SimpyCommonDraws, world, candidate, 7, 0.9)
        assert (a.pop("engine"), b.pop("engine")) == ("numpy", "simpy")
        assert a["energy_per_round_by_kind_j"]["energy_radio_tail_j"] > 0
        for key, value in a.items():
            if isinstance(value, float):
                assert b[key] == pytest.approx(value, rel=1e-9), key
            elif isinstance(value, dict):
                assert_nested(value, b[key], key)
    # capacity plays a candidate's rounds as its whole run (the tails after them follow
    # energy.end_of_run_tail): its figures are the SimPy engine's over those rounds
    plan = plan_capacity(scenario, world, search="none", rounds=7, quantile=0.9)
    candidate = variant(scenario, 5)
    candidate = candidate.model_copy(
        update={"training": candidate.training.model_copy(update={"rounds": 7})}
    )
    b = evaluate_on(SimpyCommonDraws, world, candidate, 7, 0.9)
    assert plan["scenario"]["energy_per_round_j"] == pytest.approx(
        b["energy_per_round_j"], rel=1e-9
    )
    assert plan["scenario"]["energy_per_round_by_kind_j"]["energy_end_of_run_tail_j"] > 0


def assert_nested(a: dict, b: dict, where: str) -> None:
    for key, value in a.items():
        if isinstance(value, dict):
            assert_nested(value, b[key], f"{where}.{key}")
        elif value is not None:
            assert b[key] == pytest.approx(value, rel=1e-9), f"{where}.{key}"
