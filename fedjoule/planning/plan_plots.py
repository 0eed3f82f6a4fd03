"""The plan's figures: K* over SNR x bandwidth (E_total annotated) and E_total against K."""

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
