"""The checks of the arguments of run, sweep, plan, capacity and load_scenario, shared by
the command line and the Python API: one place says what each argument may be.

A wrong value raises ArgumentError (a FedjouleError and a ValueError), a wrong type
ArgumentTypeError (a FedjouleError and a TypeError); both name the argument, the value
(shortened) and what is allowed. Seeds are distinct integers in [0, 2^63 - 1], at most
MAX_SEEDS of them, as a scenario's `seed` is. A list of values (seeds, a grid axis, the
plan's k, snr_db, bandwidth_hz and cells) may be any iterable: its size is checked first
(len(), or at most its limit + 1 items taken), so that range(10**15) is refused at once.
"""

import itertools
import json
import math
import numbers
import os
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedjoule.errors import FedjouleError
from fedjoule.plugins import PluginError
from fedjoule.report.plot_settings import check_style
from fedjoule.tracking.registry import is_spec, tracker_class
from fedjoule.tracking.registry import names as tracker_names

MAX_SEED = 2**63 - 1  # the scenario's seed range (scenarios/schema.py)
MAX_SEEDS = 1000  # seeds of one command
MAX_THREADS = 4096
MAX_WORKERS = 4096
MAX_ROUNDS = 10_000_000
MAX_MEMORY_MB = 1e9
MAX_VALUES = 1000  # values of one grid axis (or of the plan's k, snr_db, bandwidth_hz, cells)
CI_METHODS = ("t", "bootstrap")  # the intervals over seeds (fedjoule/seeds.py)
MAX_DEPTH = 20  # nesting of lists and mappings in an override or grid value
DEVICES = ("auto", "cpu", "cuda")  # where a run trains (auto: CUDA if present)
MAX_RUNS = 100_000  # points of a sweep's grid, or cells of a plan's (seeds included)


class ArgumentError(FedjouleError, ValueError):
    """An argument's value is not one the command takes."""


class ArgumentTypeError(FedjouleError, TypeError):
    """An argument is not of a type the command takes."""


_SHORT = reprlib.Repr()  # (Python 3.11 has no keyword arguments for these)
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 4, 60, 80, 60


def shown(value: Any) -> str:
    """`value` as a short text for a message (at most 80 characters; only the first
    items of a long list are looked at)."""
    if is_int(value) and abs(int(value)).bit_length() > 200:  # (its repr is slow or refused)
        digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1
        return f"<a whole number of about {digits} digits>"
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr fails is still named
        text = f"<{type(value).__name__}>"
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
    try:
        number = float(value)
    except OverflowError:  # a whole number beyond a float (10**400)
        number = math.inf
    below = number <= low if low_open else number < low
    if not math.isfinite(number) or below or number > high:
        side = f"above {low:g}" if low_open else f"at least {low:g}"
        bounds = [side] if math.isfinite(low) else []
        if math.isfinite(high):
            bounds.append(f"at most {high:g}")
        allowed = ", ".join(
            ["a finite number", " and ".join(bounds)] if bounds else ["a finite number"]
        )
        raise ArgumentError(f"{name}={shown(value)}: expected {allowed}")
    return number


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected True or False")
    return value


def choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ArgumentError(f"{name}={shown(value)}: expected one of {', '.join(allowed)}")
    return value


def text(name: str, value: Any, optional: bool = False, empty: bool = False) -> str | None:
    """A str (non-empty, but with `empty`); None when optional."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not (empty or value.strip()):
        kind = "a text" if empty else "a non-empty text"
        raise ArgumentTypeError(f"{name}={shown(value)}: expected {kind}")
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


def items(name: str, value: Any, limit: int, allowed: str) -> list:
    """The values of an iterable argument (a list, tuple, range, generator...; not a text
    or a mapping) as a list, refused when it holds more than `limit`: its len() is asked
    first, else at most limit + 1 items are taken, so a huge range costs nothing."""
    given = shown(value)  # (before a generator is consumed)
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ArgumentTypeError(f"{name}={given}: expected {allowed}")
    try:
        size = len(value)  # type: ignore[arg-type]
    except OverflowError:  # len(range(10**20))
        size = limit + 1
    except TypeError:  # no len(): a generator
        size = None
    if size is None or size <= limit:
        try:
            taken = list(itertools.islice(value, limit + 1))
        except Exception as exc:  # noqa: BLE001 - an iterable that fails is a bad argument
            raise ArgumentTypeError(
                f"{name}={given}: cannot be read ({type(exc).__name__}); expected {allowed}"
            ) from None
        size = len(taken)
    if size > limit:
        raise ArgumentError(f"{name}={given}: more than {limit:,} values; expected {allowed}")
    return taken


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
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected {allowed}")
    given = items(name, value, MAX_SEEDS, allowed)
    if not all(is_int(s) for s in given):
        raise ArgumentTypeError(f"{name}={shown(value)}: expected {allowed}")
    if not given or any(not 0 <= s <= MAX_SEED for s in given):
        raise ArgumentError(f"{name}={shown(value)}: expected {allowed}")
    if len(set(given)) != len(given):
        raise ArgumentError(f"{name}={shown(value)}: each seed once ({allowed})")
    return [int(s) for s in given]


def grid_size(name: str, sizes: dict[str, int]) -> int:
    """The points of a grid whose axes have `sizes` ({axis: number of values}; the product,
    an upper bound where a setting axis multiplies only some points), at most MAX_RUNS:
    checked before the points are listed."""
    count = math.prod(sizes.values())
    if count > MAX_RUNS:
        product = " x ".join(f"{size:,} {axis}" for axis, size in sizes.items())
        raise ArgumentError(f"{name}: {count:,} points ({product}); expected at most {MAX_RUNS:,}")
    return count


def number_list(name: str, value: Any, whole: bool) -> list[int | float]:
    """A non-empty iterable of at most MAX_VALUES finite numbers (whole numbers up to
    2^63 with `whole`): the plan's k, snr_db and bandwidth_hz, before the rules they share
    with the command line's --k, --snr-db, --bandwidth-hz (planning/plan.py parse_numbers)."""
    kind = "whole numbers" if whole else "finite numbers"
    allowed = f"a list of 1 to {MAX_VALUES:,} {kind}, e.g. [1, 2, 5]"
    given = items(name, value, MAX_VALUES, allowed)
    if not given:
        raise ArgumentError(f"{name}={shown(value)}: expected {allowed}")
    for i, v in enumerate(given):
        if whole:
            integer(f"{name}[{i}]", v, -MAX_SEED, MAX_SEED)
        else:
            real(f"{name}[{i}]", v)
    return [int(v) if whole else float(v) for v in given]


