"""Python values as the text of the command line's `--set key=value` and `--grid
key=v1,v2` (the API's overrides= and axes=): YAML flow text, checked to read back as the
same value."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from fedjoule import arguments
from fedjoule.scenarios.yaml_reader import parse_yaml


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _text(value: Any) -> str:
    """YAML flow text of a plain value; strings are quoted when plain text would not read
    back as the same string or holds a character a grid's comma splitting looks at."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        plain = value and value == value.strip() and not set(value) & set(",[]{}'\"#\n\r\t")
        if plain:
            try:
                plain = parse_yaml(value, "value") == value
            except Exception:  # noqa: BLE001 - any text YAML refuses is quoted instead
                plain = False
        return value if plain else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return "{" + ", ".join(f"{_text(k)}: {_text(v)}" for k, v in value.items()) + "}"


def value_text(value: Any, where: str = "value") -> str:
    """A Python value as the YAML text of a `--set key=value` or `--grid` value; checked to
    read back as the same value."""
    arguments.text("where", where)
    plain = arguments.plain(where, value)
    text = _text(plain)
    if not _same(parse_yaml(text, where), plain):
        raise arguments.ArgumentError(
            f"{where}={arguments.shown(value)}: cannot be written as a scenario value"
        )
    return text


def _key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not key.strip() or "=" in key:
        raise arguments.ArgumentTypeError(
            f"{what}: {arguments.shown(key)} is not a dotted scenario key (e.g. training.rounds)"
        )
    return key.strip()


def override_texts(overrides: Mapping[str, Any] | None) -> list[str]:
    """{"training.rounds": 5, ...} as the command line's ["training.rounds=5", ...]."""
    items = []
    for key, value in (overrides or {}).items():
        key = _key(key, "overrides")
        items.append(f"{key}={value_text(value, f'overrides[{key!r}]')}")
    return items


def grid_texts(
    axes: Mapping[str, Iterable[Any]], named: str = "axes", seeds: list[int] | None = None
) -> list[str]:
    """{"training.local_steps": [1, 5]} as the command line's ["training.local_steps=1,5"];
    each axis at most MAX_VALUES values, the grid (times the seeds) at most MAX_RUNS points."""
    given = {}
    allowed = f"a list of 1 to {arguments.MAX_VALUES:,} values, e.g. [1, 5, 20]"
    for key, values in axes.items():
        key = _key(key, named)
        where = f"{named}[{key!r}]"
        given[key] = arguments.items(where, values, arguments.MAX_VALUES, allowed)
        if not given[key]:
            raise arguments.ArgumentError(f"{where}=[]: expected {allowed}")
    sizes = {key: len(values) for key, values in given.items()}
    arguments.grid_size(named, {**sizes, **({"seeds": len(seeds)} if seeds else {})})
    return [
        f"{key}={','.join(value_text(v, f'{named}[{key!r}]') for v in values)}"
        for key, values in given.items()
    ]
