"""Trace-driven links: a client's rate follows a measured throughput time series.

The series is piecewise constant: sample i's rate holds from t_i until t_{i+1} (the last
one for the median spacing of the samples, 1 s without a time column: one sample per
second). With `loop` the series repeats with period T = its duration; without, the last
rate holds for ever. Each client reads the series from its own offset o_k (uniform in
[0, T) from the seed, or 0), so at simulated time t it sends at r((t + o_k) mod T), and
the airtime of S bits started at t0 is the first t with integral_{t0}^{t0 + t} r = S.
"""

import csv
import io
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from fedjoule.channel.medium import TransmissionAborted, _check_bits
from fedjoule.datafile import read_data_text
from fedjoule.errors import FedjouleError

UNITS_BPS = {"bit/s": 1.0, "kbit/s": 1e3, "Mbit/s": 1e6}
PACKAGE_PREFIX = "package:"  # a trace shipped in fedjoule/channel/traces/
_MAX_SAMPLES = 10_000_000
MAX_TIME_S = 1e9  # a time column's span (s): about 32 years, the scenarios' bound on times
MIN_STEP_S = 1e-6  # the finest sample spacing (s); finer, a period's bits round to nothing
RATE_BPS = (1.0, 1e15)  # a rate other than 0: 1 bit/s to 1 Pbit/s (after unit and scale)


def trace_path(file: str) -> Path:
    """The path of a trace file: `package:NAME` is fedjoule/channel/traces/NAME, anything
    else a path relative to the working directory."""
    if file.startswith(PACKAGE_PREFIX):
        name = file[len(PACKAGE_PREFIX) :]
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise FedjouleError(f"{file!r}: a packaged trace is named package:FILE.csv")
        return Path(str(resources.files("fedjoule.channel") / "traces" / name))
    return Path(file)


@dataclass(frozen=True)
class ThroughputTrace:
    """A measured rate series: sample start times (s, from 0) and rates (bit/s)."""

    times_s: np.ndarray  # (n,) increasing, times_s[0] == 0
    rates_bps: np.ndarray  # (n,) >= 0
    period_s: float  # the series' duration T
    loop: bool = True

    @property
    def ends_s(self) -> np.ndarray:
        return np.append(self.times_s[1:], self.period_s)

    @property
    def bits_per_period(self) -> float:
        return float(np.sum(self.rates_bps * (self.ends_s - self.times_s)))

    def rate_at(self, t_s: float) -> float:
        """The rate at trace time t_s (s from the series' start)."""
        if self.loop:
            t_s = math.fmod(t_s, self.period_s)
        i = int(np.searchsorted(self.times_s, t_s, side="right")) - 1
        return float(self.rates_bps[max(0, min(i, len(self.rates_bps) - 1))])

    def pieces(self, start_s: float) -> Generator[tuple[float, float], None, None]:
        """(duration_s, rate_bps) of the constant pieces from trace time `start_s` on; the
        last piece of a series without loop lasts for ever."""
        n = len(self.times_s)
        ends = self.ends_s
        if self.loop:
            base = math.floor(start_s / self.period_s) * self.period_s
            t = start_s - base
            if t >= self.period_s:  # float round-off at the boundary
                base, t = base + self.period_s, 0.0
        else:
            base, t = 0.0, start_s
        i = int(np.searchsorted(self.times_s, t, side="right")) - 1
        i = max(0, min(i, n - 1))
        while True:
            if not self.loop and i == n - 1:
                yield math.inf, float(self.rates_bps[i])
                return
            yield max(0.0, float(ends[i]) - t), float(self.rates_bps[i])
            i += 1
            if i == n:
                i = 0
            t = float(self.times_s[i])

    def time_to_send_s(self, bits: float, start_s: float) -> float:
        """Airtime of `bits` from trace time `start_s`: where the rate's integral reaches
        the bits (inf when the series can never carry them)."""
        left, elapsed, count = float(bits), 0.0, 0
        per_period, n = self.bits_per_period, len(self.times_s)
        for duration, rate in self.pieces(start_s):
            if left <= 0:
                return elapsed
            if rate * duration >= left:
                return elapsed + left / rate
            if math.isinf(duration):
                return math.inf
            left -= rate * duration
            elapsed += duration
            count += 1
            if self.loop and count == n:  # a whole period passed: skip the others at once
                if per_period <= 0:
                    return math.inf
                whole = max(0, math.floor(left / per_period) - 1)
                left -= whole * per_period
                elapsed += whole * self.period_s
        return math.inf


