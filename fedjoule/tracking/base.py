"""The tracker interface: what fedjoule tells an experiment tracker about one run.

A tracker is one backend's view of one tracked run (a fedjoule run, or the parent of a
sweep's or plan's runs). fedjoule calls, in this order:

    start(name, params, parent, resumed, first_round) -> state
    log_round(round_, metrics, texts)         once per round, step = round (0-based)
    log_summary(values)                       summary.json's numbers, at the run's end
    log_artifacts(files)                      the run's plots (PNG files)
    finish(complete)

`state` is plain data (ids, names) that fedjoule keeps in the run folder's
tracking.json, so that a resumed run gives it back as `resumed` and the tracker continues
the same tracked run. `reference()` is what a parent gives its children as `parent`.
A tracker kind is a subclass registered under a name (fedjoule.tracking.registry), or a
plug-in class named by a spec ('file.py:MyTracker') in a scenario's tracking.backends.
"""

from importlib.util import find_spec
from pathlib import Path
from typing import ClassVar

from fedjoule.plugins import PluginError

Params = dict[str, str | int | float | bool | None]


class TrackerMissing(PluginError):
    """A tracker whose library is not installed; the message names the extra to install."""


class Tracker:
    """One tracked run of one backend, writing under `folder` (a tracking folder shared by
    the runs of a sweep) in the experiment (MLflow) / project (W&B) `experiment`."""

    # the modules the backend imports, and the fedjoule extra that installs them
    requires: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str | None] = None

    def __init__(self, folder: Path, experiment: str) -> None:
        self.folder = Path(folder)
        self.experiment = experiment

    @classmethod
    def check_installed(cls, name: str) -> None:
        """Raise TrackerMissing (naming the extra) if a module the backend needs is absent."""
        for module in cls.requires:
            try:
                found = find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                extra = cls.extra or name
                raise TrackerMissing(
                    f"tracking backend {name!r} needs the package {module!r}, which is not "
                    f"installed here; install it with: pip install 'fedjoule[{extra}]'"
                )

    def start(
        self,
        name: str,
        params: Params,
        parent: dict | None,
        resumed: dict | None,
        first_round: int,
    ) -> dict:
        """Open (resumed: reopen) the tracked run `name`; rounds before `first_round` were
        logged before. Returns the state that reopens it."""
        return {}

    def reference(self) -> dict:
        """What a child run needs to be tracked under this (parent) run."""
        return {}

    def log_round(self, round_: int, metrics: dict[str, float], texts: dict[str, str]) -> None:
        """One round's rounds.csv row: numeric cells in `metrics`, text cells in `texts`."""

    def log_summary(self, values: dict[str, float]) -> None:
        """summary.json's numeric fields (dotted keys for nested ones)."""

    def log_artifacts(self, files: list[Path]) -> None:
        """Files of the run (its PNG plots; a sweep's table and plots)."""

    def finish(self, complete: bool) -> None:
        """Close the tracked run; `complete` False: it stopped early and may be resumed."""
