"""Loading scenarios: built-in names or YAML files, `--set` overrides, readable errors.

Whatever a scenario file or `--set` value holds, loading either returns a Scenario or
raises one FedjouleError, quickly, with a message of a bounded number of short lines:

- the file is read up to MAX_FILE_BYTES, as UTF-8 only;
- the YAML is read by scenarios/yaml_reader.py (bounded nesting, size and aliases;
  duplicate keys and values that do not fit their tag are errors);
- validation reports every problem of the file in one pass: field errors, unknown fields
  (grouped per section, the allowed names listed once) and cross-field checks (run on the
  fields that did validate), at most MAX_LINES lines, each with its key path, line and a
  short excerpt of the value.
"""

import copy
import re
import types
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from fedjoule.algorithms.options import AlgorithmConfig
from fedjoule.algorithms.registry import section_model_or_none
from fedjoule.datafile import utf8_text
from fedjoule.errors import FedjouleError, did_you_mean
from fedjoule.plugins import relative_to, scenario_trust
from fedjoule.scenarios.schema import Invalid, Scenario
from fedjoule.scenarios.yaml_reader import (
    Unreadable,
    YamlMapping,
    capped,
    one_line,
    parse_yaml,
    short,
)

MAX_FILE_BYTES = 256 * 1024  # the built-in scenarios are about 2 KB
MAX_OVERRIDE_CHARS = 10_000


def builtin_names() -> list[str]:
    """Names of the scenarios shipped inside the package."""
    folder = resources.files("fedjoule.scenarios") / "builtin"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def builtin_text(name: str) -> str:
    return (resources.files("fedjoule.scenarios") / "builtin" / f"{name}.yaml").read_text()


# --------------------------------------------------------------------------- sources


def _source_text(source: str | Path) -> tuple[str, str]:
    """The text of a scenario file or built-in name, and a label for messages."""
    name = str(source)
    if "\x00" in name or len(name) > 4096:
        raise FedjouleError(f"no scenario file or built-in scenario named {short(name)}")
    path = Path(source)
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if path.suffix in (".yaml", ".yml") or exists:
        label = short(str(path), 200).strip("'\"")
        try:
            if path.is_dir():
                raise FedjouleError(f"scenario file {label} is a folder; give a YAML file")
            if not path.is_file():
                raise FedjouleError(
                    f"scenario file {label} not found; give a YAML file or one of the built-in "
                    f"scenarios: {', '.join(builtin_names())}"
                )
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise FedjouleError(
                f"scenario file {label}: cannot be read ({exc.strerror or type(exc).__name__})"
            ) from None
        if len(data) > MAX_FILE_BYTES:
            raise FedjouleError(
                f"{label}: larger than {MAX_FILE_BYTES // 1024} KiB, which no scenario is (the "
                "built-in ones are about 2 KB); is it the right file?"
            )
        return utf8_text(data, label, hint="a scenario is a YAML text file"), label
    if name in builtin_names():
        return builtin_text(name), f"built-in scenario '{name}'"
    raise FedjouleError(
        f"no scenario file or built-in scenario named {short(name)}; built-in scenarios: "
        f"{', '.join(builtin_names())} (`fedjoule scenarios` lists them)"
    )


