"""torch, imported on first use: importing it costs 1 to 2 s, which the commands that
train nothing (`fedjoule --help`, scenarios, profiles, capacity, `run --no-train`) and
the readers of run folders (sweep, report) go without, though they share modules with
training (rng.py, threads.py, simulator/checkpoint.py)."""

from types import ModuleType


def load_torch() -> ModuleType:
    """The torch package."""
    # deferred: torch (1 to 2 s; the paths that train nothing load none)
    import torch

    return torch
