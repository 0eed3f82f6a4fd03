"""What every plot shares: the formats a plot is saved in, titles naming scenario and
algorithm, time axes in s, min, h or days, log axes where the data spans decades, the
target line, accuracy as a step function of time, mean-and-band lines, grid ticks and
labels placed so that they do not collide.

Styles (`--plot-style`, set_plot_style / plot_style): the default look; `paper`, the
style file paper.mplstyle shipped beside this module plus, when a plot is saved, no
titles, every figure 3.5 in wide (one column of a two-column paper; the height keeps the
plot's aspect), axis labels 8 pt and tick labels, legends and notes 7 pt, legends above
the axes; or a matplotlib style file (FILE.mplstyle) whose font sizes (and figure width,
where it sets figure.figsize) every plot takes. Mirrored in FEDJOULE_PLOT_STYLE as the
formats are.

Formats: a plot is always written as PNG (the path its function is given); PDF and SVG
copies next to it on request, for the process, through `set_plot_formats(["png", "pdf"])`
or, for a block, `with plot_formats(["svg"]): ...`. The setting is mirrored in the
environment variable FEDJOULE_PLOT_FORMATS (comma-separated), so that the processes a
local sweep spawns for its runs write the same formats. Both settings live in
plot_settings.py (light to import: the command line sets them before anything is drawn)
and are re-exported here.
"""

import json
import math
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    MaxNLocator,
    NullLocator,  # noqa: E402
)
from matplotlib.transforms import Bbox

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.report import plot_settings
from fedjoule.report.plot_settings import FORMATS_ENV as FORMATS_ENV
from fedjoule.report.plot_settings import PAPER, STYLE_ENV, current_formats, current_style
from fedjoule.report.plot_settings import check_formats as check_formats
from fedjoule.report.plot_settings import check_style as check_style
from fedjoule.report.plot_settings import plot_formats as plot_formats
from fedjoule.report.plot_settings import plot_style as plot_style
from fedjoule.report.plot_settings import set_plot_formats as set_plot_formats
from fedjoule.report.plot_settings import set_plot_style as set_plot_style
from fedjoule.scenarios.yaml_reader import parse_yaml
from fedjoule.storage import save_figure  # noqa: E402

DPI = 110
PAPER_WIDTH_IN = 3.5  # one column of a two-column paper (IEEE, ACM: 3.3 to 3.5 in)
PAPER_FONT_PT = 8  # axis labels
PAPER_SMALL_PT = 7  # tick labels, legends, notes on the plot
PAPER_LEGEND_CHARS = 24  # a legend label this long or shorter: two legend columns


def _points(size) -> float:
    return FontProperties(size=size).get_size_in_points()


def style_sizes(style: str | None) -> dict[str, float]:
    """The font sizes (pt) a style gives each kind of text: title, label, tick, legend,
    note (paper: 8 pt labels, 7 pt the rest; a style file: its rc values)."""
    if style == PAPER:
        small = PAPER_SMALL_PT
        return dict(title=PAPER_FONT_PT, label=PAPER_FONT_PT, tick=small, legend=small, note=small)
    rc = matplotlib.rcParams
    return dict(
        title=_points(rc["axes.titlesize"]),
        label=_points(rc["axes.labelsize"]),
        tick=_points(rc["xtick.labelsize"]),
        legend=_points(rc["legend.fontsize"]),
        note=_points(rc["legend.fontsize"]),
    )


def style_width_in(style: str | None) -> float | None:
    """The figure width a style fixes: paper 3.5 in; a style file its figure.figsize's
    width where it sets one; else None (each plot its own size)."""
    if style == PAPER:
        return PAPER_WIDTH_IN
    if style is None:
        return None
    given = matplotlib.rc_params_from_file(style, use_default_template=False)
    return float(given["figure.figsize"][0]) if "figure.figsize" in given else None


