"""`validate`: check a scenario as `run` (or `run --no-train`) does before it makes its
folder: the data, the model, trace files, the network; short of training."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ValidateOptions:
    """What `fedjoule validate` checks. import_plugins: the scenario's plug-ins are
    imported (else a custom algorithm, model or dataset is checked by name only, and the
    world is not built); no_train: checked as `run --no-train` does (no data, no model)."""

    scenario: str
    overrides: list[str] = field(default_factory=list)
    import_plugins: bool = False
    no_train: bool = False
    data_dir: Path | None = None


@dataclass(frozen=True)
class Validated:
    """A valid scenario (validated), its plausibility warnings, and whether its plug-ins
    were checked by name only (unchecked)."""

    scenario: Any
    warnings: list[str]
    unchecked: bool


def validate(options: ValidateOptions) -> Validated:
    """The scenario of `options`, checked; a mistake raises FedjouleError."""
    # deferred: the scenario schema (pydantic; `fedjoule --help` loads this module)
    from fedjoule.scenarios import loading, plausibility

    scenario = loading.load_scenario(options.scenario, options.overrides)
    named = [s.name for s in (scenario.dataset, scenario.model, scenario.algorithm)]
    spec = scenario.policy.class_ or ""  # a plug-in policy file or module (not a name)
    unchecked = ("custom" in named or ":" in spec) and not options.import_plugins
    if options.no_train:  # what `run --no-train` checks before it makes its folder
        # deferred: the system-only engine (numpy, SimPy)
        from fedjoule.simulator.system_run import check_system

        check_system(scenario)
    elif not unchecked:  # what `run` checks: the data, the model, the world
        # deferred: torch (the training world; validate --no-train imports none)
        from fedjoule.simulator.world import build_world

        build_world(scenario, data_dir=options.data_dir, device="cpu")
    return Validated(scenario, plausibility.plausibility_warnings(scenario), unchecked)
