"""Sweep grids: `--grid key=v1,v2` parsing, validation before any run, stable run names.

Algorithm settings are grid values in two forms (docs/sweeps.md):

    --grid algorithm=fedavg,fedprox:mu=0.1,scaffold   # presets: name[:key=value[:...]]
    --grid algorithm.mu=0.01,0.1                      # to the grid's algorithms with `mu`

A setting axis (`algorithm.<key>`, any key but `name`) multiplies only the points whose
algorithm has that setting; the others run once. Presets are checked against the
algorithm's own option model.
"""

import copy
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fedjoule.algorithms.registry import names as algorithm_names
from fedjoule.algorithms.registry import section_model_or_none
from fedjoule.arguments import grid_size
from fedjoule.errors import FedjouleError
from fedjoule.plugins import relative_to, scenario_trust
from fedjoule.scenarios.loading import apply_overrides, read_source, scenario_folder, validate
from fedjoule.scenarios.schema import Scenario
from fedjoule.scenarios.yaml_reader import parse_yaml

ALGORITHM = "algorithm"  # the axis of presets
SETTING = "algorithm."  # `algorithm.<key>`: a setting axis (but algorithm.name)


@dataclass(frozen=True)
class Axis:
    """One `--grid` option: a dotted scenario key and its values as typed (YAML text)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its folder name, grid values (as typed) and resolved scenario."""

    name: str
    values: dict[str, str]
    scenario: Scenario
    label: str = field(default="", compare=False)  # for legends and tables: `fedprox mu=0.1`

    @property
    def overrides(self) -> list[str]:
        return override_texts(self.values)


@dataclass(frozen=True)
class Preset:
    """An `algorithm` grid value, `name[:key=value[:...]]` or a YAML mapping: the algorithm
    and its settings (values parsed as YAML; `texts`: as typed)."""

    text: str
    name: str
    settings: dict[str, Any]
    texts: dict[str, str]

    @property
    def section(self) -> dict[str, Any]:
        return {"name": self.name, **self.settings}

    @property
    def label(self) -> str:
        return " ".join([self.name, *(f"{k}={v}" for k, v in self.texts.items())])

    @property
    def folder(self) -> str:
        return "-".join([self.name, *(f"{k}={v}" for k, v in self.texts.items())])


_SETTING_START = re.compile(r":(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")  # `:key=` (not `a.py:Cls`)


def parse_preset(text: str) -> Preset:
    """`fedprox:mu=0.1` (or `{name: fedprox, mu: 0.1}`) as a Preset; syntax only."""
    shown = f"--grid algorithm: preset {text!r}"
    text = text.strip()
    if text.startswith("{"):
        value = parse_yaml(text, shown)
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            raise FedjouleError(f"{shown}: a mapping needs name: <algorithm>")
        settings = {str(k): v for k, v in value.items() if k != "name"}
        texts = {k: _shown(v) for k, v in settings.items()}
        return Preset(text, value["name"], settings, texts)
    name, *parts = _SETTING_START.split(text)
    name = name.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
        raise FedjouleError(f"{shown}: expected name[:key=value[:key=value]], e.g. fedprox:mu=0.1")
    settings, texts = {}, {}
    for part in parts:
        key, _, value = (s.strip() for s in part.partition("="))
        if key in settings or key == "name":
            raise FedjouleError(f"{shown}: {key} is given twice")
        if not value:
            raise FedjouleError(f"{shown}: {key} has no value (key=value)")
        settings[key], texts[key] = parse_yaml(value, shown), value
    return Preset(text, name, settings, texts)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return (
        json.dumps(value, separators=(",", ":"))
        if isinstance(value, list | dict)
        else (str(value).lower() if isinstance(value, bool) else str(value))
    )


def override_texts(values: dict[str, str]) -> list[str]:
    """A point's grid values as `--set` texts (a preset as its algorithm section)."""
    return [
        f"{k}={json.dumps(parse_preset(v).section) if k == ALGORITHM else v}"
        for k, v in values.items()
    ]


def is_setting(key: str) -> bool:
    """`algorithm.mu`: an axis of one setting of the grid's algorithms."""
    return key.startswith(SETTING) and key != SETTING + "name"


def split_values(text: str) -> list[str]:
    """Split on commas outside brackets and quotes: `1,[2,3],'a,b'` -> 3 values."""
    values, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append(text[start:i].strip())
            start = i + 1
    values.append(text[start:].strip())
    return values


