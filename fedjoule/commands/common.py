"""What the commands share: the executors, names of output folders, the checks of a
resumed or tracked run (said in the caller's words), and messages of a resumed run."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedjoule.errors import FedjouleError
from fedjoule.folders import CHECKPOINT

EXECUTORS = ("vectorised", "vmap", "compiled", "sequential")


@dataclass(frozen=True)
class RunWords:
    """How a caller names a run's options in its messages: the command line's flags
    (CLI_WORDS) or the API's arguments (API_WORDS). no_train: the option of a run that
    trains nothing, where the caller has one."""

    resume: str
    changes: str
    out: str
    track: str
    no_train: str | None = None


CLI_WORDS = RunWords("--resume", "--set", "--out DIR", "--track", "--no-train")
API_WORDS = RunWords("resume=True", "overrides", "out=...", "track=")


def check_tracking(tracked: bool, resume: bool, no_train: bool, words: RunWords) -> None:
    """Tracking is asked of a run that starts and trains: a resumed run keeps what it
    started with, a run that trains nothing is not tracked."""
    if tracked and (resume or no_train):
        refused = f", and a {words.no_train} run is not tracked" if words.no_train else ""
        raise FedjouleError(
            f"{words.track}: a resumed run keeps the tracking it started with (its "
            f"scenario.yaml){refused}"
        )


def check_resume(resume: bool, changed: bool, out: Any, words: RunWords) -> None:
    """A resumed run continues as it was (no overrides) in the folder given."""
    if resume and changed:
        raise FedjouleError(
            f"{words.resume} continues a run as it was; {words.changes} cannot change it"
        )
    if resume and out is None:
        raise FedjouleError(f"{words.resume} needs the run folder to continue: {words.out}")


def scenario_label(scenario: Any) -> str:
    """The name output folders are named after: a Scenario's name, a YAML file's stem or
    a built-in scenario's name."""
    if not isinstance(scenario, str | os.PathLike):
        return scenario.name  # (a Scenario)
    text = os.fspath(scenario)
    return Path(text).stem if text.endswith((".yaml", ".yml")) else text


def resume_message(out: Path, first_round: int, total: int) -> str:
    """Where a resumed run continues: `resuming from round 8 of 20: 7 rounds done
    (rounds.csv rows 0-6), checkpoint runs/x/checkpoint.pt`."""
    if first_round == 0:
        return f"no checkpoint in {out} yet: starting again from round 1 of {total}"
    if first_round >= total:
        return f"all {total} rounds done (checkpoint {out / CHECKPOINT}): writing the run's files"
    done = (
        "1 round done (rounds.csv row 0)"
        if first_round == 1
        else (f"{first_round} rounds done (rounds.csv rows 0-{first_round - 1})")
    )
    return (
        f"resuming from round {first_round + 1} of {total}: {done}, checkpoint {out / CHECKPOINT}"
    )
