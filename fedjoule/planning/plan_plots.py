"""The plan's figures: K* over SNR x bandwidth (E_total annotated), E_total against K and
the break-even staircase K*(x)."""

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from fedjoule.report import figures  # noqa: E402
from fedjoule.report.figures import PlotContext  # noqa: E402


def _target(scenario) -> str:
    t = scenario.training
    if t.target_value is None:
        return "the target"
    return f"{figures.metric_label(t.target_metric)} ≥ {t.target_value:g}"


def _title(what: str, scenario) -> str:
    return figures.plot_title(what, PlotContext.from_scenario(scenario))


def _hz(value: float) -> str:
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} Hz"


def plot_kstar_heatmap(
    path: Path, best: list[dict], snrs, bandwidths, scenario, k_values=None
) -> Path:
    """Rows: SNR (high at the top); columns: bandwidth; colour: log K* on the scale of the
    K grid; text: K* and E_total (with --seeds: the mean ± 95 % CI, and "≈ K ..." the K
    whose mean energy is within the CIs of K*'s)."""
    snr_rows = sorted(snrs, reverse=True)
    grid = np.full((len(snr_rows), len(bandwidths)), np.nan)
    seeded = any("indistinguishable" in b for b in best)
    cell_w, cell_h = (2.0, 1.1) if seeded else (1.6, 0.9)
    fig, ax = plt.subplots(figsize=(cell_w * len(bandwidths) + 2.2, cell_h * len(snr_rows) + 1.6))
    ks = [b["K_star"] for b in best if b["K_star"] is not None] or [1]
    k_values = list(k_values) if k_values else ks
    for b in best:
        i, j = snr_rows.index(b["snr_db"]), list(bandwidths).index(b["bandwidth_hz"])
        if b["K_star"] is not None:
            grid[i, j] = math.log10(b["K_star"])
    vmin, vmax = math.log10(min(k_values)), math.log10(max(k_values))
    image = ax.imshow(
        np.ma.masked_invalid(grid), cmap="viridis", vmin=vmin, vmax=max(vmax, vmin + 1e-9)
    )
    for b in best:
        i, j = snr_rows.index(b["snr_db"]), list(bandwidths).index(b["bandwidth_hz"])
        if b["K_star"] is None:
            text, colour = "no K\nreaches", "black"
        else:
            text = f"K*={b['K_star']}\n{b['E_total_j']:.3g} J"
            if b.get("E_total_j_ci95") is not None:  # --seeds: mean +- CI, the like K
                text += f" ± {b['E_total_j_ci95']:.2g}"
            same = [k for k in b.get("indistinguishable", []) if k != b["K_star"]]
            if same:
                text += "\n≈ K " + ",".join(map(str, same))
            colour = "white" if image.norm(grid[i, j]) < 0.5 else "black"
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    ax.set_xticks(range(len(bandwidths)), [_hz(b) for b in bandwidths])
    ax.set_yticks(range(len(snr_rows)), [f"{s:g} dB" for s in snr_rows])
    ax.set_xlabel("uplink bandwidth")
    ax.set_ylabel("SNR")
    ax.set_title(_title(f"K* = argmin E_total to {_target(scenario)}", scenario), fontsize=9)
    bar = fig.colorbar(image, ax=ax)
    shown = sorted(set(k_values))
    bar.set_ticks([math.log10(k) for k in shown], labels=[str(k) for k in shown])
    bar.ax.yaxis.set_minor_locator(plt.NullLocator())
    bar.set_label("K* (colour on a log scale; ticks: the K grid)")
    fig.tight_layout()
    return figures.save_plot(fig, path)


NOT_REACHED_ROW = 0.035  # axes fraction per cell in the 'not reached' band at the top


