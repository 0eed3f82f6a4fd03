"""What every plot shares: the formats a plot is saved in, titles naming scenario and
algorithm, time axes in s, min, h or days, log axes where the data spans decades, the
target line, accuracy as a step function of time, mean-and-band lines, grid ticks and
labels placed so that they do not collide.

Formats: a plot is always written as PNG (the path its function is given); PDF and SVG
copies next to it on request, for the process, through `set_plot_formats(["png", "pdf"])`
or, for a block, `with plot_formats(["svg"]): ...`. The setting is mirrored in the
environment variable FEDJOULE_PLOT_FORMATS (comma-separated), so that the processes a
local sweep spawns for its runs write the same formats.
"""

import json
import math
import os
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.storage import save_figure  # noqa: E402

ALLOWED_FORMATS = ("png", "pdf", "svg")
FORMATS_ENV = "FEDJOULE_PLOT_FORMATS"
DPI = 110


def check_formats(formats: Iterable[str] | str) -> tuple[str, ...]:
    """The formats asked for, validated, lower-case, PNG first (PNG is always written)."""
    if isinstance(formats, str):
        formats = formats.split(",")
    asked = [str(f).strip().lower().lstrip(".") for f in formats]
    asked = [f for f in asked if f]
    bad = [f for f in asked if f not in ALLOWED_FORMATS]
    if bad:
        raise FedjouleError(
            f"plot format {bad[0]!r} is not supported; expected one or more of "
            f"{', '.join(ALLOWED_FORMATS)}"
        )
    return tuple(f for f in ALLOWED_FORMATS if f == "png" or f in asked)


def _from_environment() -> tuple[str, ...]:
    text = os.environ.get(FORMATS_ENV, "")
    return check_formats(text) if text.strip() else ("png",)


# the formats every plot is written in (png always; pdf, svg on request)
PLOT_FORMATS: tuple[str, ...] = ("png",)


def set_plot_formats(formats: Iterable[str] | str) -> tuple[str, ...]:
    """Write every plot in `formats` from now on (png is always among them); returns the
    setting it replaces. An unknown format is a FedjouleError naming it."""
    global PLOT_FORMATS
    new = check_formats(formats)
    old = PLOT_FORMATS
    PLOT_FORMATS = new
    os.environ[FORMATS_ENV] = ",".join(new)
    return old


def current_formats() -> tuple[str, ...]:
    """The formats plots are written in: the setting, or what the environment says (a
    process spawned by one that set them)."""
    if PLOT_FORMATS != ("png",):
        return PLOT_FORMATS
    return _from_environment()


@contextmanager
def plot_formats(formats: Iterable[str] | str):
    """`with plot_formats(["png", "pdf"]):` plots written inside are also written as PDF."""
    had_env = os.environ.get(FORMATS_ENV)
    old = set_plot_formats(formats)
    try:
        yield PLOT_FORMATS
    finally:
        set_plot_formats(old)
        if had_env is None:
            os.environ.pop(FORMATS_ENV, None)
        else:
            os.environ[FORMATS_ENV] = had_env


def save_plot(fig, path_png: Path, dpi: int = DPI) -> Path:
    """Save `fig` at `path_png` and, for each other requested format, beside it with that
    suffix (atomically, cropped to what is drawn), close it; returns the PNG's path."""
    path_png = Path(path_png)
    for fmt in current_formats():
        target = path_png if fmt == "png" else path_png.with_suffix(f".{fmt}")
        save_figure(fig, target, dpi=dpi)
    plt.close(fig)
    return path_png


# ---------------------------------------------------------------- titles and context


@dataclass(frozen=True)
class PlotContext:
    """What a plot's title and target line need to know of the scenario."""

    scenario: str | None = None
    algorithm: str | None = None
    target_metric: str | None = None
    target_value: float | None = None

    @classmethod
    def from_scenario(cls, scenario) -> "PlotContext":
        t = scenario.training
        return cls(scenario.name, scenario.algorithm.name, t.target_metric, t.target_value)

    @classmethod
    def from_folder(cls, folder: Path) -> "PlotContext":
        """A run folder's scenario.yaml (name, algorithm, target); summary.json's target
        where the scenario cannot be read. Whatever cannot be read stays None."""
        folder = Path(folder)
        name = algorithm = metric = value = None
        try:
            from fedjoule.scenarios.yaml_reader import parse_yaml

            raw = parse_yaml((folder / "scenario.yaml").read_text(), "scenario.yaml")
            name = raw.get("name")
            algorithm = (raw.get("algorithm") or {}).get("name")
            training = raw.get("training") or {}
            metric, value = training.get("target_metric"), training.get("target_value")
        except Exception:  # a plot's title is no reason to fail
            pass
        if value is None:
            try:
                summary = json.loads((folder / "summary.json").read_text())
                metric = summary.get("target_metric", metric)
                value = summary.get("target_value")
            except Exception:
                pass
        return cls(
            None if name is None else str(name),
            None if algorithm is None else str(algorithm),
            None if metric is None else str(metric),
            None if value is None else float(value),
        )