def parse_grid(
    items: list[str], sets: list[str] | None = None, allow_empty: bool = False
) -> list[Axis]:
    """`key=v1,v2,...` options as axes; a repeated key, a key also in --set or an empty
    value is an error; no axis at all too, unless `allow_empty` (a sweep over seeds)."""
    if not items and allow_empty:
        return []
    if not items:
        raise FedjouleError("a sweep needs at least one --grid key=v1,v2,...")
    set_keys = {s.partition("=")[0].strip() for s in sets or []}
    axes: list[Axis] = []
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise FedjouleError(
                f"--grid {item!r}: expected dotted.key=v1,v2,..., e.g. training.local_steps=1,5,20"
            )
        values = split_values(text)
        if any(v == "" for v in values):
            raise FedjouleError(f"--grid {item!r}: an empty value; separate values by commas")
        if len(set(values)) != len(values):
            raise FedjouleError(f"--grid {key}: a value is repeated in {text!r}")
        if any(a.key == key for a in axes):
            raise FedjouleError(f"--grid {key} is given twice; give its values in one --grid")
        if key in set_keys:
            raise FedjouleError(f"{key} is both a --grid and a --set key; keep one")
        axes.append(Axis(key, tuple(values)))
    return axes


def short_names(keys: list[str]) -> dict[str, str]:
    """A key's last part (`training.local_steps` -> `local_steps`) unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}


def run_name(values: dict[str, str]) -> str:
    """A readable folder name from grid values alone, so it is the same in every sweep that
    has this point: `local_steps=5__name=fedprox`; a preset is `fedprox-mu=0.1`, and so is
    fedprox with a setting axis `algorithm.mu=0.1` (the settings join the algorithm)."""
    shorts = short_names(list(values))
    parts: dict[str, str] = {}
    named = next((k for k in values if k in (ALGORITHM, SETTING + "name")), None)
    for key, value in values.items():
        if key == ALGORITHM:
            parts[key] = parse_preset(value).folder + parts.get(key, "")
        elif is_setting(key) and named is not None:
            parts[named] = parts.get(named, "") + f"-{shorts[key]}={value}"
        else:
            parts[key] = f"{shorts[key]}={value}" + parts.get(key, "")
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", "__".join(parts.values()))


def point_label(values: dict[str, str]) -> str:
    """A point's label for legends and tables: the algorithm first, as its name and
    settings (`fedprox mu=0.1`; `fedavg`, not `name=fedavg`), then the other axes as
    `local_steps=5`, joined by ", "."""
    shorts = short_names(list(values))
    algorithm = algorithm_label(values)
    rest = [f"{shorts[k]}={v}" for k, v in values.items() if not k.startswith(ALGORITHM)]
    return ", ".join(([algorithm] if algorithm else []) + rest)


def algorithm_label(values: dict[str, str]) -> str:
    """The algorithm part of a point's label: `fedprox mu=0.1` ("" without algorithm axes);
    values missing or empty are left out (an algorithm without a setting of the grid)."""
    name, settings = [], []
    for key, value in values.items():
        if value is None or value == "":
            continue
        if key == ALGORITHM:
            name.append(parse_preset(value).label)
        elif key == SETTING + "name":
            name.append(value)
        elif is_setting(key):
            settings.append(f"{key[len(SETTING) :]}={value}")
    return " ".join(name + settings)


def table_columns(keys: list[str], rows: list[dict]) -> tuple[list[str], list[dict]]:
    """The grid columns of a printed table: the algorithm axes as one `algorithm` column
    holding each row's algorithm label (`fedprox mu=0.1`), then the other keys."""
    mine = [k for k in keys if k == ALGORITHM or k.startswith(SETTING)]
    if not mine:
        return keys, rows
    shown = [{**r, ALGORITHM: algorithm_label({k: r.get(k) for k in mine})} for r in rows]
    return [ALGORITHM, *(k for k in keys if k not in mine)], shown


def plan_points(source: str | Path, sets: list[str], axes: list[Axis]) -> list[Point]:
    """Every point of the grid's cartesian product, each validated; fails before any run,
    naming the grid key and value at fault. Plug-in files are found from the scenario
    file's folder, as for a run."""
    folder = scenario_folder(source)
    with relative_to(folder), scenario_trust(folder):
        return _plan_points(source, sets, axes)


