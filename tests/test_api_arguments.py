"""The Python API is as strict as the command line (issue 21): a fuzz of the arguments of
run, sweep, plan, capacity and load_scenario (derandomised, so `make test` sees the same
examples every time). With one argument out of its range or of the wrong type, the call
raises a FedjouleError that is also a ValueError or TypeError and names the argument, and
no output folder is left behind."""

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedjoule
import fedjoule.api
from fedjoule.arguments import (
    MAX_ROUNDS,
    MAX_SEED,
    ArgumentError,
    ArgumentTypeError,
    seeds,
    seeds_text,
)
from fedjoule.errors import FedjouleError

FUZZ = settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
TINY = {
    "training.rounds": 1,
    "population.size": 10,
    "training.clients_per_round": 2,
    "round.min_clients": 1,
}

junk = st.one_of(
    st.text(max_size=3),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.just(math.nan),
    st.just(math.inf),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
bad_count = st.one_of(st.integers(max_value=0), st.integers(min_value=5000), junk)
bad_rounds = st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_ROUNDS + 1), junk)
bad_positive = st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf), junk)
bad_seeds = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=1001),
    st.lists(st.integers(max_value=-1), min_size=1, max_size=3),
    st.lists(st.integers(min_value=MAX_SEED + 1), min_size=1, max_size=2),
    st.integers(0, 5).map(lambda s: [s, s]),
    st.lists(st.floats(), min_size=1, max_size=2),
    st.just([]),
    st.booleans(),
    st.text(max_size=3),
)

RUN = {
    "threads": bad_count,
    "state_memory_mb": st.one_of(st.floats(max_value=-1e-9), st.just(math.nan), junk),
    "executor": st.text(max_size=5),
    "device": st.text(max_size=5),
    "resume": st.one_of(st.integers(), st.text(max_size=2)),
    "quiet": st.one_of(st.integers(), st.text(max_size=2)),
    "overrides": st.one_of(st.lists(st.text(max_size=2), max_size=2), st.integers()),
    "on_round": st.one_of(st.integers(), st.text(max_size=2)),
}
SWEEP = {
    "workers": bad_count,
    "threads_per_run": st.one_of(st.none(), bad_count),
    "backend": st.text(max_size=5),
    "device": st.text(max_size=5),
    "axes": st.one_of(st.none(), st.lists(st.integers(), max_size=2), st.integers()),
    "pareto_to_target": st.one_of(st.integers(), st.text(max_size=2)),
}
PLAN = {
    "seeds": bad_seeds,
    "max_rounds": bad_rounds,
    "workers": bad_count,
    "per_cell": st.one_of(st.integers(), st.text(max_size=2)),
}
CAPACITY = {
    "seeds": bad_seeds,
    "deadline_s": bad_positive,
    "energy_budget_j": bad_positive,
    "rounds": bad_rounds,
    "quantile": st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0001), junk),
}


def refused(call, out: Path) -> FedjouleError:
    with pytest.raises(FedjouleError) as caught:
        call()
    error = caught.value
    assert isinstance(error, ValueError | TypeError), repr(error)
    assert not out.exists(), f"{out} left behind by {error}"
    return error


@FUZZ
@given(data=st.data())
def test_run_refuses_every_bad_argument_before_making_its_folder(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(RUN)))
    value = data.draw(RUN[name])
    if name == "executor" and value in ("vectorised", "vmap", "compiled", "sequential"):
        return
    if name == "device" and value in ("auto", "cpu", "cuda"):
        return
    if name == "overrides" and value == []:
        return
    out = tmp_path_factory.mktemp("run") / "out"
    kwargs = {"overrides": TINY, name: value}
    error = refused(lambda: fedjoule.run("default-theory", out, **kwargs), out)
    assert name in str(error)


@FUZZ
@given(data=st.data())
def test_sweep_refuses_every_bad_argument_before_making_its_folder(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(SWEEP)))
    value = data.draw(SWEEP[name])
    if (name, value) in (("backend", "local"), ("backend", "ray")):
        return
    if name == "device" and value in ("auto", "cpu", "cuda"):
        return
    out = tmp_path_factory.mktemp("sweep") / "out"
    kwargs = {"axes": {"seed": [0]}, "overrides": TINY, name: value}
    axes = kwargs.pop("axes")
    error = refused(lambda: fedjoule.sweep("default-theory", axes, out, **kwargs), out)
    assert name in str(error)


@FUZZ
@given(data=st.data())
def test_plan_refuses_every_bad_argument_before_making_its_folder(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(PLAN)))
    value = data.draw(PLAN[name])
    out = tmp_path_factory.mktemp("plan") / "out"
    kwargs = {"overrides": {**TINY, "training.target_value": 0.5}, name: value}
    error = refused(lambda: fedjoule.plan("default-theory", out, k=[1], **kwargs), out)
    assert name in str(error)


