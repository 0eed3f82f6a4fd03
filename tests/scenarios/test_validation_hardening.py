"""Scenario validation against hostile and sloppy input: every problem is one clean
FedjouleError, quickly, naming the field; values are strict and bounded; all problems of a
file come in one pass; plausibility warnings catch unit slips."""

import math
import typing

import annotated_types as at
import pytest
from pydantic import BaseModel, ValidationError

from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.devices.availability import TraceReplay
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import (
    MAX_FILE_BYTES,
    apply_overrides,
    builtin_names,
    load_scenario,
    read_source,
    validate,
)
from fedjoule.scenarios.plausibility import plausibility_warnings
from fedjoule.scenarios.schema import Scenario

# a hang guard: every answer, however hostile the input, comes in well under a second
pytestmark = pytest.mark.timeout(120)
MAX_MESSAGE_LINES = 100


def load_bytes(tmp_path, data: bytes, name: str = "s.yaml"):
    path = tmp_path / name
    path.write_bytes(data)
    return load_scenario(path)


def failure(tmp_path, data: bytes) -> str:
    """The message of loading `data` as a scenario file, checked to be short (and fast:
    the module's hang guard)."""
    with pytest.raises(FedjouleError) as err:
        load_bytes(tmp_path, data)
    text = str(err.value)
    assert text.count("\n") + 1 < MAX_MESSAGE_LINES
    assert all(len(line) <= 800 for line in text.splitlines())
    return text


def billion_laughs(levels: int = 9) -> bytes:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


