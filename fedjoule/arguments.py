"""The checks of the arguments of run, sweep, plan, capacity and load_scenario, shared by
the command line and the Python API: one place says what each argument may be.

A wrong value raises ArgumentError (a FedjouleError and a ValueError), a wrong type
ArgumentTypeError (a FedjouleError and a TypeError); both name the argument, the value
and what is allowed. Seeds are distinct integers in [0, 2^63 - 1], at most MAX_SEEDS of
them, as a scenario's `seed` is.
"""

import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedjoule.errors import FedjouleError

MAX_SEED = 2**63 - 1  # the scenario's seed range (scenarios/schema.py)
MAX_SEEDS = 1000  # seeds of one command
MAX_THREADS = 4096
MAX_WORKERS = 4096
MAX_ROUNDS = 10_000_000
MAX_MEMORY_MB = 1e9


class ArgumentError(FedjouleError, ValueError):
    """An argument's value is not one the command takes."""


class ArgumentTypeError(FedjouleError, TypeError):
    """An argument is not of a type the command takes."""


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(name: str, value: Any, low: int, high: int, optional: bool = False) -> int | None:
    """An int (not a bool, not a float) in [low, high]; None when optional."""
    if value is None and optional:
        return None
    if not is_int(value):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a whole number")
    if not low <= value <= high:
        raise ArgumentError(f"{name}={shown(value)}: expected {low} to {high:,}")
    return int(value)


def real(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    optional: bool = False,
) -> float | None:
    """A finite number (not a bool) in [low, high] ((low, high] with low_open)."""
    if value is None and optional:
        return None
    if not is_real(value):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a number")
    value = float(value)
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        side = f"above {low:g}" if low_open else f"at least {low:g}"
        bound = side if math.isfinite(low) else "any finite number"
        if math.isfinite(high):
            bound += f" and at most {high:g}"
        raise ArgumentError(f"{name}={shown(value)}: expected a finite number, {bound}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected True or False")
    return value


def choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ArgumentError(f"{name}={shown(value)}: expected one of {', '.join(allowed)}")
    return value


def text(name: str, value: Any, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a non-empty text")
    return value


def path(name: str, value: Any, optional: bool = True) -> Path | None:
    """A file or folder path (str or os.PathLike), never empty."""
    if value is None and optional:
        return None
    if not isinstance(value, str | os.PathLike):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a path (text or Path)")
    raw = os.fspath(value)
    if not isinstance(raw, str) or not raw.strip() or "\0" in raw:
        raise ArgumentError(f"{name}={shown(value)}: expected a non-empty path")
    return Path(raw)


def mapping(name: str, value: Any) -> Mapping | None:
    if value is not None and not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a mapping {{key: value}}")
    return value


def function(name: str, value: Any) -> Callable | None:
    if value is not None and not callable(value):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected a function")
    return value


def seeds(name: str, value: Any) -> list[int] | None:
    """A count N >= 1 (seeds 0..N-1) or a list of distinct seeds in [0, 2^63 - 1]; at most
    MAX_SEEDS; None: no seeds axis."""
    if value is None:
        return None
    allowed = (
        f"a count 1 to {MAX_SEEDS} (seeds 0..N-1) or a list of at most {MAX_SEEDS} distinct "
        f"whole numbers 0 to 2^63 - 1"
    )
    if is_int(value):
        if not 1 <= value <= MAX_SEEDS:
            raise ArgumentError(f"{name}={shown(value)}: expected {allowed}")
        return list(range(int(value)))
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected {allowed}")
    if not all(is_int(s) for s in value):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected {allowed}")
    if not value or len(value) > MAX_SEEDS or any(not 0 <= s <= MAX_SEED for s in value):
        raise ArgumentError(f"{name}={shown(value)}: expected {allowed}")
    if len(set(value)) != len(value):
        raise ArgumentError(f"{name}={shown(value)}: each seed once ({allowed})")
    return [int(s) for s in value]


def seeds_text(text: str | None, option: str = "--seeds") -> list[int] | None:
    """`--seeds N` or `--seeds 3,7,11` from the command line, checked as `seeds` is."""
    if text is None or not str(text).strip():
        return None
    parts = str(text).strip().split(",")
    try:
        numbers_ = [int(part) for part in parts]
    except ValueError:
        raise ArgumentError(
            f"{option} {str(text)[:80]!r}: expected a count N (seeds 0..N-1) or a "
            "comma-separated list of whole numbers"
        ) from None
    try:
        return seeds(option, numbers_[0] if len(parts) == 1 else numbers_)
    except ArgumentError as exc:  # said with the text typed
        raise ArgumentError(f"{option} {str(text)[:80]!r}:{str(exc).split(':', 1)[1]}") from None


def device(name: str, value: Any) -> str:
    return choice(name, value, ("auto", "cpu", "cuda"))


def threads(name: str, value: Any, optional: bool = True) -> int | None:
    return integer(name, value, 1, MAX_THREADS, optional)


def workers(name: str, value: Any) -> int | None:
    return integer(name, value, 1, MAX_WORKERS, optional=True)


def ci(name: str, value: Any) -> str:
    """The confidence interval over seeds: t (Student) or bootstrap (fedjoule/seeds.py)."""
    from fedjoule.seeds import CI_METHODS

    return choice(name, value, CI_METHODS)


def plot_style(name: str, value: Any) -> str | None:
    """None or "default", "paper", or an existing matplotlib style file (.mplstyle)
    (fedjoule/report/figures.py), as figures.set_plot_style takes it."""
    from fedjoule.report.figures import check_style

    if value is not None and not isinstance(value, str | os.PathLike):
        raise ArgumentTypeError(
            f"{name}={shown(value)}: expected paper, default or a .mplstyle file's path"
        )
    try:
        return check_style(value, name)
    except FedjouleError as exc:
        raise ArgumentError(str(exc)) from None
def tracking(name: str, value: Any) -> list[str] | None:
    """`--track tensorboard,mlflow` or track=["csv", "wandb"]: distinct tracker names
    (fedjoule.tracking.registry), or plug-in specs 'file.py:ClassName' (checked where the
    scenario is read, under the plug-in trust rules); a named backend must be installed
    (the message names the extra that installs it). None or empty: as the scenario says."""
    from fedjoule.plugins import PluginError
    from fedjoule.tracking.registry import is_spec, names, tracker_class

    if value is None:
        return None
    if isinstance(value, str):
        given = [part.strip() for part in value.split(",")] if value.strip() else []
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        given = [v.strip() for v in value]
    else:
        raise ArgumentTypeError(
            f"{name}={shown(value)}: expected tracker names, e.g. 'tensorboard,mlflow' or "
            "['csv', 'wandb']"
        )
    allowed = f"{', '.join(names())} or a plug-in class 'file.py:ClassName'"
    for backend in given:
        if not backend:
            raise ArgumentError(
                f"{name}={shown(value)}: an empty tracker name; expected {allowed}"
            )
        if given.count(backend) > 1:
            raise ArgumentError(f"{name}={shown(value)}: {backend!r} is named twice")
        if is_spec(backend):
            continue
        if backend not in names():
            raise ArgumentError(
                f"{name}={shown(value)}: unknown tracker {backend!r}; expected {allowed}"
            )
        try:
            tracker_class(backend)  # (installed?)
        except PluginError as exc:
            raise ArgumentError(f"{name}={shown(value)}: {exc}") from None
    return given or None


def tracking_override(backends: list[str] | None) -> list[str]:
    """The --set text that puts `backends` in a scenario's tracking section ([]: none)."""
    import json

    return [] if not backends else [f"tracking.backends={json.dumps(backends)}"]
