"""Device traces in FedScale's formats, read without ever running code.

FedScale (Lai et al., "FedScale: Benchmarking Model and System Performance of Federated
Learning at Scale", ICML 2022; Apache-2.0) distributes two pickled traces:

- device capacity: {client_id: {"computation": ms per sample (inference latency),
  "communication": kbit/s}};
- device behaviour: {client_id: {"duration": s, "inactive": [s, ...], "finish_time": s,
  "active": [s, ...], "model": str}}: the client is online from active[i] to inactive[i],
  the whole pattern repeating every finish_time seconds.

A pickle can name any Python callable and have it called while it loads. These are read
by an unpickler that resolves no global at all (dicts, lists, tuples, numbers and strings
need none): any global a file names is refused, naming the file and the global, before
anything is called; the content must then be dicts, lists, numbers and strings only. The
same fields are read from JSON ({"client_id": {...}}) or CSV (capacity: columns client_id,
computation, communication; behaviour: client_id, duration, finish_time, model, active,
inactive with the lists ';'-separated).

Mapping (docs/models.md#fedscale-traces): client k of the population takes the k-th entry
in client-id order, cycling (k mod entries). computation -> the `measured` compute kind
with FedScale's rule, training time = 3 x batch x steps x ms per sample (a step: 3 B ms /
1000 s); communication -> both links at that rate (FedScale's (up + down) / bandwidth);
the behaviour -> availability.kind=trace with per-client periods finish_time.
"""

import csv
import functools
import io
import json
import math
import pickle
from pathlib import Path

import numpy as np

from fedjoule.devices.availability import IntervalReplay
from fedjoule.errors import FedjouleError

CAPACITY_FIELDS = ("computation", "communication")
BEHAVIOUR_FIELDS = ("duration", "inactive", "finish_time", "active", "model")
KINDS = ("capacity", "behaviour")
# FedScale's augmentation factor: a training sample costs 3 inference passes
TRAINING_PER_INFERENCE = 3.0
_MAX_ENTRIES = 10_000_000


class _Refused(Exception):
    def __init__(self, global_name: str) -> None:
        super().__init__(global_name)
        self.global_name = global_name


class _PlainUnpickler(pickle.Unpickler):
    """Resolves no global and no persistent id: plain containers, numbers and strings only."""

    def find_class(self, module: str, name: str):
        raise _Refused(f"{module}.{name}"[:200])

    def persistent_load(self, pid):
        raise _Refused(f"persistent id {str(pid)[:60]}")


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:197] + "..."


def read_pickle(path: str | Path):
    """A pickle's content, refusing any global (FedjouleError naming the file and it)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            content = _PlainUnpickler(f, encoding="latin1").load()
    except _Refused as refused:
        raise FedjouleError(
            f"{_shown(path)}: refused: the pickle names the global {refused.global_name!r}; "
            "a FedScale trace holds only dicts, lists, numbers and strings, and fedjoule "
            "never loads anything else from a pickle (nothing in it was run)"
        ) from None
    except (OSError, ValueError) as exc:
        raise FedjouleError(f"{_shown(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    except Exception as exc:  # a truncated or non-pickle file
        raise FedjouleError(
            f"{_shown(path)}: not a readable pickle ({type(exc).__name__})"
        ) from None
    try:
        _check_plain(content, path, "")
    except RecursionError:
        raise FedjouleError(f"{_shown(path)}: nested too deeply for a FedScale trace") from None
    return content


def _check_plain(value, path: Path, where: str) -> None:
    """Dicts, lists (tuples), numbers and strings only, all the way down."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, path, where)
            _check_plain(item, path, f"{where}[{key!r}]"[:120])
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_plain(item, path, f"{where}[{i}]")
    elif isinstance(value, bool) or not isinstance(value, int | float | str):
        raise FedjouleError(
            f"{_shown(path)}{', entry ' + where if where else ''}: a {type(value).__name__} "
            "where a FedScale trace holds only dicts, lists, numbers and strings"
        )