def grid_cell(label: str, snr_db: float, bandwidth_hz: float, snrs: list, bandwidths: list):
    """One cell (snr_db, bandwidth_hz) of the plan's grid to draw (`--cells SNR:BW` and the
    API's cells=[(snr, bw)]); `label` says where it was given."""
    if snr_db not in snrs or bandwidth_hz not in bandwidths:
        raise ArgumentError(
            f"{label}: not a cell of the grid; allowed SNR (dB) {snrs}, bandwidths (Hz) "
            f"{bandwidths}"
        )
    return (snr_db, bandwidth_hz)


def cells(name: str, value: Any, snrs: list, bandwidths: list) -> list[tuple] | None:
    """The API's cells=[(snr_db, bandwidth_hz), ...]: at most MAX_VALUES pairs of finite
    numbers, each a cell of the grid; None or empty: the grid's corners."""
    if value is None:
        return None
    allowed = f"a list of at most {MAX_VALUES:,} (snr_db, bandwidth_hz) pairs, e.g. [(0, 1e5)]"
    chosen = []
    for i, pair in enumerate(items(name, value, MAX_VALUES, allowed)):
        where = f"{name}[{i}]"
        both = items(where, pair, 2, "a pair (snr_db, bandwidth_hz)")
        if len(both) != 2:
            raise ArgumentError(f"{where}={shown(pair)}: expected a pair (snr_db, bandwidth_hz)")
        snr, bandwidth = real(f"{where}[0]", both[0]), real(f"{where}[1]", both[1])
        chosen.append(grid_cell(f"{where}={shown(pair)}", snr, bandwidth, snrs, bandwidths))
    return chosen or None


def plain(name: str, value: Any, depth: int = 0) -> Any:
    """An override or grid value as the plain data a scenario holds: text, a number, True
    or False, None, or lists and mappings of these (tuples as lists, numpy numbers and
    paths as Python ones), nested at most MAX_DEPTH deep."""
    allowed = "plain data: text, a number, True/False, None, or lists and dicts of these"
    if depth > MAX_DEPTH:
        raise ArgumentError(f"{name}: nested more than {MAX_DEPTH} deep; expected {allowed}")
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()  # a numpy scalar (a numpy array is refused below)
    if value is None or isinstance(value, bool | str):
        return value
    if is_int(value):
        if abs(int(value)).bit_length() > 1000:
            raise ArgumentError(f"{name}={shown(value)}: a whole number too large for a scenario")
        return int(value)
    if is_real(value):
        try:
            return float(value)
        except OverflowError:
            raise ArgumentError(f"{name}={shown(value)}: too large for a number") from None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        keys = [plain(name, k, depth + 1) for k in value]
        if any(isinstance(k, list | dict) for k in keys):
            raise ArgumentTypeError(f"{name}={shown(value)}: a key is a list or mapping")
        return {
            key: plain(f"{name}[{shown(k)}]", v, depth + 1)
            for key, (k, v) in zip(keys, value.items(), strict=True)
        }
    if isinstance(value, list | tuple):
        return [plain(f"{name}[{i}]", v, depth + 1) for i, v in enumerate(value)]
    raise ArgumentTypeError(
        f"{name}={shown(value)}: expected {allowed} (not {type(value).__name__})"
    )


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
    return choice(name, value, DEVICES)


def threads(name: str, value: Any, optional: bool = True) -> int | None:
    return integer(name, value, 1, MAX_THREADS, optional)


def workers(name: str, value: Any) -> int | None:
    return integer(name, value, 1, MAX_WORKERS, optional=True)


def ci(name: str, value: Any) -> str:
    """The confidence interval over seeds: t (Student) or bootstrap (fedjoule/seeds.py)."""
    return choice(name, value, CI_METHODS)


def plot_style(name: str, value: Any) -> str | None:
    """None or "default", "paper", or an existing matplotlib style file (.mplstyle)
    (fedjoule/report/plot_settings.py), as set_plot_style takes it."""
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
    allowed = f"{', '.join(tracker_names())} or a plug-in class 'file.py:ClassName'"
    for backend in given:
        if not backend:
            raise ArgumentError(f"{name}={shown(value)}: an empty tracker name; expected {allowed}")
        if given.count(backend) > 1:
            raise ArgumentError(f"{name}={shown(value)}: {backend!r} is named twice")
        if is_spec(backend):
            continue
        if backend not in tracker_names():
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
    return [] if not backends else [f"tracking.backends={json.dumps(backends)}"]
