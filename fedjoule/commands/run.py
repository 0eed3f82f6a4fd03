"""`run`: one scenario, trained (simulator/run.py) or system-only (`--no-train`,
simulator/system_run.py), into rounds.csv, clients.csv, summary.json and the plots."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedjoule.folders import check_out_folder, stamped_folder
from fedjoule.threads import run_threads


@dataclass(frozen=True)
class RunOptions:
    """How a training run executes. data_dir: dataset folder (None: $FEDJOULE_DATA_DIR,
    else a user cache); device: auto, cpu or cuda; executor: one of common.EXECUTORS;
    resume: continue the run in the output folder; threads: torch threads (None: one for a
    small local step, else all cores; threads.run_threads); state_memory_mb: client
    state kept in memory, beyond it spilled to client_state.bin (None: never)."""

    data_dir: Path | str | None = None
    device: str = "auto"
    executor: str = "vectorised"
    resume: bool = False
    threads: int | None = None
    state_memory_mb: float | None = 2048


class RunView:
    """What a run shows while it works: nothing here; the command line and the API show a
    bar and lines."""

    @contextmanager
    def running(self, folder: Path) -> Iterator[None]:
        """Around the run."""
        yield

    def warnings(self, warnings: list[str]) -> None:
        """The scenario's plausibility warnings (unit slips), before the run starts."""

    def on_start(self, world: Any, first_round: int) -> None:
        """The world is built; rounds from `first_round` on are to play (a training run)."""

    def on_system_start(self, world: Any, engine: str, notices: list[str]) -> None:
        """The system-only world is built, played by `engine` (notices: why)."""

    def on_round(self, row: dict) -> bool | None:
        """A round's row is written; False stops the run after it (a training run)."""
        return None


def run(
    scenario: Any, out: Path | None, options: RunOptions, view: RunView | None = None
) -> tuple[Path, dict]:
    """Run a loaded Scenario into `out` (default runs/<name>-<time>), or with
    options.resume continue the run in `out` (scenario None: as recorded). Returns the run
    folder and its summary; a run that diverges raises RunDiverged after its files."""
    # deferred: torch (the training run; `run --no-train` imports none)
    import torch

    from fedjoule.scenarios.plausibility import plausibility_warnings
    from fedjoule.simulator.run import run_scenario
    from fedjoule.simulator.world import pick_device

    view = view or RunView()
    pick_device(options.device)
    if scenario is not None:
        view.warnings(plausibility_warnings(scenario))
    folder = out or stamped_folder("runs", scenario.name)  # (run_scenario checks it)

    def on_start(world: Any, first_round: int) -> None:
        if not options.threads:
            torch.set_num_threads(run_threads(world))
        view.on_start(world, first_round)

    before = torch.get_num_threads()
    if options.threads:
        torch.set_num_threads(options.threads)
    try:
        with view.running(folder):
            return run_scenario(
                scenario,
                folder,
                data_dir=options.data_dir,
                device=options.device,
                executor=options.executor,
                resume=options.resume,
                state_memory_mb=options.state_memory_mb,
                on_start=on_start,
                on_round=view.on_round,
            )
    finally:
        torch.set_num_threads(before)


def run_system_only(
    scenario: Any, out: Path | None, engine: str = "auto", view: RunView | None = None
) -> tuple[Path, dict]:
    """Run a loaded Scenario without training (`run --no-train`) into `out` (default
    runs/<name>-system-<time>) on `engine`: auto, numpy or simpy. Returns the run folder
    and its summary."""
    # deferred: the system-only engine (numpy, SimPy)
    from fedjoule.scenarios.plausibility import plausibility_warnings
    from fedjoule.simulator.system_run import run_system

    view = view or RunView()
    view.warnings(plausibility_warnings(scenario))
    folder = out or stamped_folder("runs", f"{scenario.name}-system")
    check_out_folder(folder)
    with view.running(folder):
        return run_system(
            scenario,
            folder,
            engine=engine,
            on_start=view.on_system_start,
            on_round=view.on_round,
        )
