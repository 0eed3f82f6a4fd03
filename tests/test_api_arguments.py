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
