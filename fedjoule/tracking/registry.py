"""The tracker kinds a scenario's tracking.backends may name: the built-ins (csv,
tensorboard, mlflow, wandb), those installed packages add through the entry-point group
`fedjoule.trackers`, those registered in Python (`REGISTRY.register("tracker", name,
cls)`), and plug-in classes named by a spec ('file.py:MyTracker', 'package.module:Class')
under the plug-in trust rules of fedjoule/plugins.py."""

from typing import Any

from fedjoule.plugins import (
    REGISTRY,
    PluginError,
    Unchecked,
    entry_target,
    load_spec,
    require_subclass,
)
from fedjoule.tracking.base import Tracker
from fedjoule.tracking.csv_files import CsvTracker
from fedjoule.tracking.mlflow_store import MlflowTracker
from fedjoule.tracking.tensorboard_events import TensorBoardTracker
from fedjoule.tracking.wandb_offline import WandbTracker

BUILTIN = {
    "csv": CsvTracker,
    "tensorboard": TensorBoardTracker,
    "mlflow": MlflowTracker,
    "wandb": WandbTracker,
}
for _name, _cls in BUILTIN.items():
    REGISTRY.register("tracker", _name, _cls)


def names() -> list[str]:
    """Every tracker name a scenario may use (besides plug-in specs)."""
    return list(REGISTRY.entries("tracker"))


def is_spec(name: str) -> bool:
    return ":" in name


def tracker_class(name: str, base_dirs=(), recorded: dict | None = None) -> tuple[Any, dict]:
    """The class a tracking.backends entry names (an Unchecked placeholder for a plug-in
    when plug-in code is not run: validate without --import-plugins) and, for a plug-in,
    its source (file and SHA-256; `recorded`: the source tracking.sources holds). Raises
    PluginError for an unknown name, a class that is not a Tracker, or a backend whose
    library is not installed (naming the extra that installs it)."""
    source: dict = {}
    if is_spec(name):
        cls, source = load_spec(name, base_dirs, recorded)
        if isinstance(cls, Unchecked):
            return cls, source
        where = name
    else:
        entry = REGISTRY.get("tracker", name)
        if entry is None:
            raise PluginError(
                f"unknown tracking backend {name!r}; available: {', '.join(names())}, or a "
                "plug-in class 'file.py:ClassName'"
            )
        cls, _ = entry_target(entry)
        where = f"tracking backend {name!r} ({entry.origin})"
    require_subclass(cls, Tracker, where)
    cls.check_installed(name)
    return cls, source
