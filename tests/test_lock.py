"""requirements/dev.lock, which make run and make test install from, pins a release of
every dependency pyproject.toml names (the package and its dev extra), each one inside
pyproject's bounds, with hashes: a dependency added without `make lock` fails here."""

import re
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def locked() -> dict[str, tuple[str, str]]:
    """name -> (version, the entry's text) for the entries that apply to this Python."""
    text = (ROOT / "requirements" / "dev.lock").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)
    pins = {}
    for entry in entries:
        match = re.match(r"([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)\s*(?:;\s*([^\\\n]+))?", entry)
        if not match:
            continue
        name, version, marker = match.groups()
        if marker and not Requirement(f"x; {marker}").marker.evaluate(default_environment()):
            continue
        pins[re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()] = (version, entry)
    return pins


def test_the_lock_pins_every_dependency_within_pyproject_bounds_with_hashes():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    pins = locked()
    assert len(pins) > 100  # the whole tree, not only the direct dependencies
    for line in wanted:
        requirement = Requirement(line)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{name} is in pyproject.toml but not in the lock: run make lock"
        version, entry = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (name, version)
        assert "--hash=sha256:" in entry, name
