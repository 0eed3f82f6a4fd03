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

from fedjoule.channel.trace import trace_path
from fedjoule.datafile import open_data_file, read_data_text
from fedjoule.devices.availability import IntervalReplay
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.yaml_reader import short

CAPACITY_FIELDS = ("computation", "communication")
BEHAVIOUR_FIELDS = ("duration", "inactive", "finish_time", "active", "model")
KINDS = ("capacity", "behaviour")
# FedScale's augmentation factor: a training sample costs 3 inference passes
TRAINING_PER_INFERENCE = 3.0
_MAX_ENTRIES = 10_000_000
# the most values a trace may hold, each container counted as often as it is referenced
# (what the JSON form writes out): FedScale's behaviour trace holds a few million
_MAX_VALUES = 50_000_000
_MAX_DEPTH = 3  # client_id -> fields -> a list of numbers
# the ranges of the fields (outside them a run's times overflow or lose all precision)
COMPUTATION_MS = (1e-6, 1e6)  # ms per inference sample: 1 ns to 1,000 s
COMMUNICATION_KBPS = (1e-3, 1e9)  # kbit/s: 1 bit/s to 1 Tbit/s
MAX_TIME_S = 1e9  # behaviour times (s): about 32 years, the scenario's bound on times


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
        with open_data_file(path, "", "trace") as f:
            content = _PlainUnpickler(f, encoding="latin1").load()
    except _Refused as refused:
        raise FedjouleError(
            f"{_shown(path)}: refused: the pickle names the global {refused.global_name!r}; "
            "a FedScale trace holds only dicts, lists, numbers and strings, and fedjoule "
            "never loads anything else from a pickle (nothing in it was run)"
        ) from None
    except FedjouleError:
        raise
    except OSError as exc:
        raise FedjouleError(f"{_shown(path)}: {exc.strerror or exc}") from None
    except (Exception, RecursionError) as exc:  # a truncated or non-pickle file
        raise FedjouleError(
            f"{_shown(path)}: not a readable pickle ({type(exc).__name__})"
        ) from None
    _check_plain(content, path)
    return content


def _check_plain(content, path: Path) -> None:
    """Dicts, lists (tuples), numbers and strings only, at most _MAX_DEPTH containers deep
    and _MAX_VALUES values counted as written out, no container inside itself. Each
    container is walked once (a pickle may reference one list from many places), so this
    takes time linear in the file, however often its lists are shared."""
    measured: dict[int, tuple[int, int]] = {}  # id(container) -> (values written, height)
    open_ids: set[int] = set()  # containers whose children are being walked
    stack = [(content, 1, "", False)]  # (value, depth, where, its children are measured)
    while stack:
        value, depth, where, done = stack.pop()
        if not isinstance(value, dict | list | tuple):
            _check_scalar(value, path, where)
            continue
        if done:
            children = value.values() if isinstance(value, dict) else value
            sizes = [measured.get(id(v), (1, 0)) for v in children]
            values = 1 + len(sizes) * isinstance(value, dict) + sum(n for n, _ in sizes)
            measured[id(value)] = (values, 1 + max((h for _, h in sizes), default=0))
            open_ids.discard(id(value))
            if values > _MAX_VALUES:
                raise FedjouleError(
                    f"{_shown(path)}: more than {_MAX_VALUES:,} values (counting a list as "
                    "often as it is referenced); no FedScale trace is that large"
                )
            continue
        if id(value) in open_ids:
            raise FedjouleError(f"{_shown(path)}, entry {where[:120]}: contains itself")
        height = measured[id(value)][1] if id(value) in measured else 1
        if depth + height - 1 > _MAX_DEPTH:
            raise FedjouleError(
                f"{_shown(path)}, entry {where[:120]}: nested deeper than a FedScale trace "
                "(client_id -> fields -> a list of numbers)"
            )
        if id(value) in measured:
            continue
        open_ids.add(id(value))
        stack.append((value, depth, where, True))
        if isinstance(value, dict):
            for key, item in value.items():
                _check_scalar(key, path, where)
                if depth == 1 and not _is_client_id(key):
                    raise FedjouleError(
                        f"{_shown(path)}: client id {short(key, 40)} is not a string or an "
                        "integer of at most 64 bits"
                    )
                stack.append((item, depth + 1, f"{where}[{short(key, 40)}]", False))
        else:
            for i, item in enumerate(value):
                stack.append((item, depth + 1, f"{where}[{i}]", False))


