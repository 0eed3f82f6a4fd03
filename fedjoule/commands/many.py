"""What sweep and plan share: the view of their runs (which execute in other processes)
and a scenario given as an object, written where they read it."""

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from fedjoule import __version__
from fedjoule.commands.common import scenario_label
from fedjoule.folders import check_out_folder, stamped_folder
from fedjoule.scenarios import reader
from fedjoule.storage import write_text_atomically


class RunsView:
    """What sweep and plan show while their runs execute: nothing here; the command line
    and the API show bars and lines. on_replays(n) and on_replay(what) follow a plan's
    replays (None: not followed)."""

    on_replays: Callable[[int], None] | None = None
    on_replay: Callable[[str], None] | None = None

    def running(self, folder: Path) -> AbstractContextManager:
        """Around the runs, from the first to the last."""
        return nullcontext()

    def say(self, text: str) -> None:
        """A line of what the command does."""

    def on_plan(
        self, points, states: dict[str, str], folders: dict[str, Path], restart: list[str]
    ) -> None:
        """Before the first run: every point, its state (done, partial, new) and folder,
        and for a restart which runs are done and which resume (planning.sweep.state_lines)."""

    def on_run(self, name: str, status: str) -> None:
        """After each run: ran, resumed, skipped, diverged or failed."""


def scenario_source(scenario: Any, folder: Path) -> tuple[str, bool]:
    """What sweep and plan read a scenario from: a name or file as given, or a Scenario
    written to <folder>/scenario.yaml (so that the folder says what it ran, and a restart
    with the same folder finds it). Returns (source, whether the file was written)."""
    if isinstance(scenario, str | os.PathLike):
        return os.fspath(scenario), False
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.yaml"
    header = f"# the scenario given to fedjoule {__version__} from Python; every field is shown\n"
    write_text_atomically(path, header + reader().scenario_yaml(scenario))
    return str(path), True


def undo_source(folder: Path, written: bool, created: bool, outputs: Sequence[str]) -> None:
    """After a failure before the command wrote anything: remove the scenario file (and the
    folder) `scenario_source` made."""
    if not written or any((folder / n).exists() for n in outputs):
        return
    (folder / "scenario.yaml").unlink(missing_ok=True)
    if created:
        try:
            folder.rmdir()
        except OSError:
            pass


@contextmanager
def command_folder(
    scenario: Any, out: Path | None, kind: str, outputs: Sequence[str]
) -> Iterator[tuple[Path, str]]:
    """The folder of a sweep or plan (`out`, default <kind>/<name>-<time>, checked) and the
    source its scenario is read from (scenario_source); if the command fails before it
    wrote any of `outputs`, the scenario file and the folder it made are removed."""
    folder = out or stamped_folder(kind, scenario_label(scenario))
    check_out_folder(folder)
    created = not folder.exists()
    source, written = scenario_source(scenario, folder)
    try:
        yield folder, source
    except BaseException:
        undo_source(folder, written, created, outputs)
        raise
