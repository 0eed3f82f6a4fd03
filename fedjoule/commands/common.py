"""What the commands share: the executors, names of output folders and messages of a
resumed run."""

import os
from pathlib import Path
from typing import Any

from fedjoule.folders import CHECKPOINT

EXECUTORS = ("vectorised", "vmap", "compiled", "sequential")


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