def _is_client_id(key) -> bool:
    return isinstance(key, str) or (
        isinstance(key, int) and not isinstance(key, bool) and key.bit_length() <= 64
    )


def _check_scalar(value, path: Path, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise FedjouleError(
            f"{_shown(path)}{', entry ' + where[:120] if where else ''}: a "
            f"{type(value).__name__} where a FedScale trace holds only dicts, lists, numbers "
            "and strings"
        )


def _read_csv(path: Path) -> dict:
    rows = list(csv.DictReader(io.StringIO(read_data_text(path, "", "trace"), newline="")))
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
            content = json.loads(read_data_text(path, "", "trace"))
            _check_plain(content, path)
        elif suffix == ".csv":
            content = _read_csv(path)
        else:
            content = read_pickle(path)
    except (json.JSONDecodeError, csv.Error, ValueError) as exc:
        raise FedjouleError(f"{_shown(path)}: not readable ({str(exc)[:80]})") from None
    except RecursionError:
        raise FedjouleError(f"{_shown(path)}: nested too deeply for a FedScale trace") from None
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
    except (TypeError, ValueError, OverflowError):  # OverflowError: an id of inf
        return sorted(keys, key=lambda k: (type(k).__name__, short(k)))


def _in_range(value, path: Path, key, name: str, low: float, high: float, low_open=True):
    """`value` as a float in (low, high] (or [low, high] with low_open False), or a
    FedjouleError naming the file, the client, the field and the range."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        number = float(value) if ok else math.nan
    except OverflowError:  # an integer of hundreds of digits
        number = math.nan
    ok = ok and (low < number if low_open else low <= number) and number <= high
    if not ok:
        allowed = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise FedjouleError(
            f"{_shown(path)}: client {_client(key)}: {name} {short(value, 40)} is not a number "
            f"in {allowed}"
        )
    return number


def _client(key) -> str:
    return short(key, 40).strip("'")


def _entry(content: dict, key, path: Path, fields: tuple[str, ...]) -> dict:
    entry = content[key]
    if not isinstance(entry, dict):
        raise FedjouleError(f"{_shown(path)}: client {_client(key)}: not a mapping of fields")
    missing = [name for name in fields if name not in entry]
    if missing:
        raise FedjouleError(f"{_shown(path)}: client {_client(key)}: missing {', '.join(missing)}")
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
            ms = _in_range(entry["computation"], path, key, "computation", *COMPUTATION_MS, False)
            kbps = _in_range(
                entry["communication"], path, key, "communication", *COMMUNICATION_KBPS, False
            )
            seconds.append(ms / 1e3)
            rates.append(kbps * 1e3)
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
                    f"{_shown(path)}: client {_client(key)}: active and inactive must be lists"
                )
            if len(active) != len(inactive) or not active:
                raise FedjouleError(
                    f"{_shown(path)}: client {_client(key)}: active ({len(active)}) and "
                    f"inactive ({len(inactive)}) must be non-empty lists of one length"
                )
            period = _in_range(entry["finish_time"], path, key, "finish_time", 0, MAX_TIME_S)
            starts = [_in_range(t, path, key, "active", 0, MAX_TIME_S, False) for t in active]
            ends = [_in_range(t, path, key, "inactive", 0, MAX_TIME_S, False) for t in inactive]
            for i, (t0, t1) in enumerate(zip(starts, ends, strict=True)):
                if t1 < t0 or (i and t0 < ends[i - 1]) or t1 > period:
                    raise FedjouleError(
                        f"{_shown(path)}: client {_client(key)}: interval {i} [{t0:g}, "
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
        with open_data_file(path, "", "trace") as f:
            header = f.readline(10_000).decode("utf-8", "replace")
    except (OSError, ValueError, FedjouleError):
        return False
    return "active" in [name.strip() for name in header.split(",")]
