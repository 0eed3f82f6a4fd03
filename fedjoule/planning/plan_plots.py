"""The plan's figures: K* over SNR x bandwidth (E_total annotated), E_total against K and
the break-even staircase K*(x)."""

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedjoule.storage import save_figure  # noqa: E402


def _target(scenario) -> str:
    t = scenario.training
    return f"{t.target_metric} >= {t.target_value:g}"


def _hz(value: float) -> str:
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} Hz"


def plot_kstar_heatmap(
    path: Path, best: list[dict], snrs, bandwidths, scenario, k_values=None
) -> Path:
    """Rows: SNR (high at the top); columns: bandwidth; colour: log K* on the scale of the
    K grid; text: K* and E_total."""
    snr_rows = sorted(snrs, reverse=True)
    grid = np.full((len(snr_rows), len(bandwidths)), np.nan)
    fig, ax = plt.subplots(figsize=(1.6 * len(bandwidths) + 2.2, 0.9 * len(snr_rows) + 1.6))
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
            colour = "white" if image.norm(grid[i, j]) < 0.5 else "black"
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    ax.set_xticks(range(len(bandwidths)), [_hz(b) for b in bandwidths])
    ax.set_yticks(range(len(snr_rows)), [f"{s:g} dB" for s in snr_rows])
    ax.set_xlabel("uplink bandwidth")
    ax.set_ylabel("SNR")
    ax.set_title(f"{scenario.name}: K* = argmin E_total to {_target(scenario)}", fontsize=9)
    bar = fig.colorbar(image, ax=ax)
    shown = sorted(set(k_values))
    bar.set_ticks([math.log10(k) for k in shown], labels=[str(k) for k in shown])
    bar.set_label("K* (log scale)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_energy_vs_k(path: Path, table: list[dict], cells, scenario) -> Path:
    """E_total (log) against K (log) for the chosen cells; K* circled; unreached K left out."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for snr, bw in cells:
        rows = [r for r in table if (r["snr_db"], r["bandwidth_hz"]) == (snr, bw)]
        reached = [r for r in rows if r["reached"]]
        label = f"{snr:g} dB, {_hz(bw)}"
        if not reached:
            ax.plot([], [], label=label + " (no K reaches)")
            continue
        (line,) = ax.plot(
            [r["K"] for r in reached], [r["E_total_j"] for r in reached], "o-", label=label
        )
        for r in reached:
            if r["is_best"]:
                ax.plot(r["K"], r["E_total_j"], "o", ms=12, mfc="none", color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("local steps K")
    ax.set_ylabel("E_total to target (J)")
    ax.set_title(f"{scenario.name}: energy to {_target(scenario)} (K* circled)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


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
    handles, labels = ax.get_legend_handles_labels()
    for s in sorted(snrs):
        handles.append(
            plt.Line2D(
                [], [], marker="o", ls="none", mfc=colours[snr_index[s]], mec="black", mew=0.6, ms=7
            )
        )
        labels.append(f"SNR {s:g} dB")
    for b in sorted(bandwidths):
        handles.append(
            plt.Line2D(
                [],
                [],
                marker=BANDWIDTH_MARKERS[bw_index[b] % 10],
                ls="none",
                mfc="white",
                mec="black",
                ms=7,
            )
        )
        labels.append(f"bandwidth {_hz(b)}")
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    shown = sorted(rounds_by_k)
    ax.set_ylim(min(shown) / 1.6, max(shown) * 1.8)
    ax.set_yticks(shown, [str(k) for k in shown])
    ax.yaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlabel("x = (E_tx + E_rx) per round / E_compute per local step  (J/J, dimensionless)")
    ax.set_ylabel("K* (local steps, log scale)")
    ax.set_title(
        f"{scenario.name}: break-even K* to {_target(scenario)}\n"
        "line: K* from R(K) alone; markers: the grid's cells at their x and K*",
        fontsize=9,
    )
    ax.grid(True, which="major", axis="x", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
