"""Loading scenarios: built-in names or YAML files, `--set` overrides, readable errors."""

import difflib
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from fedjoule.errors import FedjouleError
from fedjoule.scenarios.schema import Scenario


def builtin_names() -> list[str]:
    """Names of the scenarios shipped inside the package."""
    folder = resources.files("fedjoule.scenarios") / "builtin"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def builtin_text(name: str) -> str:
    return (resources.files("fedjoule.scenarios") / "builtin" / f"{name}.yaml").read_text()


def read_source(source: str | Path) -> tuple[dict[str, Any], str]:
    """The raw mapping of a scenario file or built-in name, and a label for messages."""
    path = Path(source)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise FedjouleError(
                f"scenario file {path} not found; give a YAML file or one of the built-in "
                f"scenarios: {', '.join(builtin_names())}"
            )
        text, label = path.read_text(), str(path)
    elif str(source) in builtin_names():
        text, label = builtin_text(str(source)), f"built-in scenario '{source}'"
    else:
        raise FedjouleError(
            f"no scenario file or built-in scenario named '{source}'; built-in scenarios: "
            f"{', '.join(builtin_names())} (`fedjoule scenarios` lists them)"
        )
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FedjouleError(f"{label}: not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise FedjouleError(f"{label}: a scenario must be a mapping of sections, got {raw!r}")
    return raw, label


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `dotted.key=value` overrides; values are parsed as YAML (numbers, lists, null)."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise FedjouleError(
                f"--set {item!r}: expected dotted.key=value, e.g. training.rounds=5"
            )
        value = yaml.safe_load(text) if text.strip() else ""
        node = raw
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise FedjouleError(f"--set {item!r}: '{part}' is a value, not a section")
            node = child
        node[parts[-1]] = value
    return raw


def load_scenario(source: str | Path = "default", overrides: list[str] | None = None) -> Scenario:
    """A validated Scenario from a built-in name or a YAML file, with overrides applied."""
    raw, label = read_source(source)
    raw = apply_overrides(raw, overrides or [])
    return validate(raw, label)


def validate(raw: dict[str, Any], label: str) -> Scenario:
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        lines = [describe_error(err) for err in exc.errors()]
        raise FedjouleError(f"{label}: invalid scenario\n  " + "\n  ".join(lines)) from None


def describe_error(err: dict[str, Any]) -> str:
    """One line naming the field path, the bad value and what is allowed."""
    loc = _without_union_tag([str(p) for p in err["loc"]])
    path = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        allowed = fields_at(loc[:-1], algorithm=_algorithm_tag(err["loc"]))
        hint = difflib.get_close_matches(loc[-1], allowed, n=1)
        guess = f" (did you mean '{hint[0]}'?)" if hint else ""
        return f"unknown field '{path}'{guess}; allowed here: {', '.join(allowed)}"
    message = err["msg"].removeprefix("Value error, ")
    if not loc:
        return message
    value = err.get("input")
    shown = (
        ""
        if isinstance(value, dict | list) or err["type"] == "union_tag_invalid"
        else (f" (got {value!r})")
    )
    return f"field '{path}': {message}{shown}"


def _algorithm_tag(loc: tuple) -> str | None:
    """pydantic puts the chosen algorithm's name into the path: ('algorithm', 'fedprox', ...)."""
    return str(loc[1]) if len(loc) > 1 and loc[0] == "algorithm" else None


def _without_union_tag(loc: list[str]) -> list[str]:
    return loc[:1] + loc[2:] if len(loc) > 1 and loc[0] == "algorithm" else loc


def fields_at(loc: list[str], algorithm: str | None = None) -> list[str]:
    """Field names allowed at a location of the scenario (for 'unknown field' messages)."""
    from fedjoule.algorithms.registry import ALGORITHMS

    if loc == ["algorithm"] and algorithm in ALGORITHMS:
        return sorted(ALGORITHMS[algorithm][1].model_fields)
    model: type[BaseModel] | None = Scenario
    for part in loc:
        if part.isdigit() or model is None:
            continue
        info = model.model_fields.get(part)
        model = _model_of(info.annotation) if info else None
    return sorted(model.model_fields) if model else []


def _model_of(annotation) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `list[DeviceClass]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found:
            return found
    return None


def scenario_yaml(scenario: Scenario) -> str:
    """The resolved scenario as YAML (every field, defaults filled)."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