@FUZZ
@given(data=st.data())
def test_capacity_refuses_every_bad_argument_before_making_its_folder(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(CAPACITY)))
    value = data.draw(CAPACITY[name])
    out = tmp_path_factory.mktemp("capacity") / "out"
    kwargs = {"overrides": TINY, name: value}
    error = refused(lambda: fedjoule.capacity("default-theory", out, **kwargs), out)
    assert name in str(error)


@pytest.mark.parametrize("bad", [None, 1, [], "", b"default-theory", 1.5])
def test_load_scenario_refuses_what_is_not_a_name_or_path(bad):
    with pytest.raises((ArgumentError, ArgumentTypeError)) as caught:
        fedjoule.load_scenario(bad)
    assert "name_or_path" in str(caught.value)
    with pytest.raises(ArgumentTypeError, match="overrides"):
        fedjoule.load_scenario("default-theory", overrides=["training.rounds=1"])


def test_seeds_are_the_same_rule_on_the_command_line_and_in_python():
    assert seeds("seeds", 3) == [0, 1, 2] == seeds_text("3")
    assert seeds("seeds", [7, 3]) == [7, 3] == seeds_text("7,3")
    assert seeds("seeds", [MAX_SEED]) == seeds_text(str(MAX_SEED) + ",0")[:1]
    for bad in ("0", "1,1", "-1,2", f"0,{MAX_SEED + 1}", "1001", "a,b"):
        with pytest.raises(ArgumentError):
            seeds_text(bad)
    for bad in ([1, 1], [-1], [MAX_SEED + 1], 0, 1001, []):
        with pytest.raises(ArgumentError):
            seeds("seeds", bad)
    for bad in ([1.7, 2], [math.nan], True, "3", [True]):
        with pytest.raises(ArgumentTypeError):
            seeds("seeds", bad)


# One hostile value per argument of every public function (issue 26): huge whole numbers,
# non-finite floats, objects that are not data, iterables too long to materialise. Each
# must be refused at once with one line naming the argument, before any folder is made.
HUGE = 10**400  # beyond a float: float(HUGE) raises OverflowError
ENDLESS = range(10**15)  # len() says it is too long; iterating it would take years
PLUGINS = {"allow_module_plugins": 5, "allow_plugin_paths": ENDLESS}
COMMON = {
    "out": "",
    "overrides": {"training.rounds": object()},
    "quiet": "yes",
    **PLUGINS,
}
MANY = {
    "backend": "slurm",
    "address": 5,
    "workers": HUGE,
    "threads_per_run": HUGE,
    "device": "gpu",
    "data_dir": 5,
    "seeds": ENDLESS,
    "plot_style": 5,
    "track": "nope",
}
RESULTS = ("RunResult", "SweepResult", "PlanResult", "CapacityResult")
HOSTILE = {
    "load_scenario": {"name_or_path": b"default", "overrides": {"seed": [object()]}, **PLUGINS},
    "run": {
        **COMMON,
        "scenario": 3,
        "on_round": 5,
        "data_dir": 5,
        "device": "gpu",
        "executor": "fast",
        "resume": 1,
        "threads": HUGE,
        "state_memory_mb": HUGE,
        "plot_style": 5,
        "track": "nope",
    },
    "sweep": {
        **COMMON,
        **MANY,
        "scenario": 3,
        "axes": {"seed": ENDLESS},
        "grid": 5,
        "pareto_accuracy": "best",
        "pareto_to_target": "yes",
        "ci": "z",
    },
    "plan": {
        **COMMON,
        **MANY,
        "scenario": 3,
        "k": ENDLESS,
        "snr_db": [math.nan],
        "bandwidth_hz": [HUGE],
        "max_rounds": HUGE,
        "cells": [(0,)],
        "per_cell": "yes",
    },
    "capacity": {
        **COMMON,
        "scenario": 3,
        "search": "fastest",
        "deadline_s": HUGE,
        "energy_budget_j": -HUGE,
        "rounds": HUGE,
        "quantile": math.nan,
        "over": "days",
        "seeds": ENDLESS,
    },
}
HOSTILE |= {
    "cell_value": {"text": 5, "column": 5},
    "read_table": {"path": 5},
    "value_text": {"value": object(), "where": 5},
    **{f"{kind}.from_folder": {"folder": 5} for kind in RESULTS},
}
CASES = [(f, name, value) for f, table in HOSTILE.items() for name, value in table.items()]


def public(function: str):
    """fedjoule.api's function (or a result's classmethod, "RunResult.from_folder")."""
    found = fedjoule.api
    for part in function.split("."):
        found = getattr(found, part)
    return found


def test_the_table_names_every_argument_of_every_public_function():
    import inspect

    functions = {n for n in fedjoule.api.__all__ if inspect.isfunction(getattr(fedjoule.api, n))}
    assert functions | {f"{kind}.from_folder" for kind in RESULTS} == set(HOSTILE)
    for function, table in HOSTILE.items():
        assert set(inspect.signature(public(function)).parameters) == set(table)