def read_source(source: str | Path) -> tuple[dict[str, Any], str]:
    """The raw mapping of a scenario file or built-in name, and a label for messages."""
    text, label = _source_text(source)
    raw = parse_yaml(text, label)
    if raw is None:
        raw = YamlMapping()
    if not isinstance(raw, dict):
        raise FedjouleError(
            f"{label}: a scenario must be a mapping of sections (name:, training:, ...), "
            f"got {_kind(raw)}: {short(raw)}"
        )
    return raw, label


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `dotted.key=value` overrides; values are parsed as YAML (numbers, lists, null)."""
    for item in overrides:
        shown = f"--set {short(item)}"
        if len(item) > MAX_OVERRIDE_CHARS:
            raise FedjouleError(f"{shown}: longer than {MAX_OVERRIDE_CHARS:,} characters")
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise FedjouleError(f"{shown}: expected dotted.key=value, e.g. training.rounds=5")
        parts = key.strip().split(".")
        if not all(p.strip() for p in parts):
            raise FedjouleError(f"{shown}: the key has an empty part; e.g. training.rounds=5")
        value = parse_yaml(text, shown) if text.strip() else ""
        node = raw
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise FedjouleError(f"{shown}: {short(part)} is a value, not a section")
            node = child
        node[parts[-1]] = value
        if isinstance(node, YamlMapping):
            node.key_lines.pop(parts[-1], None)
            node.overridden.add(parts[-1])
    return raw


def load_scenario(source: str | Path = "default", overrides: list[str] | None = None) -> Scenario:
    """A validated Scenario from a built-in name or a YAML file, with overrides applied."""
    raw, label = read_source(source)
    raw = apply_overrides(raw, overrides or [])
    folder = scenario_folder(source)
    with relative_to(folder), scenario_trust(folder):
        return validate(raw, label)


def resolve_data(raw: dict[str, Any], folder: Path, label: str) -> dict[str, Any]:
    """A resolved scenario's plain data (a run's scenario.yaml, a checkpoint's copy) as
    today's schema reads it, as for a scenario file in `folder`: fields added since it was
    written take their defaults."""
    with relative_to(folder), scenario_trust(folder):
        return validate(copy.deepcopy(raw), label).model_dump(mode="json")


def scenario_folder(source: str | Path) -> Path | None:
    """The folder of a scenario file (its plug-in files are found from there); None for a
    built-in scenario."""
    path = Path(source)
    try:
        return path.resolve().parent if path.is_file() else None
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- validation


@dataclass
class Problem:
    """One problem of a scenario: where (key path), what, and the line it is on."""

    loc: tuple
    message: str
    line: int | str | None = None
    section: bool = False  # loc is a section (problems with its keys), not a field

    def text(self) -> str:
        if self.section:
            where = f"section '{_path(self.loc)}'" if self.loc else "top level"
        else:
            where = f"field '{_path(self.loc)}'" if self.loc else "top level"
        if self.line is not None:
            where += f" (line {self.line})" if isinstance(self.line, int) else f" ({self.line})"
        return one_line(f"{where}: {self.message}")


def validate(raw: dict[str, Any], label: str) -> Scenario:
    """The Scenario `raw` describes, or one FedjouleError listing all its problems."""
    if not isinstance(raw, dict):
        raise FedjouleError(
            f"{label}: a scenario must be a mapping of sections, got {_kind(raw)}: {short(raw)}"
        )
    known, unknown = split_unknown(raw)
    errors: list[dict] = []
    try:
        scenario = Scenario.model_validate(known)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    except RecursionError:
        raise FedjouleError(f"{label}: invalid scenario: nested too deeply") from None
    if not errors and not unknown:
        return scenario
    problems = scenario_problems(raw, errors, unknown)
    lines = capped([p.text() for p in problems])
    count = f"{len(problems)} problems" if len(problems) != 1 else "1 problem"
    raise FedjouleError(f"{label}: invalid scenario ({count})\n  " + "\n  ".join(lines))


def split_unknown(raw: dict) -> tuple[dict, dict[tuple, tuple[type[BaseModel], list]]]:
    """`raw` without its unknown keys (copies only the mappings that had some), and the
    unknown keys of each section: {key path of the section: (its model, [keys])}. Checking
    them here, once per section, keeps 200,000 unknown keys from making 200,000 errors."""
    unknown: dict[tuple, tuple[type[BaseModel], list]] = {}

    def visit(model: type[BaseModel], data: dict, loc: tuple) -> dict:
        fields = keys_of(model)
        extra = [k for k in data if not (isinstance(k, str) and k in fields)]
        out = data
        if extra:
            unknown[loc] = (model, extra)
            out = {k: v for k, v in data.items() if isinstance(k, str) and k in fields}
        for name in list(out):
            value, new = out[name], None
            if model is Scenario and name == "algorithm":
                sub = section_model_or_none(value) if isinstance(value, dict) else None
                if sub is not None:
                    new = visit(sub, value, (*loc, name))
            else:
                sub, is_list = _section_of(fields[name].annotation)
                if sub is not None and not is_list and isinstance(value, dict):
                    new = visit(sub, value, (*loc, name))
                elif sub is not None and is_list and isinstance(value, list):
                    items = [
                        visit(sub, item, (*loc, name, i)) if isinstance(item, dict) else item
                        for i, item in enumerate(value)
                    ]
                    if any(a is not b for a, b in zip(items, value, strict=True)):
                        new = items
            if new is not None and new is not value:
                if out is data:
                    out = dict(data)
                out[name] = new
        return out

    return visit(Scenario, raw, ()), unknown


def scenario_problems(
    raw: dict[str, Any], errors: list[dict], unknown: dict | None = None
) -> list[Problem]:
    """Every problem of `raw`, in the order of the file: pydantic's field errors, unknown
    fields (grouped per section) and the cross-field checks over the fields that validated."""
    problems: list[Problem] = []
    bad: set[tuple] = set()  # each failing key path and all its prefixes
    failed: set[tuple] = set()  # each failing key path
    cross_messages = []
    last: Problem | None = None
    unknown = dict(unknown or {})
    for err in errors:
        loc, parent = _clean_loc(err["loc"], raw)
        if err["type"] == "cross_field":
            cross_messages.append(Problem(loc, one_line(err["msg"]), section=True))
            continue
        if err["type"] == "extra_forbidden" and loc and parent is not None:
            unknown.setdefault(loc[:-1], (parent, []))[1].append(loc[-1])
            continue
        bad.update(loc[:i] for i in range(1, len(loc) + 1))
        failed.add(loc)
        message = _message(err)
        if last is not None and last.loc == loc:  # one line for a union's members
            if message not in last.message:
                last.message = f"{last.message}; or {message}"
            continue
        last = Problem(loc, message, _line(raw, loc))
        problems.append(last)
    for group, (parent, keys) in unknown.items():
        problems.append(_unknown_problem(raw, group, parent, keys))
    cross = cross_field_problems(raw, bad, failed)
    problems += cross if cross or not cross_messages else cross_messages
    problems.sort(key=lambda p: p.line if isinstance(p.line, int) else float("inf"))
    return problems


def _message(err: dict) -> str:
    """pydantic's message, made plainer for the common slips, with a short excerpt of the value."""
    kind, message, value = err["type"], err["msg"].removeprefix("Value error, "), err.get("input")
    if isinstance(value, bool) and kind in ("int_type", "float_type"):
        message = f"{message}, not true/false"
    elif kind == "int_type" and isinstance(value, float):
        message = "Input should be a whole number"
    elif kind == "finite_number":
        message = "Input should be a finite number (NaN and infinity are not allowed)"
    if kind in ("missing", "union_tag_not_found") or "input" not in err:
        return message
    if isinstance(value, Unreadable):
        return f"{message} (got {value!r})"
    if isinstance(value, dict | list):
        return f"{message} (got {_kind(value)})"
    return f"{message} (got {short(value)}){_did_you_mean(err)}"