def read_trace(
    file: str,
    column: str,
    time_column: str | None = None,
    unit: str = "Mbit/s",
    scale: float = 1.0,
    loop: bool = True,
    field: str = "channel.trace",
) -> ThroughputTrace:
    """A throughput trace from a CSV file's `column` (and optional `time_column`, s); rows
    whose rate is empty are skipped. Errors name `field`, the file and the first bad row."""
    path = trace_path(file)
    where = f"{field}.file {file}"
    text = read_data_text(path, f"{field}.file", "trace", errors="replace")
    times, rates = _samples(text, where, column, time_column)
    times_s, last_s = _checked_times(np.asarray(times, dtype=float), where, time_column)
    with np.errstate(over="ignore"):
        rates_bps = np.asarray(rates, dtype=float) * UNITS_BPS[unit] * float(scale)
    low, high = RATE_BPS
    outside = (rates_bps != 0) & ~((rates_bps >= low) & (rates_bps <= high))
    if outside.any():
        bad = int(np.flatnonzero(outside)[0])
        raise FedjouleError(
            f"{where}: sample {bad + 1}'s rate is {rates_bps[bad]:g} bit/s after unit and "
            f"scale; a rate is 0 or from {low:g} to {high:g} bit/s"
        )
    if loop and not (rates_bps > 0).any():
        raise FedjouleError(f"{where}: every rate is 0; no transfer could ever finish")
    return ThroughputTrace(times_s, rates_bps, float(times_s[-1] + last_s), bool(loop))


