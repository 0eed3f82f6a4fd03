"""Sweep grids: `--grid key=v1,v2` parsing, validation before any run, stable run names."""

import copy
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from fedjoule.errors import FedjouleError
from fedjoule.plugins import relative_to, scenario_trust
from fedjoule.scenarios.loading import apply_overrides, read_source, scenario_folder, validate
from fedjoule.scenarios.schema import Scenario


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

    @property
    def overrides(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.values.items()]


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
    has this point: `local_steps=5__name=fedprox`."""
    shorts = short_names(list(values))
    parts = [f"{shorts[k]}={v}" for k, v in values.items()]
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", "__".join(parts))


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
    for axis in axes:  # each value alone first: the message names one key and value
        for value in axis.values:
            _check(base, label, {axis.key: value}, f"--grid {axis.key}: value {value!r}")
    points, names = [], {}
    for combo in itertools.product(*(a.values for a in axes)):
        values = {a.key: v for a, v in zip(axes, combo, strict=True)}
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        scenario = _check(base, label, values, f"--grid point {shown}")
        name = run_name(values)
        if name in names:
            raise FedjouleError(
                f"--grid points {names[name]} and {shown} get the same folder name {name!r}; "
                "write the values differently"
            )
        names[name] = shown
        points.append(Point(name, values, scenario))
    return points


def _check(base: dict, label: str, values: dict[str, str], what: str) -> Scenario:
    overrides = [f"{k}={v}" for k, v in values.items()]
    try:
        return validate(apply_overrides(copy.deepcopy(base), overrides), label)
    except FedjouleError as exc:
        message = str(exc).replace("--set ", "")
        raise FedjouleError(f"{what}: {message}") from None
