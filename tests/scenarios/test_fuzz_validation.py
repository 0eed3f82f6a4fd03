"""Property-based fuzzing of scenario validation: whatever the document, loading it gives
a Scenario or a FedjouleError (never another exception), within a time bound, with a
message of fewer than 100 lines.

The quick tests run a few hundred examples each; `make test-slow` runs thousands
(benchmarks/fuzz_validation.py runs a fixed set of 3,000+ files and reports figures)."""

import copy
import math
import tempfile
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import builtin_names, builtin_text, load_scenario
from fedjoule.scenarios.schema import Scenario
from fedjoule.scenarios.schema.policy import PARAMETERS, SELECT
from tests.scenarios.documents import delete_path, leaves, set_path

# a hang guard per test (hundreds of hostile files, each answered in milliseconds)
pytestmark = pytest.mark.timeout(900)
MAX_LINES = 100

BASES = {name: yaml.safe_load(builtin_text(name)) for name in builtin_names()}

HOSTILE = [
    math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 10**30, 2**63, -1, 0, 0.5,
    True, False, None, "abc", "", "1e6", [], [1, 2], [[1.0]], {}, {"a": 1}, [[[[1]]]],
]  # fmt: skip

HOSTILE_TEXT = [
    "!!int abc", "!!bool maybe", "!!float x", "!!python/object/apply:os.system ['ls']",
    "*undefined", "&a [*a]", "!!binary '%%%'", "9" * 4400, ".nan", ".inf", "-.inf",
    "[" * 300, "{a: 1, a: 2}", "!!timestamp x", "59:" * 500 + "1", "'", '"open', "!x 1",
    "!!set {a}", "!!omap [a: 1]", "1e400", "{<<: {x: 1}}", "!!map [1]", "? [a]",
]  # fmt: skip


def _field_paths() -> list[tuple]:
    """Every value field's path (list sections at index 0), algorithm options included."""
    out = []

    def walk(model: type[BaseModel], prefix: tuple) -> None:
        for name, info in model.model_fields.items():
            if model is Scenario and name == "algorithm":
                continue
            ann = info.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, (*prefix, name))
                continue
            item = typing.get_args(ann)[0] if typing.get_origin(ann) is list else None
            if isinstance(item, type) and issubclass(item, BaseModel):
                walk(item, (*prefix, name, 0))
                continue
            out.append((*prefix, name))

    walk(Scenario, ())
    for _, config in ALGORITHMS.values():
        out += [("algorithm", name) for name in config.model_fields if name != "name"]
    return out


FIELDS = _field_paths()

scalars = st.one_of(
    # a copy: the lists and mappings of HOSTILE must not be shared by the documents that
    # later mutations write into (a shared one could end up inside itself)
    st.sampled_from(HOSTILE).map(copy.deepcopy),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated_builtin(draw) -> str | bytes:
    """A built-in scenario with 1-3 changes, then maybe text-level damage."""
    raw = copy.deepcopy(BASES[draw(st.sampled_from(sorted(BASES)))])
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["leaf", "field", "delete", "unknown", "algorithm"]))
        existing = list(leaves(raw))
        paths = [p for p, _ in existing]
        if op == "leaf" and paths:
            set_path(raw, draw(st.sampled_from(paths)), draw(values))
        elif op == "field":
            set_path(raw, draw(st.sampled_from(FIELDS)), draw(values))
        elif op == "delete" and paths:
            delete_path(raw, draw(st.sampled_from(paths)))
        elif op == "unknown":
            sections = [raw] + [v for _, v in existing if isinstance(v, dict)]
            draw(st.sampled_from(sections))[draw(st.text(min_size=1, max_size=8))] = draw(scalars)
        elif op == "algorithm":
            raw["algorithm"] = {"name": draw(st.sampled_from(sorted(ALGORITHMS)))}
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    return draw(damaged(text))


@st.composite
def damaged(draw, text: str) -> str | bytes:
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if ":" in line]
    op = draw(st.sampled_from(["none", "none", "dup", "tagged", "cut", "bytes"]))
    if op == "dup" and keyed:
        i = draw(st.sampled_from(keyed))
        lines.insert(i, lines[i])
    elif op == "tagged" and keyed:
        i = draw(st.sampled_from(keyed))
        lines[i] = lines[i].split(":", 1)[0] + ": " + draw(st.sampled_from(HOSTILE_TEXT)) + "\n"
    elif op == "cut":
        return text[: draw(st.integers(0, len(text)))]
    elif op == "bytes":
        data = text.encode()
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return "".join(lines)


section_names = st.sampled_from(
    ["training", "population", "channel", "round", "topology", "dataset", "model", "output",
     "availability", "algorithm", "seed", "name", "x", ""]
)  # fmt: skip


