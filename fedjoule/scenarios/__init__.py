"""Scenarios: their schema (schema/), reading and checking them (loading.py), the built-in
ones (builtin/) and the reference of their fields (reference.py)."""

from types import ModuleType


def reader() -> ModuleType:
    """fedjoule.scenarios.loading (load_scenario, scenario_yaml, read_source, validate, its
    Scenario class, ...), imported on first use: `fedjoule --help`, `import fedjoule.api`
    and the modules that read a scenario only on some paths load no schema."""
    # deferred: the scenario schema (pydantic and every section's model, about 0.2 s)
    from fedjoule.scenarios import loading

    return loading
