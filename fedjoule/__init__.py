"""fedjoule: an energy-aware wireless federated-learning network simulator.

The Python API (docs/api.md), imported on first use so that `import fedjoule` stays cheap:

    import fedjoule

    result = fedjoule.run(fedjoule.load_scenario("default", {"training.rounds": 5}))
    result.summary["final_accuracy"]
"""

import importlib
from typing import TYPE_CHECKING

from fedjoule.threads import wait_passively

__version__ = "0.1.0"

wait_passively()  # before torch loads its OpenMP runtime (fedjoule/threads.py)

# name -> the module that defines it
_EXPORTS = {
    "load_scenario": "fedjoule.api",
    "run": "fedjoule.api",
    "sweep": "fedjoule.api",
    "plan": "fedjoule.api",
    "capacity": "fedjoule.api",
    "RunResult": "fedjoule.api",
    "SweepResult": "fedjoule.api",
    "PlanResult": "fedjoule.api",
    "CapacityResult": "fedjoule.api",
    "Scenario": "fedjoule.scenarios.schema",
    "FedjouleError": "fedjoule.errors",
}

__all__ = [
    "CapacityResult",
    "FedjouleError",
    "PlanResult",
    "RunResult",
    "Scenario",
    "SweepResult",
    "__version__",
    "capacity",
    "load_scenario",
    "plan",
    "run",
    "sweep",
]

if TYPE_CHECKING:
    from fedjoule.api import (
        CapacityResult,
        PlanResult,
        RunResult,
        SweepResult,
        capacity,
        load_scenario,
        plan,
        run,
        sweep,
    )
    from fedjoule.errors import FedjouleError
    from fedjoule.scenarios.schema import Scenario


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fedjoule' has no attribute {name!r}")

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # (looked up once)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