def _samples(text: str, where: str, column: str, time_column: str | None):
    """(times, rates) of the CSV text's rows with a rate (times: the row count without a
    time column); a missing column, a bad or negative number, too many samples or an
    unreadable CSV is an error naming the line."""
    line = 1
    try:
        with io.StringIO(text, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            for name, what in ((column, "column"), (time_column, "time_column")):
                if name is not None and name not in header:
                    shown = ", ".join(h[:40] for h in header[:20])
                    raise FedjouleError(
                        f"{where}: no {what} {name!r}; the file's columns: {shown or 'none'}"
                    )
            times, rates = [], []
            for line, row in enumerate(reader, start=2):
                value = (row.get(column) or "").strip()
                if not value:
                    continue  # a second without a measurement
                rate = _number(value, where, line, column)
                if rate < 0:
                    raise FedjouleError(f"{where}, line {line}: {column} {rate:g} is negative")
                t = (
                    _number(row.get(time_column) or "", where, line, time_column)
                    if (time_column)
                    else float(len(rates))
                )
                times.append(t)
                rates.append(rate)
                if len(rates) > _MAX_SAMPLES:
                    raise FedjouleError(f"{where}: more than {_MAX_SAMPLES:,} samples")
    except csv.Error as exc:
        raise FedjouleError(f"{where}, line {line}: not a readable CSV ({str(exc)[:80]})") from None
    if not rates:
        raise FedjouleError(f"{where}: no sample in column {column!r}")
    return times, rates


def _checked_times(times_s: np.ndarray, where: str, time_column: str | None):
    """The sample times from 0, and the last sample's length (the median step), checked:
    increasing, at least MIN_STEP_S apart, spanning at most MAX_TIME_S."""
    with np.errstate(over="ignore"):  # +-1e308: an infinite span, refused below
        steps = np.diff(times_s)
    if (steps <= 0).any():
        bad = int(np.flatnonzero(steps <= 0)[0]) + 1
        raise FedjouleError(
            f"{where}: {time_column} must increase from row to row; sample {bad + 1} "
            f"({times_s[bad]:g}) does not"
        )
    last_s = float(np.median(steps)) if len(steps) else 1.0
    span_s = float(times_s[-1]) - float(times_s[0])  # inf past float64's range
    if span_s > MAX_TIME_S:
        raise FedjouleError(
            f"{where}: {time_column} spans {span_s:g} s; at most "
            f"{MAX_TIME_S:g} s (about 32 years) keeps every simulated time finite"
        )
    if (steps < MIN_STEP_S).any():
        bad = int(np.flatnonzero(steps < MIN_STEP_S)[0]) + 1
        raise FedjouleError(
            f"{where}: sample {bad + 1} comes {steps[bad - 1]:g} s after the one before; "
            f"samples are at least {MIN_STEP_S:g} s apart"
        )
    return times_s - times_s[0], last_s


def _number(text: str, where: str, line: int, column) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FedjouleError(
            f"{where}, line {line}: {column} {text[:40]!r} is not a number"
        ) from None
    if not math.isfinite(value):
        raise FedjouleError(f"{where}, line {line}: {column} {text[:40]!r} is not finite")
    return value


def section_arguments(section) -> tuple:
    """read_trace's arguments but the field name, from one `channel.trace.uplink|downlink`
    section (hashable: a cache can key on them)."""
    return (section.file, section.column, section.time_column, section.unit, section.scale,
            section.loop)


def load_section(section, field: str) -> ThroughputTrace:
    """The ThroughputTrace of one `channel.trace.uplink|downlink` section."""
    return read_trace(*section_arguments(section), field)


def client_offsets_s(trace: ThroughputTrace, kind: str, gen, n_clients: int) -> np.ndarray:
    """Each client's offset into the trace: uniform in [0, T) (random) or 0 (zero)."""
    if kind == "zero":
        return np.zeros(n_clients)
    return gen.uniform(0.0, trace.period_s, n_clients)


class TraceMedium:
    """One client's trace-driven link with the media's `transmit` interface: the rate is
    the trace's, read from the client's offset, whatever the other clients do (the
    measured throughput already carries the load of its cell)."""

    def __init__(self, env: simpy.Environment, trace: ThroughputTrace, offset_s: float) -> None:
        self.env = env
        self.trace = trace
        self.offset_s = float(offset_s)

    def transmit(
        self,
        bits: float,
        link,
        on_start: Callable[[], None] | None = None,
        on_rate: Callable[[float], None] | None = None,
        **_ignored,
    ) -> Generator[simpy.Event, Any, float]:
        """Send `bits`; returns the airtime, raises TransmissionAborted (bits sent so far)."""
        bits = _check_bits(bits)
        env = self.env
        start_s = env.now
        if bits == 0:
            return 0.0
        if on_start is not None:
            on_start()
        left = bits
        rate = 0.0
        piece_s = start_s
        try:
            if on_rate is None:  # one wake-up at the closed-form finish
                airtime_s = self.trace.time_to_send_s(bits, start_s + self.offset_s)
                yield env.timeout(airtime_s) if math.isfinite(airtime_s) else env.event()
                return env.now - start_s
            for duration, rate in self.trace.pieces(start_s + self.offset_s):
                piece_s = env.now
                on_rate(rate)
                if rate * duration >= left:
                    yield env.timeout(left / rate)
                    return env.now - start_s
                if math.isinf(duration):
                    yield env.event()  # a zero rate for ever: only an interrupt ends it
                yield env.timeout(duration)
                left -= rate * duration
        except simpy.Interrupt as interrupt:
            airtime_s = env.now - start_s
            if on_rate is None:
                sent = self._bits_in(start_s, airtime_s)
            else:
                sent = bits - left + rate * (env.now - piece_s)
            raise TransmissionAborted(airtime_s, interrupt.cause, min(bits, sent)) from interrupt
        return env.now - start_s

    def _bits_in(self, start_s: float, airtime_s: float) -> float:
        """Bits the trace carries in `airtime_s` from simulated time `start_s`."""
        sent, left_s = 0.0, airtime_s
        for duration, rate in self.trace.pieces(start_s + self.offset_s):
            step = min(duration, left_s)
            sent += rate * step
            left_s -= step
            if left_s <= 0:
                return sent
        return sent