def _did_you_mean(err: dict) -> str:
    """` (did you mean 'lte'?)` for a misspelt choice: the closest of the allowed values
    pydantic lists in a literal or enum error, or ''."""
    if err["type"] not in ("literal_error", "enum"):
        return ""
    allowed = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
    return did_you_mean(err.get("input"), allowed)


def _unknown_problem(raw, group: tuple, parent, keys: list) -> Problem:
    allowed = sorted(keys_of(parent)) if parent is not None else []

    def named(key) -> str:
        return f"{short(key, 40)}{did_you_mean(key, allowed)}"

    allowed_text = ", ".join(allowed)
    if len(keys) == 1:
        loc = (*group, keys[0])
        return Problem(
            loc,
            f"unknown field {named(keys[0])}; allowed here: {allowed_text}",
            _line(raw, loc),
        )
    shown = ", ".join(named(k) for k in keys[:5])
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return Problem(
        group,
        f"{len(keys)} unknown fields: {shown}{more}; allowed here: {allowed_text}",
        _line(raw, (*group, keys[0])),
        section=True,
    )


def _path(loc: tuple) -> str:
    return ".".join(short(p, 40) if not isinstance(p, str | int) else str(p) for p in loc)


def _kind(value) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, str):
        return "a text"
    return f"a {type(value).__name__}"


def _line(raw, loc: tuple) -> int | str | None:
    """The line of the key at `loc` in the file (or '--set'), when known."""
    node, line = raw, None
    for part in loc:
        if isinstance(node, YamlMapping):
            try:
                if part in node.overridden:
                    line = "--set"
                elif part in node.key_lines:
                    line = node.key_lines[part]
            except TypeError:
                return line
        if isinstance(node, dict) and _has(node, part):
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
    return line


def _has(mapping: dict, key) -> bool:
    try:
        return key in mapping
    except TypeError:
        return False


def keys_of(model: type[BaseModel]) -> dict:
    """A section's keys as a file writes them (a field's alias where it has one: `class`)."""
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _is_section(annotation) -> bool:
    """A scenario section or an algorithm's option model (both have cross_checks)."""
    return (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and hasattr(annotation, "cross_checks")
    )