@pytest.mark.parametrize(
    ("function", "name", "value"), CASES, ids=[f"{f}-{n}" for f, n, _ in CASES]
)
def test_one_hostile_value_per_argument(tmp_path, function, name, value):
    out = tmp_path / "out"
    call = public(function)
    if function in ("run", "sweep", "plan", "capacity"):
        kwargs = {"scenario": "default", "out": out, "overrides": TINY, name: value}
        if function == "sweep" and name not in ("axes", "grid"):
            kwargs["axes"] = {"seed": [0]}
    else:
        kwargs = {**{"cell_value": {"text": "1"}, "value_text": {"value": 1}}.get(function, {})}
        kwargs[name] = value
    error = refused(lambda: call(**kwargs), out)
    message = str(error)
    assert message.startswith(name) or f" {name}=" in message, message
    assert "\n" not in message and len(message) < 300, message


HUGE_TEXT = "9" * 30


@pytest.mark.parametrize(
    "args",
    [
        ["run", "default", "--threads", HUGE_TEXT],
        ["run", "default", "--state-memory-mb", "1e400"],
        ["run", "default", "--state-memory-mb", "nan"],
        ["capacity", "default", "--rounds", HUGE_TEXT],
        ["plan", "default", "--max-rounds", HUGE_TEXT],
        ["sweep", "default", "--grid", "seed=0", "--workers", HUGE_TEXT],
        ["sweep", "default", "--grid", "seed=0", "--threads-per-run", HUGE_TEXT],
    ],
    ids=lambda args: f"{args[0]}{args[-2]}",
)
def test_the_command_line_has_the_same_bounds(tmp_path, capsys, args):
    """The options the API bounds by arguments.MAX_* are bounded alike on the command line
    (a huge --threads was an internal error, a huge capacity --rounds a hang)."""
    from fedjoule.cli import invoke

    code = invoke([*args, "--out", str(tmp_path / "out")])
    first = capsys.readouterr().err.splitlines()[0]
    assert code == 2 and first.startswith("error: ") and args[-2] in first, first
    assert not (tmp_path / "out").exists()


def test_a_sweep_result_names_its_runs(tmp_path):
    runs = [{"name": f"seed={i}", "folder": f"runs/seed={i}", "status": "ran"} for i in range(7)]
    result = fedjoule.api.SweepResult(tmp_path, [], {"runs": runs})
    with pytest.raises(ArgumentError) as caught:
        result.run("seed=9")
    assert str(caught.value) == (
        f"name='seed=9': not a run of {tmp_path}; its runs: seed=0, seed=1, seed=2, seed=3, "
        "seed=4, ..."
    )


def test_a_grid_of_too_many_points_is_refused_before_they_are_listed(tmp_path, capsys):
    from fedjoule.cli import invoke

    out = tmp_path / "out"
    axes = {"seed": range(1000), "training.local_steps": range(1, 1001)}
    error = refused(lambda: fedjoule.sweep("default", axes, out), out)
    assert str(error) == (
        "axes: 1,000,000 points (1,000 seed x 1,000 training.local_steps); expected at most 100,000"
    )
    axes = {"training.rounds": range(1, 202)}
    error = refused(lambda: fedjoule.sweep("default", axes, out, seeds=500), out)
    assert str(error).startswith("axes: 100,500 points (201 training.rounds x 500 seeds)")
    error = refused(lambda: fedjoule.plan("default", out, k=range(1, 1001), snr_db=range(101)), out)
    assert str(error).startswith("k, snr_db, bandwidth_hz: 303,000 points (1,000 k x 101 snr_db")
    seeds, steps = ",".join(map(str, range(1000))), ",".join(map(str, range(1, 1001)))
    code = invoke(["sweep", "default", "--grid", f"seed={seeds}", "--grid",
                   f"training.local_steps={steps}", "--out", str(out)])  # fmt: skip
    assert code == 2 and "error: --grid: 1,000,000 points" in capsys.readouterr().err
    assert not out.exists()


leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4),
    st.binary(max_size=2), st.just(object()), st.just(10**400), st.just(math.inf),
    st.frozensets(st.integers(), max_size=2),
)  # fmt: skip
data_like = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.tuples(st.integers())), inner, max_size=2
        ),
    ),
    max_leaves=8,
)


@FUZZ
@given(value=data_like)
def test_an_override_value_is_written_or_refused_by_name(value):
    """Whatever an override's value is, value_text returns its text or raises a
    FedjouleError naming the override, never another exception."""
    from fedjoule.api import value_text

    try:
        value_text(value, "overrides['x']")
    except FedjouleError as error:
        assert str(error).startswith("overrides['x']") and "\n" not in str(error)
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ArgumentError, match="nested more than 20 deep"):
        value_text(deep, "overrides['x']")