def _read_csv(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for line, row in enumerate(rows, start=2):
        key = (row.get("client_id") or "").strip()
        if not key:
            raise FedjouleError(f"{_shown(path)}, line {line}: no client_id")
        entry = {}
        for name, text in row.items():
            if name in (None, "client_id"):
                continue
            text = (text or "").strip()
            if name in ("active", "inactive"):
                entry[name] = [_float(v, path, line, name) for v in text.split(";") if v.strip()]
            elif name == "model":
                entry[name] = text
            else:
                entry[name] = _float(text, path, line, name) if text else text
        out[key] = entry
    return out


def _float(text: str, path: Path, line: int, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FedjouleError(
            f"{_shown(path)}, line {line}: {name} {text[:40]!r} is not a number"
        ) from None


def read_raw(path: str | Path) -> dict:
    """A FedScale trace file as plain data: pickle, JSON (.json) or CSV (.csv)."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            with open(path, encoding="utf-8") as f:
                content = json.load(f)
        elif suffix == ".csv":
            content = _read_csv(path)
        else:
            content = read_pickle(path)
    except OSError as exc:
        raise FedjouleError(f"{_shown(path)}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise FedjouleError(f"{_shown(path)}: not readable ({str(exc)[:80]})") from None
    if not isinstance(content, dict) or not content:
        raise FedjouleError(
            f"{_shown(path)}: a FedScale trace is a non-empty mapping client_id -> fields, "
            f"got {type(content).__name__}"
        )
    if len(content) > _MAX_ENTRIES:
        raise FedjouleError(f"{_shown(path)}: more than {_MAX_ENTRIES:,} clients")
    return content


def trace_kind(content: dict) -> str:
    """capacity or behaviour, from the first entry's fields."""
    first = next(iter(content.values()))
    if isinstance(first, dict) and "computation" in first:
        return "capacity"
    return "behaviour"


def _sorted_ids(content: dict) -> list:
    """Client ids in order: numerically when they are all integers (as FedScale's are)."""
    keys = list(content)
    try:
        return sorted(keys, key=lambda k: int(k))
    except (TypeError, ValueError):
        return sorted(keys, key=str)


def _positive(value, path: Path, key, name: str, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        need = "a number >= 0" if allow_zero else "a positive number"
        raise FedjouleError(
            f"{_shown(path)}: client {str(key)[:40]}: {name} {str(value)[:40]!r} is not {need}"
        )
    return float(value)


def _entry(content: dict, key, path: Path, fields: tuple[str, ...]) -> dict:
    entry = content[key]
    if not isinstance(entry, dict):
        raise FedjouleError(f"{_shown(path)}: client {str(key)[:40]}: not a mapping of fields")
    missing = [name for name in fields if name not in entry]
    if missing:
        raise FedjouleError(f"{_shown(path)}: client {str(key)[:40]}: missing {', '.join(missing)}")
    return entry


class CapacityTrace:
    """Per trace entry: seconds per inference sample and link rate (bit/s)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        content = read_raw(path)
        if trace_kind(content) != "capacity":
            raise FedjouleError(
                f"{_shown(path)}: not a capacity trace (each client needs computation and "
                "communication)"
            )
        self.ids = _sorted_ids(content)
        seconds, rates = [], []
        for key in self.ids:
            entry = _entry(content, key, path, CAPACITY_FIELDS)
            seconds.append(_positive(entry["computation"], path, key, "computation") / 1e3)
            rates.append(_positive(entry["communication"], path, key, "communication") * 1e3)
        self.inference_s_per_sample = np.asarray(seconds)
        self.rate_bps = np.asarray(rates)

    def for_clients(self, n_clients: int) -> tuple[np.ndarray, np.ndarray]:
        """(training seconds per sample, link rate bit/s) of clients 0..n-1 (cycling)."""
        rows = np.arange(n_clients) % len(self.ids)
        s = TRAINING_PER_INFERENCE * self.inference_s_per_sample[rows]
        return s, self.rate_bps[rows]


@functools.lru_cache(maxsize=8)
def load_capacity(file: str) -> CapacityTrace:
    """The CapacityTrace of a scenario's file (package:NAME or a path), read once."""
    from fedjoule.channel.trace import trace_path

    return CapacityTrace(trace_path(file))


class BehaviourReplay(IntervalReplay):
    """availability from a FedScale behaviour trace: online on [active[i], inactive[i]]
    of each period finish_time (per client), the pattern repeating."""

    def __init__(self, path: str | Path, n_clients: int) -> None:
        path = Path(path)
        content = read_raw(path)
        if trace_kind(content) != "behaviour":
            raise FedjouleError(f"{_shown(path)}: not a behaviour trace (it has computation)")
        ids = _sorted_ids(content)
        self.n_clients = int(n_clients)
        self._period, self._starts, self._ends = [], [], []
        for key in ids:
            entry = _entry(content, key, path, ("active", "inactive", "finish_time"))
            active, inactive = entry["active"], entry["inactive"]
            if not isinstance(active, list | tuple) or not isinstance(inactive, list | tuple):
                raise FedjouleError(
                    f"{_shown(path)}: client {str(key)[:40]}: active and inactive must be lists"
                )
            if len(active) != len(inactive) or not active:
                raise FedjouleError(
                    f"{_shown(path)}: client {str(key)[:40]}: active ({len(active)}) and "
                    f"inactive ({len(inactive)}) must be non-empty lists of one length"
                )
            period = _positive(entry["finish_time"], path, key, "finish_time")
            starts = [_positive(t, path, key, "active", True) for t in active]
            ends = [_positive(t, path, key, "inactive", True) for t in inactive]
            for i, (t0, t1) in enumerate(zip(starts, ends, strict=True)):
                if t1 < t0 or (i and t0 < ends[i - 1]) or t1 > period:
                    raise FedjouleError(
                        f"{_shown(path)}: client {str(key)[:40]}: interval {i} [{t0:g}, "
                        f"{t1:g}] must follow the previous and end by finish_time {period:g}"
                    )
            self._period.append(period)
            self._starts.append(np.asarray(starts))
            self._ends.append(np.asarray(ends))
        self._rows = np.arange(self.n_clients) % len(ids)

    def _interval_end(self, client: int, time_s: float) -> float | None:
        row = int(self._rows[client])
        period, starts, ends = self._period[row], self._starts[row], self._ends[row]
        base = math.floor(time_s / period) * period
        local = time_s - base
        i = int(np.searchsorted(starts, local, side="right")) - 1
        if i < 0 or local >= ends[i]:  # online on [active, inactive)
            return None
        end = base + float(ends[i])
        if ends[i] >= period and starts[0] <= 0:  # runs into the next period's first
            if len(starts) == 1:
                return math.inf
            return base + period + float(ends[0])
        return end


def check_file(path: str | Path, kind: str) -> None:
    """Read a trace of `kind` (capacity, behaviour) fully; a FedjouleError names the file
    and the first bad entry."""
    if kind == "capacity":
        CapacityTrace(path)
    else:
        BehaviourReplay(path, 1)


def to_json_text(path: str | Path) -> tuple[str, str, int]:
    """The JSON form of a FedScale trace file (checked as it is read): (text, kind, clients)."""
    content = read_raw(path)
    kind = trace_kind(content)
    check_file(path, kind)
    out = {str(key): content[key] for key in _sorted_ids(content)}
    text = io.StringIO()
    json.dump(out, text, indent=None, separators=(",", ":"))
    return text.getvalue() + "\n", kind, len(out)


def is_fedscale_file(path: str) -> bool:
    """availability.trace_file in FedScale's behaviour format (a pickle, JSON, or a CSV
    whose first line names `active`) rather than fedjoule's client,start_s,end_s CSV."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline(10_000)
    except (OSError, ValueError):
        return False
    return "active" in [name.strip() for name in header.split(",")]