def _names(values: Iterable[str | None], what: str) -> str | None:
    distinct = sorted({v for v in values if v})
    if not distinct:
        return None
    if len(distinct) <= 3:
        return f"{what}{'s' if len(distinct) > 1 else ''} {', '.join(distinct)}"
    return f"{len(distinct)} {what}s"


def plot_title(what: str, contexts: "PlotContext | Sequence[PlotContext]" = ()) -> str:
    """`what`, then a second line naming the scenario(s) and algorithm(s)."""
    if isinstance(contexts, PlotContext):
        contexts = [contexts]
    parts = [
        _names((c.scenario for c in contexts), "scenario"),
        _names((c.algorithm for c in contexts), "algorithm"),
    ]
    parts = [p for p in parts if p]
    return what + ("\n" + " · ".join(parts) if parts else "")


def metric_label(metric: str) -> str:
    return metric.replace("_", " ")


def add_target_line(ax, target_value: float | None, target_metric: str | None, axis="y"):
    """A dashed black line at the target (horizontal on the y axis, or vertical on x),
    labelled for the legend; None when the scenario sets no target."""
    if target_value is None:
        return None
    label = f"target: {metric_label(target_metric or 'accuracy')} ≥ {target_value:g}"
    line = ax.axhline if axis == "y" else ax.axvline
    return line(target_value, color="black", ls="--", lw=1, label=label, zorder=1)


TARGET_STYLES = ("--", ":", "-.", (0, (5, 2, 1, 2)))


def add_target_lines(ax, contexts: Iterable[PlotContext], metrics: Iterable[str]) -> list:
    """One target line per distinct target among `contexts` whose metric is in `metrics`
    (the metrics the plot shows), each in its own dash pattern."""
    metrics = set(metrics)
    targets = sorted(
        {
            (c.target_metric or "accuracy", c.target_value)
            for c in contexts
            if c.target_value is not None and (c.target_metric or "accuracy") in metrics
        }
    )
    lines = [add_target_line(ax, value, metric) for metric, value in targets]
    for i, line in enumerate(lines):
        line.set_linestyle(TARGET_STYLES[i % len(TARGET_STYLES)])
    return lines


# ---------------------------------------------------------------- axes

TIME_UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("days", 86400.0))


def time_unit(span_s: float, at_least: float = 2) -> tuple[str, float]:
    """The unit a span of simulated time reads best in: the largest of s, min, h and days
    of which the span holds `at_least` (so 90 s stays s, 3 h is h, 2.5e4 s is 6.9 h)."""
    span_s = abs(span_s) if span_s == span_s else 0.0
    for name, scale in reversed(TIME_UNITS):
        if span_s >= at_least * scale:
            return name, scale
    return TIME_UNITS[0]


def finite_positive(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v == v and math.isfinite(float(v)) and float(v) > 0]


def spans_decades(values: Iterable[float], decades: float = 2) -> bool:
    """True when the positive values span at least `decades` decades and none is <= 0
    (a log axis shows them all)."""
    values = [float(v) for v in values if v == v]
    positive = finite_positive(values)
    if not positive or len(positive) != len(values):
        return False
    return max(positive) / min(positive) >= 10**decades


def log_axis_if_spans(ax, values: Iterable[float], axis: str = "x", decades: float = 2) -> bool:
    """Set the axis to log when the values span `decades` decades; returns whether it did.
    A linear axis gets at most 5 intervals of ticks, so that long labels (a narrow range
    of large numbers: 0.067300) do not run into each other."""
    if spans_decades(values, decades):
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        return True
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(nbins=5))
    return False


# the ticks of a log time axis: decades of seconds up to 10 s, then minutes, hours, days
LOG_TIME_TICKS = (
    *(10.0**k for k in range(-9, 2)),
    60.0,
    600.0,
    3600.0,
    86400.0,
    864000.0,
    8640000.0,
    86400000.0,
)


def duration_text(seconds: float, at_least: float = 1) -> str:
    """A duration in the largest unit it holds `at_least` one of: '30 s', '1.5 min',
    '6.94 h', '1 day'."""
    unit, scale = time_unit(seconds, at_least)
    value = seconds / scale
    if unit == "days" and f"{value:.3g}" == "1":
        unit = "day"
    return f"{value:.3g} {unit}"