@st.composite
def from_scratch(draw) -> str | bytes:
    """A document written from scratch: schema fields and random keys, random values."""
    doc: dict = {}
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            set_path(doc, draw(st.sampled_from(FIELDS)), draw(values))
        else:
            doc[draw(section_names)] = draw(values)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return draw(st.one_of(damaged(text), st.binary(max_size=200), st.sampled_from(HOSTILE_TEXT)))


def check(content: str | bytes) -> None:
    """Loading `content` gives a Scenario or a short FedjouleError, within the bound."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        try:
            scenario = load_scenario(path)
        except FedjouleError as err:
            message = str(err)
            assert message.count("\n") + 1 < MAX_LINES, message[:2000]
            assert len(message) < 60_000
        else:
            assert isinstance(scenario, Scenario)


FAST = settings(  # the same examples every run: `make test` does not flake
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(
    max_examples=3_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FAST
@given(mutated_builtin())
def test_mutated_builtins_load_or_fail_cleanly(content):
    check(content)


@FAST
@given(from_scratch())
def test_documents_from_scratch_load_or_fail_cleanly(content):
    check(content)


@pytest.mark.slow
@SLOW
@given(mutated_builtin())
def test_mutated_builtins_load_or_fail_cleanly_long(content):
    check(content)


@pytest.mark.slow
@SLOW
@given(from_scratch())
def test_documents_from_scratch_load_or_fail_cleanly_long(content):
    check(content)


# a policy section (issue 29) over a small world: each field's allowed values (edges
# included), and the values it refuses
POLICY_VALUES = {
    "select": (SELECT, ["bogus", 3, None]),
    "bandwidth": (["equal", "equal-finish", "min-energy"], ["none"]),
    "frequency": (["fixed", "deadline"], [[]]),
    "steps": (["fixed", "deadline"], [{}]),
    "csi": (["none", "last", "oracle"], [1]),
    "max_steps": ([None, 1, 3, 100_000], [0, math.nan, math.inf, 1e300, "x"]),
    "choice_d": ([None, 1, 2, 10_000_000], [-1, 2.5]),
    "oort_alpha": ([0.0, 2.0, 100.0], [-1.0, math.nan, math.inf]),
    "oort_round_time_s": ([None, 1e-9, 0.01, 1e9], [0.0, -math.inf]),
    "battery_weighted": ([False, True], ["maybe"]),
}
WORLDS = [
    {},
    {"round": {"deadline_s": 0.01}, "channel": {"fading": "rayleigh"}},
    {"round": {"deadline_s": 1e-6}, "channel": {"path_loss": "macro-3gpp"}},
    {"round": {"deadline_s": 5.0}, "population": {"device_classes": [
        {"name": "phone", "battery_j": 0.05, "initial_charge_min": 0.3}]}},
]  # fmt: skip


@st.composite
def policy_document(draw) -> dict:
    """A small system world with a policy of 0-5 drawn fields (or a hostile section)."""
    doc = {"training": {"rounds": 3, "clients_per_round": 3}, "population": {"size": 9}}
    for name, section in draw(st.sampled_from(WORLDS)).items():
        doc[name] = {**doc.get(name, {}), **copy.deepcopy(section)}
    if draw(st.integers(0, 9)) == 0:
        doc["policy"] = draw(scalars)
        return doc
    names = draw(st.lists(st.sampled_from(sorted(POLICY_VALUES)), max_size=5, unique=True))
    policy = {}
    for name in ["select", *names]:
        allowed, refused = POLICY_VALUES[name]
        values = refused if draw(st.integers(0, 7)) == 0 else allowed
        policy[name] = draw(st.sampled_from(values))
    for name, selector in PARAMETERS:  # mostly a parameter of the drawn selector only
        if name in policy and policy["select"] != selector and draw(st.integers(0, 7)):
            del policy[name]
    doc["policy"] = policy
    return doc


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(policy_document())
def test_policy_sections_validate_and_run_or_fail_cleanly(doc):
    """A policy loads or is refused (FedjouleError), and a loaded one plays 3 rounds on
    both system engines or is refused: never another exception."""
    from fedjoule.simulator.system import SystemEngine
    from fedjoule.simulator.system_simpy import SimpySystemSimulation
    from fedjoule.simulator.system_world import build_system_world

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.yaml"
        path.write_text(yaml.safe_dump(doc))
        try:
            scenario = load_scenario(path)
        except FedjouleError as err:
            assert str(err).count("\n") + 1 < MAX_LINES
            return
    world = build_system_world(scenario)
    for engine in (SystemEngine, SimpySystemSimulation):
        try:
            engine(world).run(3, lambda row: None)
        except FedjouleError as err:
            assert "\n" not in str(err).strip(), str(err)