def plot_energy_vs_k(path: Path, table: list[dict], cells, scenario) -> Path:
    """E_total against K for the chosen cells: every K of the grid a tick and a point, a
    K that never reached the target a hollow marker in the 'not reached' band at the top
    (one row per cell), the line broken there; K* circled; with --seeds (plan.csv's
    E_total_j_ci95) whiskers for the 95 % CI of the mean (on a log axis the lower whisker
    stops above 0). Log axes where the K grid (one decade) or the energies (one decade)
    span decades."""
    mine = {
        cell: sorted(
            (r for r in table if (r["snr_db"], r["bandwidth_hz"]) == tuple(cell)),
            key=lambda r: r["K"],
        )
        for cell in map(tuple, cells)
    }
    ks = sorted({r["K"] for rows in mine.values() for r in rows} or {r["K"] for r in table})
    short = [cell for cell, rows in mine.items() if any(not r["reached"] for r in rows)]
    band = NOT_REACHED_ROW * (len(short) + 1) if short else 0.0
    fig, ax = plt.subplots(figsize=(8.2, 4.4))
    figures.grid_ticks(ax, ks, "x")
    log_y = _energy_axis(ax, mine, band)
    handles = [_plot_cell(ax, cell, rows, short, log_y) for cell, rows in mine.items()]
    handles += _energy_vs_k_keys(ax, mine, short, band)
    ax.set_xlabel("local steps K (the plan's K grid)")
    ax.set_ylabel("E_total to target (J)")
    ax.set_title(_title(f"energy to {_target(scenario)} against K", scenario), fontsize=9)
    figures.legend_outside(ax, handles=handles, title="cell: SNR, bandwidth", title_fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return figures.save_plot(fig, path)


def _energy_axis(ax, mine: dict, band: float) -> bool:
    """The energy axis of plot_energy_vs_k: the reached energies (and their CI whiskers)
    in the lower (1 - band - margin) of the axes, log where they span a decade, ticks
    below the 'not reached' band; whether it is log."""
    reach = [r for rows in mine.values() for r in rows if r["reached"]]
    energies = [r["E_total_j"] for r in reach]
    if not energies:
        ax.set_yticks([])
        note = "no K reaches the target in these cells"
        ax.text(0.5, 0.45, note, transform=ax.transAxes, ha="center", color="dimgrey")
        return False
    log = figures.log_axis_if_spans(ax, energies, "y", decades=1)
    hi = max(r["E_total_j"] + (r.get("E_total_j_ci95") or 0.0) for r in reach)
    lo = (
        min(energies)
        if log
        else min(max(r["E_total_j"] - (r.get("E_total_j_ci95") or 0.0), 0.0) for r in reach)
    )
    if log:  # the data in the lower (1 - band - margin) of the axes
        span = math.log10(hi / lo) or 1.0
        top = 10 ** (math.log10(hi) + span * (band + 0.05) / (0.95 - band))
        bottom = lo / 10 ** (0.05 * span)
        band_low = 10 ** (math.log10(top) - band * (math.log10(top / bottom)))
    else:
        span = (hi - lo) or abs(hi) or 1.0
        bottom, top = lo - 0.05 * span, hi + span * (band + 0.05) / (0.95 - band)
        band_low = top - band * (top - bottom)
    ax.set_ylim(bottom, top)
    if log:  # labelled ticks at round values, at least 3 of them (1, 2, 5 x 10^k)
        figures.log_value_ticks(ax, bottom, band_low, "y")
    ax.set_yticks([t for t in ax.get_yticks() if bottom <= t <= band_low])  # none in the band
    ax.yaxis.set_minor_locator(plt.NullLocator())
    return log


def _plot_cell(ax, cell: tuple, rows: list[dict], short: list, log_y: bool):
    """One cell's line of plot_energy_vs_k: reached energies, CI whiskers, K* circled,
    the K that missed as hollow markers in the cell's row of the 'not reached' band."""
    label = f"{cell[0]:g} dB, {_hz(cell[1])}"
    y = [r["E_total_j"] if r["reached"] else math.nan for r in rows]
    (line,) = ax.plot([r["K"] for r in rows], y, "o-", label=label)
    ci = [(r["K"], r["E_total_j"], r.get("E_total_j_ci95")) for r in rows if r["reached"]]
    if any(c is not None for _, _, c in ci):  # --seeds: whiskers, the 95 % CI of the mean
        ax.errorbar(
            [k for k, _, _ in ci],
            [e for _, e, _ in ci],
            yerr=[  # the lower whisker stops at 0 J (above it on a log axis)
                [min(c or 0.0, e * 0.999 if log_y else e) for _, e, c in ci],
                [c or 0.0 for _, _, c in ci],
            ],
            fmt="none",
            capsize=3,
            color=line.get_color(),
        )
    for r in rows:
        if r["is_best"]:
            ax.plot(r["K"], r["E_total_j"], "o", ms=13, mfc="none", color=line.get_color())
    missed = [r["K"] for r in rows if not r["reached"]]
    if missed:
        row_y = 1 - NOT_REACHED_ROW * (short.index(cell) + 1)
        ax.plot(
            missed,
            [row_y] * len(missed),
            "o",
            mfc="none",
            mew=1.5,
            color=line.get_color(),
            transform=blended_transform_factory(ax.transData, ax.transAxes),
            clip_on=False,
        )
    if not any(r["reached"] for r in rows):
        line.set_label(label + " (no K reaches)")
    return line


def _energy_vs_k_keys(ax, mine: dict, short: list, band: float) -> list:
    """The 'not reached' band (shaded, named) and the legend's keys for its markers, K*
    and the seeds' whiskers, where the plot has them."""
    keys = []
    if short:
        ax.add_patch(
            Rectangle((0, 1 - band), 1, band, transform=ax.transAxes, color="0.92", zorder=0)
        )
        ax.text(
            -0.01, 1 - band / 2, "not reached", transform=ax.transAxes, fontsize=8, va="center"
        ).set_horizontalalignment("right")
        keys.append(
            plt.Line2D(
                [], [], marker="o", mfc="none", mec="black", ls="none", label="K not reached"
            )
        )
    if any(r["is_best"] for rows in mine.values() for r in rows):
        keys.append(
            plt.Line2D(
                [], [], marker="o", ms=13, mfc="none", mec="black", ls="none", label="K* (least E)"
            )
        )
    if any(r.get("E_total_j_ci95") is not None for rows in mine.values() for r in rows):
        keys.append(
            plt.Line2D([], [], marker="_", ms=8, color="black", label="mean ± 95 % CI (seeds)")
        )
    return keys


BANDWIDTH_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")


def plot_kstar_breakeven(
    path: Path, rounds_by_k: dict, segments: list, cells: list[dict], snrs, bandwidths, scenario
) -> Path:
    """K*(x) = argmin_K R(K)(K + x) as a staircase over x (log), from `segments`
    (breakeven.breakpoints of `rounds_by_k`: (x_low, x_high, K)), a decade beyond the
    cells and breakpoints on each side; every cell ({snr_db, bandwidth_hz, x, K_star}) a
    marker at its x and its K* from the energies: colour SNR, shape bandwidth."""
    placed = [c for c in cells if c["x"] is not None and c["K_star"] is not None and c["x"] > 0]
    inner = [hi for _, hi, _ in segments[:-1] if hi > 0]
    span = [c["x"] for c in placed] + inner
    lo, hi = (min(span) / 10, max(span) * 10) if span else (1e-2, 1e2)
    fig, ax = plt.subplots(figsize=(8.4, 4.6))
    _staircase(ax, rounds_by_k, segments, lo, hi)
    handles, labels = ax.get_legend_handles_labels()
    for handle, label in _cell_markers(ax, placed, snrs, bandwidths):
        handles.append(handle)
        labels.append(label)
    figures.legend_outside(ax, handles=handles, labels=labels, fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    shown = sorted(rounds_by_k)
    ax.set_ylim(min(shown) / 1.6, max(shown) * 1.8)
    figures.grid_ticks(ax, shown, "y", log=True)
    ax.set_xlabel("x = (E_tx + E_rx) per round / E_compute per local step  (J/J, dimensionless)")
    ax.set_ylabel("K* (local steps, log scale)")
    ax.set_title(
        _title(
            f"break-even K* to {_target(scenario)} (line: K* from R(K) alone; "
            "markers: the grid's cells at their x and K*)",
            scenario,
        ),
        fontsize=9,
    )
    ax.grid(True, which="major", axis="x", alpha=0.3)
    fig.tight_layout()
    return figures.save_plot(fig, path)


def _staircase(ax, rounds_by_k: dict, segments: list, lo: float, hi: float) -> None:
    """The K*(x) staircase between lo and hi, each step labelled with K* and R(K*), each
    breakpoint a dotted line with its x."""
    edges, levels = [lo], []
    for x_low, x_high, k in segments:
        if x_high <= lo or x_low >= hi:
            continue
        levels.append(k)
        edges.append(min(x_high, hi))
    ax.stairs(
        levels,
        edges,
        baseline=None,
        color="black",
        lw=1.8,
        zorder=2,
        label="K*(x) = argmin$_K$ R(K)(K + x)",
    )
    for x_low, k in zip(edges[:-1], levels, strict=True):
        text = f"K*={k} (R={rounds_by_k[k]})"
        ax.text(x_low * 1.15, k * 1.2, text, ha="left", va="bottom", fontsize=8)
    for x in edges[1:-1]:
        ax.axvline(x, color="grey", ls=":", lw=1, zorder=1)
        ax.annotate(
            f"x = {x:.3g}",
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -3),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=7,
            color="dimgrey",
        )


def _cell_markers(ax, placed: list[dict], snrs, bandwidths) -> list[tuple]:
    """Each placed cell a marker at (x, K*), colour its SNR, shape its bandwidth; the
    legend's (handle, label) for every SNR and every bandwidth."""
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, max(len(snrs), 1)))
    snr_index = {s: i for i, s in enumerate(sorted(snrs))}
    bw_index = {b: j for j, b in enumerate(sorted(bandwidths))}
    for c in placed:
        ax.plot(
            c["x"],
            c["K_star"],
            BANDWIDTH_MARKERS[bw_index[c["bandwidth_hz"]] % 10],
            ms=8,
            mfc=colours[snr_index[c["snr_db"]]],
            mec="black",
            mew=0.6,
            ls="none",
            zorder=3,
            alpha=0.9,
        )
    keys = []
    for s in sorted(snrs):
        marker = dict(marker="o", mfc=colours[snr_index[s]], mec="black", mew=0.6, ms=7)
        keys.append((plt.Line2D([], [], ls="none", **marker), f"SNR {s:g} dB"))
    for b in sorted(bandwidths):
        shape = BANDWIDTH_MARKERS[bw_index[b] % 10]
        marker = dict(marker=shape, mfc="white", mec="black", ms=7)
        keys.append((plt.Line2D([], [], ls="none", **marker), f"bandwidth {_hz(b)}"))
    return keys