def time_axis(ax, values_s: Iterable[float], label: str = "simulated time", axis: str = "x"):
    """Label a time axis and return the values to plot on it: (values in the unit their
    span reads best in, that unit), or, where the times span two decades, (seconds, "s")
    on a log axis whose ticks are round durations each in its own unit (1 s, 1 min, 1 h,
    1 day)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    values_s = [float(v) for v in values_s]
    set_label = ax.set_xlabel if axis == "x" else ax.set_ylabel
    if spans_decades(values_s):
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        target = ax.xaxis if axis == "x" else ax.yaxis
        lo, hi = min(values_s), max(values_s)
        ticks = [t for t in LOG_TIME_TICKS if lo / 1.5 <= t <= hi * 1.5]
        target.set_major_locator(FixedLocator(ticks))
        target.set_major_formatter(FuncFormatter(lambda v, _pos: duration_text(v)))
        target.set_minor_locator(NullLocator())
        set_label(f"{label} (log scale)")
        return values_s, "s"
    finite = [abs(v) for v in values_s if math.isfinite(v)]
    unit, scale = time_unit(max(finite) if finite else 0.0)
    set_label(f"{label} ({unit})")
    return [v / scale for v in values_s], unit


def grid_ticks(ax, values: Iterable[float], axis: str = "x", log: bool | None = None) -> None:
    """The grid's values as the axis's only ticks, written as given (K = 1, 2, 5, 10, not
    2x10^1); log when the grid spans a decade (or as `log` says)."""
    shown = sorted(set(values))
    if log is None:
        log = spans_decades(shown, 1)
    target = ax.xaxis if axis == "x" else ax.yaxis
    if log:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    (ax.set_xticks if axis == "x" else ax.set_yticks)(shown, [f"{v:g}" for v in shown])
    target.set_minor_locator(NullLocator())


def integer_ticks(ax, axis: str = "x") -> None:
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def legend_outside(ax, **options):
    """The legend right of the axes, so that it hides no data."""
    options = {"fontsize": 8, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), **options}
    return ax.legend(**options)


# ---------------------------------------------------------------- lines


def step_xy(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    """The vertices of a value that holds from each x until the next one: y[i] from x[i]
    to x[i+1], a vertical jump there (x0, x1, x1, x2, x2, ...; y0, y0, y1, y1, y2, ...)."""
    xs, ys = [], []
    for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
        if i:
            xs.append(xi)
            ys.append(ys[-1])
        xs.append(xi)
        ys.append(yi)
    return xs, ys


def plot_steps(ax, x, y, label: str | None = None, marker: str = "o", **options):
    """A quantity that only changes at given points (accuracy: at aggregation) as a step
    line, with a marker at each point where it was measured (the even vertices of
    step_xy); returns the line."""
    xs, ys = step_xy(list(x), list(y))
    options = {"ms": 3.5, **options}
    if marker:
        options.update(marker=marker, markevery=slice(0, None, 2))
    (line,) = ax.plot(xs, ys, label=label, **options)
    return line


def plot_band(ax, x, mean, lo, hi, label: str | None = None, step: bool = False, **options):
    """A mean line with the band [lo, hi] shaded in its colour (step: the mean, lo and hi
    held from each x to the next, as plot_steps); returns the mean's line."""
    x, mean, lo, hi = list(x), list(mean), list(lo), list(hi)
    if step:
        sx, smean = step_xy(x, mean)
        _, slo = step_xy(x, lo)
        _, shi = step_xy(x, hi)
    else:
        sx, smean, slo, shi = x, mean, lo, hi
    (line,) = ax.plot(sx, smean, label=label, **options)
    ax.fill_between(sx, slo, shi, color=line.get_color(), alpha=0.2, lw=0)
    return line


# ---------------------------------------------------------------- labels


def _overlap(a, b, pad: float = 0.0) -> float:
    """The area two boxes share, each grown by `pad` on every side."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0) + 2 * pad
    h = min(a.y1, b.y1) - max(a.y0, b.y0) + 2 * pad
    return w * h if w > 0 and h > 0 else 0.0


DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))


def place_labels(ax, xs, ys, texts, fontsize: float = 7, color="black", avoid=()) -> list:
    """Annotate each point (x, y) with its text at the first of the offsets around it (8
    directions, then farther out with a leader line) whose box overlaps no label already
    placed and no point and stays inside the axes, or else the offset with the least
    overlap (`avoid`: other points (x, y) no label should cover); call after the axes'
    limits and layout are final."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    dots = []
    for x, y in [*zip(xs, ys, strict=True), *avoid]:
        px, py = ax.transData.transform((x, y))
        dots.append(Bbox.from_extents(px - 3, py - 3, px + 3, py + 3))
    placed, made = [], []
    for x, y, text in zip(xs, ys, texts, strict=True):
        best = None
        for ring in (1.0, 2.5, 4.0, 5.5):
            for ux, uy in DIRECTIONS:
                note = ax.annotate(
                    text,
                    (x, y),
                    xytext=(5 * ring * ux, 5 * ring * uy),
                    textcoords="offset points",
                    fontsize=fontsize,
                    color=color,
                    ha={1: "left", 0: "center", -1: "right"}[ux],
                    va={1: "bottom", 0: "center", -1: "top"}[uy],
                    arrowprops=None
                    if ring == 1.0
                    else {"arrowstyle": "-", "lw": 0.5, "color": color, "shrinkA": 0},
                )
                box = note.get_window_extent(renderer)
                cost = sum(_overlap(box, other, 1.5) for other in placed + dots)
                cost += 10 * (box.width * box.height - _overlap(box, inside))
                if best is None or cost < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (cost, note, box)
                else:
                    note.remove()
                if cost == 0:
                    break
            if best[0] == 0:
                break
        placed.append(best[2])
        made.append(best[1])
    return made