def _section_of(annotation) -> tuple[type[BaseModel] | None, bool]:
    """(model, is a list of it) for a field holding a section or a list of sections."""
    if _is_section(annotation):
        return annotation, False
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
        return _section_of(members[0])  # an optional section (`LinkTraces | None`)
    if typing.get_origin(annotation) is list:
        item = typing.get_args(annotation)[0]
        if _is_section(item):
            return item, True
    return None, False


def _clean_loc(loc, raw=None) -> tuple[tuple, type[BaseModel] | None]:
    """An error location as the user's key path (pydantic's union member tags dropped), and
    the model holding its last part (for the names allowed next to an unknown field)."""
    out: list = []
    model: type[BaseModel] | None = Scenario
    item_model: type[BaseModel] | None = None
    parent: type[BaseModel] | None = Scenario
    parts = list(loc)
    i = 0
    while i < len(parts):
        part = parts[i]
        if model is not None:
            out.append(part)
            parent = model
            if model is Scenario and part == "algorithm":
                value = raw.get("algorithm") if isinstance(raw, dict) else None
                model = section_model_or_none(value) if isinstance(value, dict) else None
                model = model or AlgorithmConfig  # (an unknown name: its fields are unknown)
                i += 1
                continue
            info = keys_of(model).get(part) if isinstance(part, str) else None
            model, item_model = None, None
            if info is not None:
                sub, is_list = _section_of(info.annotation)
                model, item_model = (None, sub) if is_list else (sub, None)
        elif isinstance(part, int):
            out.append(part)
            if item_model is not None:
                model, item_model = item_model, None
        # else: a union member tag ('float', 'list[...]'), not part of the user's path
        i += 1
    return tuple(out), parent


class _RawView:
    """A section's raw values for the cross-field checks: a value whose field did not
    validate raises Invalid (the check is skipped); a missing one is the default."""

    __slots__ = ("_model", "_data", "_loc", "_bad", "_failed")

    def __init__(self, model, data: dict, loc: tuple, bad: set, failed: set) -> None:
        self._model, self._data, self._loc = model, data, loc
        self._bad, self._failed = bad, failed

    def __getattr__(self, name: str):
        info = self._model.model_fields.get(name)
        if info is None:
            raise AttributeError(name)
        key = info.alias or name  # as the file writes it
        loc = (*self._loc, key)
        if not _has(self._data, key):
            if info.default_factory is not None:
                return info.default_factory()
            return info.default
        value = self._data[key]
        sub, is_list = _section_of(info.annotation)
        if sub is not None and is_list:
            # a bad field inside one entry spoils only the checks that read that field
            if loc in self._failed or not isinstance(value, list):
                raise Invalid(name)
            if not all(isinstance(item, dict) for item in value):
                raise Invalid(name)
            merge = getattr(sub, "raw_with_profile", None)  # a device class's profile
            return [
                _RawView(sub, merge(item) if merge else item, (*loc, i), self._bad, self._failed)
                for i, item in enumerate(value)
            ]
        if sub is not None:
            if not isinstance(value, dict):
                raise Invalid(name)
            return _RawView(sub, value, loc, self._bad, self._failed)
        if loc in self._bad:
            raise Invalid(name)
        return value


def cross_field_problems(raw: dict, bad: set[tuple], failed: set[tuple]) -> list[Problem]:
    """The cross-field checks of every section of `raw`, skipping those that need a value
    whose own validation failed (`failed`: the failing key paths, `bad`: those and every
    prefix of them)."""
    problems: list[Problem] = []

    def visit(model, data: dict, loc: tuple) -> None:
        merge = getattr(model, "raw_with_profile", None)  # a device class's profile
        if merge is not None:
            data = merge(data)
        view = _RawView(model, data, loc, bad, failed)
        for check in model.cross_checks:
            try:
                for field, message in check(view):
                    where = (*loc, *field.split("."))
                    problems.append(Problem(where, message, _line(raw, where)))
            except (Invalid, TypeError, ValueError, AttributeError):
                continue
        for name, info in model.model_fields.items():
            sub, is_list = _section_of(info.annotation)
            if sub is None or not _has(data, name):
                continue
            value = data[name]
            if is_list and isinstance(value, list) and (*loc, name) not in failed:
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        visit(sub, item, (*loc, name, i))
            elif not is_list and isinstance(value, dict):
                visit(sub, value, (*loc, name))

    visit(Scenario, raw, ())
    return problems


def scenario_yaml(scenario: Scenario) -> str:
    """The resolved scenario as YAML (every field, defaults filled)."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