def _plan_points(source: str | Path, sets: list[str], axes: list[Axis]) -> list[Point]:
    raw, label = read_source(source)
    base = apply_overrides(raw, list(sets))
    validate(copy.deepcopy(base), label)  # a bad --set is reported as such
    grid_size("--grid", {a.key: len(a.values) for a in axes})  # before listing the points
    main = [a for a in axes if not is_setting(a.key)]
    settings = [a for a in axes if is_setting(a.key)]
    for axis in main:  # each value alone first: the message names one key and value
        for value in axis.values:
            what = f"--grid {axis.key}: value {value!r}"
            if axis.key == ALGORITHM:
                what = f"--grid algorithm: preset {value!r}"
                check_preset(parse_preset(value))
            _check(base, label, {axis.key: value}, what)
    points, names, used = [], {}, set()
    for combo in itertools.product(*(a.values for a in main)):
        values = {a.key: v for a, v in zip(main, combo, strict=True)}
        section, fields = algorithm_fields(base, values)
        mine = [a for a in settings if a.key[len(SETTING) :].split(".")[0] in fields]
        for axis in mine:
            preset = values.get(ALGORITHM)
            if preset is not None and axis.key[len(SETTING) :] in parse_preset(preset).settings:
                raise FedjouleError(
                    f"--grid {axis.key} and the preset {preset!r} both set it; "
                    "keep one (e.g. drop the preset's setting)"
                )
        used.update(a.key for a in mine)
        for extra in itertools.product(*(a.values for a in mine)):
            point = {**values, **{a.key: v for a, v in zip(mine, extra, strict=True)}}
            ordered = {a.key: point[a.key] for a in axes if a.key in point}
            points.append(_point(base, label, ordered, names))
    unused = [a.key for a in settings if a.key not in used]
    if unused:
        raise FedjouleError(_no_setting_message(base, main, unused))
    labels = [p.label for p in points]  # a label two points share: their folder names
    return [p if labels.count(p.label) == 1 else replace(p, label=p.name) for p in points]


def _point(base: dict, label: str, values: dict[str, str], names: dict) -> Point:
    shown = ", ".join(f"{k}={v}" for k, v in values.items())
    scenario = _check(base, label, values, f"--grid point {shown}")
    name = run_name(values)
    if name in names:
        raise FedjouleError(
            f"--grid points {names[name]} and {shown} get the same folder name {name!r}; "
            "write the values differently"
        )
    names[name] = shown
    return Point(name, values, scenario, point_label(values))


def _section(base: dict, values: dict[str, str]) -> dict:
    """The algorithm section of the scenario `base` with the grid `values` applied."""
    raw = apply_overrides(copy.deepcopy(base), override_texts(values))
    section = raw.get(ALGORITHM)
    return section if isinstance(section, dict) else {}


def setting_names(section: dict) -> list[str]:
    """The settings an algorithm section may hold (its option model's fields, but name and
    the recorded source), by the algorithm's own schema."""
    model = section_model_or_none(section)
    if model is None:
        return []
    return [
        f.alias or key for key, f in model.model_fields.items() if key not in ("name", "source")
    ]


def algorithm_fields(base: dict, values: dict[str, str]) -> tuple[dict, list[str]]:
    section = _section(base, values)
    return section, setting_names(section)


def check_preset(preset: Preset) -> None:
    """A preset's keys must be settings of its algorithm: the error names the preset, the
    key and the allowed keys. (Their values are checked with the whole scenario.)"""
    if section_model_or_none({"name": preset.name}) is None:
        raise FedjouleError(
            f"--grid algorithm: preset {preset.text!r}: unknown algorithm {preset.name!r}; "
            f"available: {', '.join(algorithm_names())}"
        )
    allowed = setting_names({"name": preset.name})
    for key in preset.settings:
        if key not in allowed:
            raise FedjouleError(
                f"--grid algorithm: preset {preset.text!r}: {preset.name} has no setting "
                f"{key!r}; allowed: {', '.join(allowed) or 'none (it has no settings)'}"
            )


def _no_setting_message(base: dict, main: list[Axis], unused: list[str]) -> str:
    """Why setting axes apply to no point: the grid's algorithms and their settings."""
    seen: dict[str, list[str]] = {}
    for combo in itertools.product(*(a.values for a in main)):
        section = _section(base, {a.key: v for a, v in zip(main, combo, strict=True)})
        name = str(section.get("name", "fedavg"))
        seen.setdefault(name, setting_names(section))
    listed = "; ".join(f"{n}: {', '.join(s) or 'no settings'}" for n, s in seen.items())
    keys = ", ".join(f"--grid {k}" for k in unused)
    return (
        f"{keys}: no algorithm of the grid has {'this setting' if len(unused) == 1 else 'these'}"
        f" (the grid's algorithms and their settings: {listed}); add one that has it, e.g. "
        "--grid algorithm=fedavg,fedprox"
    )


def _check(base: dict, label: str, values: dict[str, str], what: str) -> Scenario:
    overrides = override_texts(values)
    try:
        return validate(apply_overrides(copy.deepcopy(base), overrides), label)
    except FedjouleError as exc:
        message = str(exc).replace("--set ", "")
        raise FedjouleError(f"{what}: {message}") from None