def restyle(fig, style: str | None = None) -> None:
    """Fit a finished figure to the current style (nothing for the default): titles off
    (paper), every text at the style's size for its kind, the style's width (the height
    keeping the plot's aspect), the layout redone."""
    style = current_style() if style is None else style
    if style is None:
        return
    sizes = style_sizes(style)
    titles, labels, ticks, legends = set(), set(), set(), set()
    for ax in fig.axes:
        titles.update((ax.title, ax._left_title, ax._right_title))
        labels.update((ax.xaxis.label, ax.yaxis.label))
        ax.tick_params(axis="both", which="both", labelsize=sizes["tick"])
        for axis in (ax.xaxis, ax.yaxis):
            ticks.update(axis.get_ticklabels(which="both"))
            ticks.add(axis.get_offset_text())
        if ax.get_legend() is not None:
            legends.update(ax.get_legend().findobj(matplotlib.text.Text))
    for legend in fig.legends:
        legends.update(legend.findobj(matplotlib.text.Text))
    if fig._suptitle is not None:
        titles.add(fig._suptitle)
    for text in fig.findobj(matplotlib.text.Text):
        if text in titles:
            if style == PAPER:
                text.set_text("")
            text.set_fontsize(sizes["title"])
        elif text in labels:
            text.set_fontsize(sizes["label"])
        elif text in ticks:
            text.set_fontsize(sizes["tick"])
        elif text in legends:
            text.set_fontsize(sizes["legend"])
        else:
            text.set_fontsize(sizes["note"])
    width = style_width_in(style)
    if width is not None:
        w, h = fig.get_size_inches()
        if not hasattr(fig, "_fedjoule_aspect"):  # (restyled twice: the first aspect)
            fig._fedjoule_aspect = h / w
        plot_h = max(width * fig._fedjoule_aspect, 0.6 * width)
        fig.set_size_inches(width, plot_h)
        with warnings.catch_warnings():  # (a tall legend: the figure grows for it below)
            warnings.filterwarnings("ignore", message="Tight layout not applied")
            fig.tight_layout()
        # room for legends above or beside the axes: the figure grows by their height
        renderer = fig.canvas.get_renderer()
        extra = 0.0
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is not None and style == PAPER:
                extra = max(extra, legend.get_window_extent(renderer).height / fig.dpi)
        fig.set_size_inches(width, plot_h + extra)
    fig.tight_layout()


def save_plot(fig, path_png: Path, dpi: int = DPI) -> Path:
    """Save `fig` at `path_png` and, for each other requested format, beside it with that
    suffix (atomically), in the current style (restyle), close it; returns the PNG's
    path."""
    path_png = Path(path_png)
    restyle(fig)
    if current_style() == PAPER:
        dpi = max(dpi, 300)  # print resolution
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
    protocol: str | None = None  # protocol.kind (None: not known, sync)

    @classmethod
    def from_scenario(cls, scenario) -> "PlotContext":
        t = scenario.training
        return cls(
            scenario.name,
            scenario.algorithm.name,
            t.target_metric,
            t.target_value,
            scenario.protocol.kind,
        )

    @classmethod
    def from_folder(cls, folder: Path) -> "PlotContext":
        """A run folder's scenario.yaml (name, algorithm, target); summary.json's target
        where the scenario cannot be read. Whatever cannot be read stays None."""
        folder = Path(folder)
        name = algorithm = metric = value = protocol = None
        try:
            raw = parse_yaml((folder / "scenario.yaml").read_text(), "scenario.yaml")
            name = raw.get("name")
            algorithm = (raw.get("algorithm") or {}).get("name")
            protocol = (raw.get("protocol") or {}).get("kind")
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
            None if protocol is None else str(protocol),
        )


def _names(values: Iterable[str | None], what: str) -> str | None:
    distinct = sorted({v for v in values if v})
    if not distinct:
        return None
    if len(distinct) <= 3:
        return f"{what}{'s' if len(distinct) > 1 else ''} {', '.join(distinct)}"
    return f"{len(distinct)} {what}s"


def plot_title(what: str, contexts: "PlotContext | Sequence[PlotContext]" = ()) -> str:
    """`what`, then a second line naming the scenario(s), algorithm(s) and, where one is
    not sync, the protocol(s)."""
    if isinstance(contexts, PlotContext):
        contexts = [contexts]
    protocols = {c.protocol for c in contexts if c.protocol}
    parts = [
        _names((c.scenario for c in contexts), "scenario"),
        _names((c.algorithm for c in contexts), "algorithm"),
        _names(protocols, "protocol") if protocols - {"sync"} else None,
    ]
    parts = [p for p in parts if p]
    return what + ("\n" + " · ".join(parts) if parts else "")


def round_label(contexts: "Sequence[PlotContext]") -> str:
    """What a rounds.csv row counts (docs/protocols.md): a round under sync (and
    hierarchical: a cloud round), a server version under async and buffered."""
    protocols = {c.protocol or "sync" for c in contexts}
    if protocols <= {"sync"}:
        return "round"
    if protocols <= {"hierarchical"}:
        return "cloud round"
    return "server version" if protocols <= {"async", "buffered"} else "round or version"


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


def log_value_ticks(ax, low: float, high: float, axis: str = "y", least: int = 3) -> list[float]:
    """Labelled ticks of a log axis showing [low, high]: the decades where at least `least`
    of them lie inside, else 1, 2, 5 x 10^k, else 1..9 x 10^k, each written as a plain
    number (0.5, 2, 20), so that the axis never has a single labelled tick; returns them."""
    first, last = math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1
    ticks: list[float] = []
    for mantissas in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [
            float(f"{m * 10.0**k:.12g}")
            for k in range(first, last + 1)
            for m in mantissas
            if low <= m * 10.0**k <= high
        ]
        if len(ticks) >= least:
            break
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    return ticks


