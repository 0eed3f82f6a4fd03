"""The device-profile library: measured device classes shipped as YAML files.

Each file in fedjoule/devices/profiles/ is one profile:

    name: rpi4-wifi                  # the file's stem
    description: one line
    values:                          # DeviceClass fields (radio: a RadioSection mapping)
      compute: measured
      reference_seconds_per_sample: 0.6825
      radio: {model: wifi}
    sources:                         # one entry per value set, dotted for radio fields
      reference_seconds_per_sample: "paper or datasheet, table, year; how derived"
      radio.model: "..."

A scenario's device class names a profile (`profile: rpi4-wifi`); the profile's values
fill every field the class does not set (DeviceClass's validator, schema.py). A source
that could not be checked against its primary document says "unverified".
"""

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from fedjoule.errors import FedjouleError, did_you_mean

PROFILE_KEYS = ("name", "description", "values", "sources")


@dataclass(frozen=True)
class Profile:
    """One device profile: its values (DeviceClass fields) and a source for each."""

    name: str
    description: str
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def leaves(self) -> dict[str, Any]:
        """Every value the profile sets, by dotted field name (`radio.model`)."""
        out: dict[str, Any] = {}
        for key, value in self.values.items():
            if isinstance(value, dict):
                out.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                out[key] = value
        return out


def _folder():
    return resources.files("fedjoule.devices") / "profiles"


def profile_names() -> list[str]:
    """The names of the shipped profiles, sorted."""
    return sorted(p.name[: -len(".yaml")] for p in _folder().iterdir() if p.name.endswith(".yaml"))


class UnknownProfile(FedjouleError):
    """A device class names no shipped profile."""


def unknown_profile_message(name: object) -> str:
    return (
        f"unknown device profile {name!r}{did_you_mean(name, profile_names())}; "
        f"available: {', '.join(profile_names())} "
        "(`fedjoule profiles` lists them)"
    )


@cache
def load_profile(name: str) -> Profile:
    """The shipped profile `name`; UnknownProfile (listing the available ones) if none."""
    if not isinstance(name, str) or name not in profile_names():
        raise UnknownProfile(unknown_profile_message(name))
    raw = yaml.safe_load((_folder() / f"{name}.yaml").read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or set(raw) != set(PROFILE_KEYS) or raw["name"] != name:
        raise FedjouleError(
            f"device profile file {name}.yaml is malformed: it needs exactly the keys "
            f"{', '.join(PROFILE_KEYS)}, with name: {name}"
        )
    return Profile(
        name=name,
        description=str(raw["description"]),
        values=dict(raw["values"] or {}),
        sources={str(k): str(v) for k, v in (raw["sources"] or {}).items()},
    )


def merged_class(data: dict) -> dict:
    """A device class's raw mapping with its profile's values under its own: the class's
    fields win, `radio` is merged field by field, and `name` defaults to the profile's
    name. A mapping without a profile is returned unchanged."""
    name = data.get("profile")
    if name is None:
        return data
    profile = load_profile(name)
    merged: dict = {"name": profile.name}
    for key, value in profile.values.items():
        merged[key] = dict(value) if isinstance(value, dict) else value
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
