"""The interface of a plug-in policy (docs/writing-a-policy.md): a subclass of `Policy` that
chooses the round's clients (`select`) and/or what each selected client gets (`allocate`),
named in a scenario as `policy: {class: "file.py:Class"}`, a module or an installed name
(entry-point group `fedjoule.policies`), under the plug-in trust rules of fedjoule/plugins.py.
What a plug-in leaves out stays the scenario's built-in policy (or its fixed value)."""

import inspect
from dataclasses import dataclass

import numpy as np

from fedjoule.plugins import (
    REGISTRY,
    PluginError,
    Unchecked,
    entry_target,
    load_spec,
    require_subclass,
)
from fedjoule.policies.observation import Observation

# the decisions `allocate` may return, each an array over Plan.client_id (None: leave it)
DECIDED = ("local_steps", "cpu_freq_hz", "band_share")


@dataclass(frozen=True)
class Plan:
    """What the round gives its selected clients before the plug-in's `allocate` (the
    scenario's values, or its built-in allocators' decisions), one entry per selected
    client in the order of `client_id`."""

    client_id: np.ndarray  # (m,) int, the selected clients, sorted
    local_steps: np.ndarray  # (m,) int, their local steps
    cpu_freq_hz: np.ndarray  # (m,) CPU frequency they compute at; nan: not settable
    freq_min_hz: np.ndarray  # (m,) lowest of the DVFS range; nan: no range
    freq_max_hz: np.ndarray  # (m,) highest of the DVFS range; nan: no range
    step_time_s: np.ndarray  # (m,) one local step at cpu_freq_hz (c B / f)
    expected_comm_s: np.ndarray  # (m,) expected download + upload (last measured, else nominal)
    deadline_s: float | None  # round.deadline_s (None: no deadline)


class Policy:
    """A plug-in policy. The scenario's `policy.options` are passed to the constructor as
    keyword arguments; one object serves the whole run. Override `select` (used with
    `policy.select: custom`), `allocate`, or both."""

    def select(self, obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
        """At most m of obs.client_id (the round's online, eligible candidates), each once.
        `gen`: the round's selection stream, for any random draw."""
        raise NotImplementedError

    def allocate(self, obs: Observation, plan: Plan) -> dict | None:
        """Decisions for the selected clients (obs: their observation, in plan's order): a
        dict with any of local_steps, cpu_freq_hz, band_share (arrays over plan.client_id);
        a key left out or None keeps the plan's value. None: keep everything."""
        return None

    def state_dict(self) -> dict:
        """The object's own state, for a checkpoint: a dict of plain data (numbers, strings,
        None, lists, dicts with string keys, numpy arrays of numbers or booleans, floats up
        to 64 bits). Override it, with load_state_dict, when the choices depend on more
        than the observation."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """On resume, what state_dict returned (its arrays as numpy arrays)."""


def decides(cls: type, method: str) -> bool:
    """Whether a Policy class overrides `method` (select, allocate, state_dict)."""
    return getattr(cls, method) is not getattr(Policy, method)


def policy_class(name: str, base_dirs=(), recorded: dict | None = None) -> tuple[type, dict]:
    """The class a scenario's policy.class names ('file.py:Class', 'package.module:Class'
    or an installed name) and its source; an Unchecked placeholder when plug-in code is
    not run (validate). Raises PluginError for an unknown name or a class that is not a
    Policy."""
    if ":" in name:
        cls, source = load_spec(name, base_dirs, recorded)
        if isinstance(cls, Unchecked):
            return cls, source
        where = repr(name)
    else:
        entry = REGISTRY.get("policy", name)
        if entry is None:
            have = ", ".join(map(repr, REGISTRY.entries("policy"))) or "none installed"
            raise PluginError(
                f"unknown policy {name!r} (installed policies: {have}); give a plug-in class "
                "'file.py:ClassName' or 'package.module:ClassName'"
            )
        cls, source = entry_target(entry)
        where = f"policy {name!r} ({entry.origin})"
    require_subclass(cls, Policy, where)
    return cls, source


def check_options(cls: type, name: str, options: dict) -> None:
    """The constructor takes the scenario's options (bound, not run)."""
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise PluginError(f"{name!r} does not take options {options}: {exc}") from None