def integer_ticks(ax, axis: str = "x") -> None:
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def legend_outside(ax, **options):
    """The legend right of the axes, so that it hides no data (paper style: above the
    axes, where the title was, in two columns)."""
    if current_style() == PAPER:
        labels = options.get("labels")
        if labels is None:
            handles = options.get("handles") or ax.get_legend_handles_labels()[0]
            labels = [h.get_label() for h in handles]
        wide = max((len(line) for t in labels for line in str(t).splitlines()), default=0)
        options = {
            **options,
            "loc": "lower center",
            "bbox_to_anchor": (0.5, 1.02),
            "ncol": 2 if len(labels) > 1 and wide <= PAPER_LEGEND_CHARS else 1,
        }
        return ax.legend(**options)
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


def plot_steps(
    ax, x, y, label: str | None = None, marker: str = "o", offset: int = 0, of: int = 1, **options
):
    """A quantity that only changes at given points (accuracy: at aggregation) as a step
    line, with a marker at each point where it was measured (the even vertices of
    step_xy; `offset` of `of`: every of-th point from the offset-th, so that series that
    coincide show their markers at different points); returns the line."""
    xs, ys = step_xy(list(x), list(y))
    options = {"ms": 3.5, **options}
    if marker:
        options.update(marker=marker, markevery=slice(2 * offset, None, 2 * max(of, 1)))
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


# ---------------------------------------------------------------- coinciding series

COINCIDE_FRACTION = 0.02  # series closer than this share of the y span look like one line
# the dash patterns of series that coincide: the first solid, the later ones on top
COINCIDE_DASHES = ("-", (0, (5, 3)), (0, (1, 2)), (0, (6, 2, 1, 2)))


def coinciding(
    series: Sequence[tuple], fraction: float = COINCIDE_FRACTION, span: float | None = None
) -> list:
    """For each series (x, y), None, or (i, exact): the first earlier series i it would
    hide or be hidden by (the same x and every |y - y_i| within `fraction` of `span`, the
    plot's y range, by default that of all the series' y), exact True where the values
    are equal."""
    ys = [float(v) for _, y in series for v in y if v == v]
    if span is None:
        span = (max(ys) - min(ys)) if ys else 0.0
    tolerance = fraction * span if span > 0 else 1e-12
    found = []
    for k, (x, y) in enumerate(series):
        match = None
        for i in range(k):
            if found[i] is not None:  # compare with the first of each group
                continue
            xi, yi = series[i]
            if len(xi) != len(x) or len(x) == 0 or not np.array_equal(xi, x):
                continue
            diff = np.abs(np.asarray(yi, dtype=float) - np.asarray(y, dtype=float))
            if np.all(np.isnan(diff) | (diff <= tolerance)):
                match = (i, bool(np.nanmax(diff) == 0) if np.any(diff == diff) else True)
                break
        found.append(match)
    return found


def coincide_styles(
    labels: Sequence[str], series: Sequence[tuple], span: float | None = None
) -> list[dict]:
    """The label, dash pattern, z-order and marker offset of each series so that series
    that coincide are all visible: the first of a group solid, each later one dashed on
    top of it, its markers at other points, and its label saying whom it coincides with
    ('fedprox (= fedavg)'; '≈' where the values differ by less than COINCIDE_FRACTION of
    the plot's span)."""
    matches = coinciding(series, span=span)
    position = [0] * len(series)
    groups: dict[int, int] = {}
    styles = []
    for k, match in enumerate(matches):
        style = {"label": labels[k], "ls": "-", "zorder": 2, "offset": 0, "of": 1}
        if match is not None:
            first, exact = match
            groups[first] = groups.get(first, 1) + 1
            position[k] = groups[first] - 1
            style.update(
                label=f"{labels[k]} ({'=' if exact else '≈'} {labels[first]})",
                ls=COINCIDE_DASHES[position[k] % len(COINCIDE_DASHES)],
                zorder=2 + position[k],
                offset=position[k],
            )
        styles.append(style)
    for k, match in enumerate(matches):  # markers spread over the group's members
        first = k if match is None else match[0]
        styles[k]["of"] = groups.get(first, 1)
    return styles


def merge_close_points(ax, xs, ys, texts, pixels: float = 6.0):
    """Points whose labels would print on top of each other (closer than `pixels` on the
    axes) merged into one point labelled with their texts joined ('1, 3'); returns the
    merged (xs, ys, texts). Call after the axes' limits are final."""
    merged: list[list] = []
    for x, y, text in zip(xs, ys, texts, strict=True):
        px = ax.transData.transform((x, y))
        for m in merged:
            if abs(m[3][0] - px[0]) <= pixels and abs(m[3][1] - px[1]) <= pixels:
                m[2].append(text)
                break
        else:
            merged.append([x, y, [text], px])
    return [m[0] for m in merged], [m[1] for m in merged], [", ".join(m[2]) for m in merged]


if os.environ.get(STYLE_ENV):  # a process started by one that set a style draws in it
    try:
        current_style()
    except FedjouleError:  # (a style file gone since: the default look)
        plot_settings.PLOT_STYLE = None