HOSTILE = {
    "not UTF-8": (b"name: caf\xe9\ntraining:\n  rounds: 5\n", ["not UTF-8", "line 1"]),
    "binary": (bytes(range(256)) * 40, ["not UTF-8"]),
    "NUL byte": (b"name: a\x00b\n", ["not valid YAML"]),
    "nesting 500": (b"a: " + b"[" * 500 + b"]" * 500 + b"\n", ["nested more than", "line 1"]),
    "nesting 100,000": (b"[" * 100_000 + b"]" * 100_000, ["nested more than"]),
    "block nesting 400": (
        "".join(" " * i + "k:\n" for i in range(400)).encode(),
        ["nested more than"],
    ),
    "!!int abc": (b"training:\n  rounds: !!int abc\n", ["training.rounds", "line 2", "!!int"]),
    "!!bool maybe": (b"output:\n  events: !!bool maybe\n", ["output.events", "!!bool"]),
    "!!float x": (b"training:\n  lr: !!float x\n", ["training.lr"]),
    "!!timestamp": (b"name: !!timestamp yesterday\n", ["'name'"]),
    "!!python/object": (
        b"training: !!python/object/apply:os.system ['echo hi']\n",
        ["not valid YAML", "python/object"],
    ),
    "4,301-digit integer": (
        b"population:\n  size: " + b"7" * 4301 + b"\n",
        ["population.size", "too long"],
    ),
    "sexagesimal bomb": (b"seed: " + b"59:" * 3000 + b"1\n", ["'seed'", "too long"]),
    "alias bomb": (billion_laughs(), ["values", "alias"]),
    "recursive alias": (b"training: &t\n  x: *t\n", ["refers to itself"]),
    "undefined alias": (b"training: *nope\n", ["undefined alias"]),
    "10 MB scalar": (b"name: " + b"x" * 10_000_000 + b"\n", ["larger than"]),
    "200,000 unknown keys": (
        "".join(f"key{i}: {i}\n" for i in range(200_000)).encode(),
        ["larger than"],
    ),
    "100,000 values": (b"model: {hidden: [" + b"1," * 100_000 + b"1]}\n", ["25,000 values"]),
    "two documents": (b"seed: 1\n---\nseed: 2\n", ["one document"]),
    "a list": (b"- 1\n- 2\n", ["must be a mapping", "a list of 2"]),
    "a text": (b"hello\n", ["must be a mapping"]),
    "long tag": (b"seed: !" + b"t" * 100_000 + b" 1\n", ["not valid YAML"]),
    "unhashable key": (b"? [a, b]\n: 1\n", ["unhashable"]),
    "tab indentation": (b"training:\n\trounds: 5\n", ["not valid YAML", "line 2"]),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_file_gives_a_clean_short_error(tmp_path, kind):
    data, expected = HOSTILE[kind]
    text = failure(tmp_path, data)
    for part in expected:
        assert part in text, (part, text)


def test_alias_bomb_inside_a_field_is_not_expanded(tmp_path):
    data = billion_laughs(5) + b"model:\n  hidden: *a3\n"
    text = failure(tmp_path, data)
    assert "model.hidden" in text


def test_folder_and_missing_file(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(FedjouleError, match="is a folder"):
        load_scenario(tmp_path / "d.yaml")
    with pytest.raises(FedjouleError, match="not found"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(FedjouleError, match="no scenario file or built-in"):
        load_scenario("a\x00b")


def test_file_size_is_capped(tmp_path):
    body = b"# " + b"x" * (MAX_FILE_BYTES + 10) + b"\nseed: 1\n"
    assert "larger than" in failure(tmp_path, body)


def test_many_unknown_keys_are_grouped_with_the_allowed_names_once(tmp_path):
    data = "".join(f"k{i}: {i}\n" for i in range(10_000)).encode()
    assert len(data) < MAX_FILE_BYTES
    text = failure(tmp_path, data)
    assert "10000 unknown fields" in text and "'k0'" in text
    assert text.count("allowed here") == 1 and len(text) < 2_000


def test_200000_unknown_keys_validate_quickly():
    raw = {f"k{i}": i for i in range(200_000)}
    raw["training"] = {f"t{i}": i for i in range(1_000)}
    with pytest.raises(FedjouleError) as err:
        validate(raw, "big")
    text = str(err.value)
    assert "top level" in text and "200000 unknown fields" in text
    assert "section 'training'" in text and "1000 unknown fields" in text
    assert text.count("\n") < 5 and len(text) < 3_000


def test_unknown_field_gets_a_suggestion_and_its_line(tmp_path):
    text = failure(tmp_path, b"seed: 1\nchannel:\n  acess: tdma\n")
    assert "channel.acess" in text and "did you mean 'access'" in text and "line 3" in text


# --------------------------------------------------------------------------- values


def _has_float(annotation) -> bool:
    if annotation is float:
        return True
    return any(_has_float(a) for a in typing.get_args(annotation) if not isinstance(a, str))


def _is_int(annotation) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_int(typing.get_args(annotation)[0])
    return annotation is int


def _sample(annotation, value):
    """A value of the field's shape holding `value` at its leaves."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _sample(typing.get_args(annotation)[0], value)
    if origin in (typing.Union, __import__("types").UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        scalar = [a for a in args if typing.get_origin(a) is not list]
        return _sample((scalar or args)[0], value)
    if origin is list:
        inner = _sample(typing.get_args(annotation)[0], value)
        return [inner, inner]
    return value


def scenario_leaves():
    """(path, annotation, algorithm) of every value field, sections and lists expanded."""

    def walk(model: type[BaseModel], prefix: tuple):
        for name, info in model.model_fields.items():
            if model is Scenario and name == "algorithm":
                continue
            ann = info.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                yield from walk(ann, (*prefix, name))
                continue
            item = typing.get_args(ann)[0] if typing.get_origin(ann) is list else None
            if isinstance(item, type) and issubclass(item, BaseModel):
                yield from walk(item, (*prefix, name, 0))
                continue
            yield (*prefix, name), ann, info, None

    yield from walk(Scenario, ())
    for algorithm, (_, config) in ALGORITHMS.items():
        for name, info in config.model_fields.items():
            if name != "name":
                yield ("algorithm", name), info.annotation, info, algorithm


def raw_with(path: tuple, value, algorithm=None) -> dict:
    """A scenario mapping that sets `path` (ints: list indices) to `value`."""
    raw: dict = {"algorithm": {"name": algorithm}} if algorithm else {}
    node = raw
    for part, nxt in zip(path, path[1:], strict=False):
        if isinstance(part, int):
            continue
        if isinstance(nxt, int):
            node = node.setdefault(part, [{}])[0]
        else:
            node = node.setdefault(part, {})
    node[path[-1]] = value
    return raw


FLOAT_LEAVES = [leaf for leaf in scenario_leaves() if _has_float(leaf[1])]
INT_LEAVES = [leaf for leaf in scenario_leaves() if _is_int(leaf[1])]


def _name(path, algorithm) -> str:
    return ".".join(map(str, path)) + (f"[{algorithm}]" if algorithm else "")


def test_the_field_lists_are_complete():
    # enough to know the enumeration walks sections, lists, unions and algorithm configs
    names = {_name(p, a) for p, *_, a in FLOAT_LEAVES}
    assert len(FLOAT_LEAVES) >= 80
    assert {"population.device_classes.0.tx_power_dbm", "topology.backhaul_latency_s"} <= names
    assert {"algorithm.mu[fedprox]", "algorithm.weight_floor[taco]"} <= names
    assert {"topology.bs_positions_m", "training.local_epochs"} <= names
    assert len(INT_LEAVES) >= 20


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_rejected_in_every_float_field(value):
    missed = []
    for path, annotation, _, algorithm in FLOAT_LEAVES:
        name = ".".join(map(str, path))
        try:
            validate(raw_with(path, _sample(annotation, value), algorithm), "t")
        except FedjouleError as err:
            if name not in str(err) or "finite" not in str(err):
                missed.append((name, str(err)))
        else:
            missed.append((_name(path, algorithm), "accepted"))
    assert not missed


def test_nan_and_inf_from_yaml_text(tmp_path):
    text = failure(tmp_path, b"training:\n  lr: .nan\nchannel:\n  snr_db: .inf\n  pl0_db: -.Inf\n")
    assert "3 problems" in text
    for name in ("training.lr", "channel.snr_db", "channel.pl0_db"):
        assert name in text


def test_booleans_are_not_numbers_anywhere():
    missed = []
    for path, annotation, _, algorithm in FLOAT_LEAVES + INT_LEAVES:
        try:
            validate(raw_with(path, _sample(annotation, True), algorithm), "t")
        except FedjouleError as err:
            if ".".join(map(str, path)) not in str(err):
                missed.append((_name(path, algorithm), str(err)))
        else:
            missed.append((_name(path, algorithm), "accepted"))
    assert not missed


def test_rounds_true_is_an_error_and_bool_fields_want_booleans(tmp_path):
    text = failure(tmp_path, b"training:\n  rounds: true\noutput:\n  events: 1\n")
    assert "training.rounds" in text and "not true/false" in text
    assert "output.events" in text


def test_every_count_size_and_text_has_an_upper_bound():
    unbounded = []
    for path, annotation, info, algorithm in scenario_leaves():
        metadata = list(info.metadata)
        origin = typing.get_origin(annotation)
        if origin is list:
            if not any(isinstance(m, at.MaxLen) for m in metadata):
                unbounded.append(_name(path, algorithm))
            inner = typing.get_args(annotation)[0]
            if _is_int(inner):
                inner_meta = typing.get_args(inner)[1:]
                bounds = [m for fi in inner_meta for m in getattr(fi, "metadata", [])]
                if not any(isinstance(m, at.Le | at.Lt) for m in bounds):
                    unbounded.append(_name(path, algorithm) + " items")
        elif _is_int(annotation):
            if not any(isinstance(m, at.Le | at.Lt) for m in metadata):
                unbounded.append(_name(path, algorithm))
        elif annotation is str or annotation == str | None:
            if not any(isinstance(m, at.MaxLen) for m in metadata):
                unbounded.append(_name(path, algorithm))
    assert not unbounded


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("population.size=9223372036854775807", "population.size"),
        ("training.batch_size=1.0e9", "training.batch_size"),
        ("training.batch_size=1e9", "training.batch_size"),
        ("round.overcommit=.inf", "round.overcommit"),
        ("round.overcommit=11", "round.overcommit"),
        ("training.local_epochs=.inf", "training.local_epochs"),
        ("training.local_epochs=1e300", "training.local_epochs"),
        ("model.hidden=[-1]", "model.hidden.0"),
        ("model.hidden=[100000]", "model.hidden.0"),
        ("training.participation_prob=1e-12", "training.participation_prob"),
        ("round.interval_s=1e300", "round.interval_s"),
        ("round.deadline_s=2e9", "round.deadline_s"),
        ("seed=9223372036854775808", "seed"),
        ("seed=-1", "seed"),
        ("channel.max_retx=1000", "channel.max_retx"),
        ("topology.cells=100000", "topology.cells"),
        ("output.timeline_rounds=[-1]", "output.timeline_rounds.0"),
        ("training.rounds=2.5", "training.rounds"),
        ("dataset.synthetic.dim=1e12", "dataset.synthetic.dim"),
        ("availability.mean_on_s=1e-9", "availability.mean_on_s"),
    ],
)
def test_out_of_bounds_values_are_errors(override, field):
    with pytest.raises(FedjouleError) as err:
        load_scenario("default-theory", [override])
    assert f"'{field}'" in str(err.value)


def test_whole_number_floats_are_integers_and_1e6_is_a_float():
    s = load_scenario(
        "default-theory",
        [
            "population.size=1.0e3",
            "seed=9223372036854775807",
            "channel.uplink_bandwidth_hz=1e6",
            "training.lr=5E-2",
        ],
    )
    assert s.population.size == 1000 and isinstance(s.population.size, int)
    assert s.seed == 2**63 - 1
    assert s.channel.uplink_bandwidth_hz == 1e6 and s.training.lr == 0.05
    with pytest.raises(FedjouleError, match="whole number"):
        load_scenario("default-theory", ["population.size=100.5"])


# --------------------------------------------------------------------------- duplicates


def test_duplicate_keys_name_the_key_and_both_lines(tmp_path):
    data = b"seed: 1\ntraining:\n  rounds: 5\n  lr: 0.1\n  rounds: 7\nseed: 2\n"
    text = failure(tmp_path, data)
    assert "'training.rounds' at line 5 (first at line 3)" in text
    assert "'seed' at line 6 (first at line 1)" in text


def test_duplicate_keys_in_flow_style_and_in_lists(tmp_path):
    text = failure(tmp_path, b"population:\n  device_classes:\n    - {name: a, name: b}\n")
    assert "population.device_classes.0.name" in text
    assert "'training.rounds'" in failure(tmp_path, b'training: {rounds: 1, "rounds": 2}\n')


def test_merge_keys_are_not_duplicates():
    raw = apply_overrides({}, ["training={<<: {rounds: 3, lr: 0.2}, rounds: 4}"])
    assert raw["training"] == {"rounds": 4, "lr": 0.2}
    with pytest.raises(FedjouleError, match="(?s)--set 'training=.*duplicate key 'x'"):
        apply_overrides({}, ["training={x: 1, x: 2}"])


# --------------------------------------------------------------------------- one pass


def test_all_problems_of_a_file_come_in_one_pass(tmp_path):
    data = (
        b"training:\n"
        b"  rounds: 0\n"  # field error
        b"  clients_per_round: 500\n"  # cross-field: exceeds population.size
        b"population:\n"
        b"  size: 100\n"
        b"  device_classes:\n"
        b"    - {name: a, share: 1.0, cpu_freq_min_hz: 3.0e9}\n"  # cross-field: min > max
        b"channel:\n"
        b"  min_distance_m: 1000\n"  # cross-field: not below cell_radius_m
        b"  fading: rayleig\n"  # field error
        b"  bogus: 1\n"  # unknown field
    )
    text = failure(tmp_path, data)
    assert "6 problems" in text
    expected = [
        ("training.rounds", "line 2"),
        ("training.clients_per_round", "exceeds population.size (100)"),
        ("population.device_classes.0.cpu_freq_min_hz", "must not exceed cpu_freq_max_hz"),
        ("channel.min_distance_m", "must be below cell_radius_m (500)"),
        ("channel.fading", "'rayleigh'"),
        ("channel.bogus", "allowed here"),
    ]
    lines = text.splitlines()
    for field, detail in expected:
        assert any(field in line and detail in line for line in lines), (field, text)
    # in the order of the file
    order = [next(i for i, line in enumerate(lines) if f) for f, _ in expected[:4]]
    assert order == sorted(order)


def test_cross_field_checks_run_beside_broken_fields(tmp_path):
    # the section with the cross-field problem also has a field error
    text = failure(
        tmp_path,
        b"population:\n  size: 10\n  device_classes:\n"
        b"    - {name: a, share: 0.5, battery_j: .nan}\n    - {name: a, share: 0.2}\n"
        b"training:\n  clients_per_round: 20\n",
    )
    assert "population.device_classes.0.battery_j" in text
    assert "names must be unique" in text and "shares must sum to 1, they sum to 0.7" in text
    assert "training.clients_per_round (20) exceeds population.size (10)" in text
    # a check needing a broken value is skipped, not reported wrongly
    text = failure(tmp_path, b"population:\n  size: -5\ntraining:\n  clients_per_round: 20\n")
    assert "population.size" in text and "exceeds" not in text


def test_model_validate_still_applies_cross_field_checks():
    with pytest.raises(ValidationError, match="min_distance_m must be below cell_radius_m"):
        Scenario.model_validate({"channel": {"min_distance_m": 600}})
    with pytest.raises(ValidationError, match="exceeds population.size"):
        Scenario.model_validate({"population": {"size": 5}})


def test_many_problems_are_capped(tmp_path):
    classes = "".join(
        f"    - {{name: c{i}, share: .nan, battery_j: -1}}\n" for i in range(60)
    ).encode()
    text = failure(tmp_path, b"population:\n  device_classes:\n" + classes)
    assert "... and " in text and text.count("\n") <= 52


# --------------------------------------------------------------------------- --set


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("training.rounds=[", "--set 'training.rounds=[': not valid YAML"),
        ("training.rounds=!!int x", "'training.rounds' (--set)"),
        ("training.rounds=" + "9" * 5000, "too long"),
        ("training..rounds=3", "empty part"),
        ("training.rounds=\udcff", "not valid YAML"),
        ("seed=" + "[" * 1000, "nested more than"),
        ("x=" + "1" * 20_000, "longer than"),
        ("training.rounds", "expected dotted.key=value"),
        ("training.rounds.x=1", "is a value, not a section"),
        ("name={a: 1, a: {b: 1, b: 2}}", "duplicate key 'a.b'"),
    ],
)
def test_bad_overrides_give_clean_errors_naming_the_override(override, expected):
    with pytest.raises(FedjouleError) as err:
        load_scenario("default-theory", [override])
    assert expected in str(err.value) and len(str(err.value)) < 1_000


def test_override_lines_are_marked(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("seed: 1\ntraining:\n  rounds: 3\n  lr: 0.5\n")
    raw, label = read_source(path)
    raw = apply_overrides(raw, ["training.rounds=0"])
    with pytest.raises(FedjouleError) as err:
        validate(raw, label)
    assert "'training.rounds' (--set)" in str(err.value)


# --------------------------------------------------------------------------- trace files


def test_trace_file_errors_do_not_echo_the_file(tmp_path):
    secret = "root:x:0:0:root:/root:/bin/bash" + "s3cr3t" * 50
    (tmp_path / "passwd").write_text(secret + "\nline two\n")
    with pytest.raises(FedjouleError) as err:
        TraceReplay(tmp_path / "passwd", 5)
    assert "client, start_s, end_s" in str(err.value) and "s3cr3t" not in str(err.value)
    (tmp_path / "bin.csv").write_bytes(b"client,start_s,end_s\n" + bytes(range(128, 256)))
    with pytest.raises(FedjouleError, match="not UTF-8"):
        TraceReplay(tmp_path / "bin.csv", 5)
    (tmp_path / "row.csv").write_text("client,start_s,end_s\n0,1," + "9" * 5000 + "x\n")
    with pytest.raises(FedjouleError, match="line 2") as err:
        TraceReplay(tmp_path / "row.csv", 5)
    assert len(str(err.value)) < 300
    (tmp_path / "nan.csv").write_text("client,start_s,end_s\n0,1,nan\n")
    with pytest.raises(FedjouleError, match="finite"):
        TraceReplay(tmp_path / "nan.csv", 5)
    (tmp_path / "big.csv").write_text("client,start_s,end_s\n" + '"' + "x" * 200_000 + '"\n')
    with pytest.raises(FedjouleError, match="line"):
        TraceReplay(tmp_path / "big.csv", 5)


# --------------------------------------------------------------------------- plausibility


@pytest.mark.parametrize("name", builtin_names())
def test_builtins_are_plausible(name):
    assert plausibility_warnings(load_scenario(name)) == []


@pytest.mark.parametrize(
    ("override", "field", "value", "why"),
    [
        ("population.device_classes=[{tx_power_dbm: 200}]", "tx_power_dbm", "200", "23 dBm"),
        ("channel.uplink_bandwidth_hz=5", "channel.uplink_bandwidth_hz", "5", "MHz"),
        ("channel.downlink_bandwidth_hz=20", "channel.downlink_bandwidth_hz", "20", "1 kHz"),
        (
            "population.device_classes=[{cpu_freq_min_hz: 1.0, cpu_freq_max_hz: 2.0}]",
            "cpu_freq_max_hz",
            "2",
            "GHz",
        ),
        ("channel.bs_tx_power_dbm=80", "channel.bs_tx_power_dbm", "80", "43-46 dBm"),
        ("population.device_classes=[{battery_j: 0.5}]", "battery_j", "0.5", "Wh"),
        ("channel.cell_radius_m=0.5", "channel.cell_radius_m", "0.5", "km"),
        ("channel.noise_dbm_per_hz=-100", "channel.noise_dbm_per_hz", "-100", "-174"),
        ("channel.snr_db=100", "channel.snr_db", "100", "linear"),
        ("round.deadline_s=0.0001", "round.deadline_s", "0.0001", "ms"),
        ("population.device_classes=[{battery_j: 15}]", "battery_j", "15", "15 Wh = 54000 J"),
        ("round.deadline_s=30000", "round.deadline_s", "30000", "8.33 h"),
        ("output.timeline_rounds=[500]", "output.timeline_rounds", "[500]", "never drawn"),
    ],
)
def test_unit_slips_give_plausibility_warnings(override, field, value, why):
    overrides = [override]
    if "cell_radius_m" in override:
        overrides.append("channel.min_distance_m=0.1")
    warnings = plausibility_warnings(load_scenario("default-theory", overrides))
    hits = [w for w in warnings if field in w]
    assert len(hits) == 1, warnings
    assert f"= {value}:" in hits[0] and why in hits[0]


def test_rare_participation_is_warned():
    s = load_scenario(
        "default-theory", ["training.participation=bernoulli", "training.participation_prob=1e-4"]
    )
    (warning,) = plausibility_warnings(s)
    assert "training.participation_prob = 0.0001" in warning and "redrawn" in warning


def test_several_cells_need_a_layout_that_has_them():
    """topology.cells with the default single layout was silently one cell: refused,
    naming the field, the value and the layouts that place several cells."""
    with pytest.raises(FedjouleError) as caught:
        load_scenario("default-theory", ["topology.cells=3"])
    message = str(caught.value)
    assert "topology.cells" in message and "cells=3" in message
    assert "hexagonal or grid" in message
    hexagonal = load_scenario("default-theory", ["topology.layout=hexagonal", "topology.cells=3"])
    assert hexagonal.topology.n_cells == 3
