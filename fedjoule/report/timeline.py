"""Per-round event output: events.jsonl lines and the round-timeline PNG (who waited on whom)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from fedjoule.storage import save_figure  # noqa: E402

COLOURS = {
    "backhaul_down": "#9467bd",
    "downlink": "#1f77b4",
    "compute": "#ff7f0e",
    "queue": "#d9d9d9",
    "uplink": "#2ca02c",
    "uplink_failed": "#d62728",
    "uplink_aborted": "#8c564b",
    "backhaul_up": "#9467bd",
    "waiting": "#f2f2f2",
    "promotion": "#e377c2",
    "tail": "#bcbd22",
    "idle": "#17becf",
}
# the radio states (simulator/radio_states.py); tail and idle run beside the computation,
# so they are drawn as a thin bar under the row
RADIO_LABELS = {
    "promotion": "radio promotion",
    "tail": "radio tail (connected, no data)",
    "idle": "radio idle",
}
LABELS = {
    "downlink": "download",
    "compute": "compute",
    "uplink": "upload",
    "uplink_failed": "failed attempt (packet error)",
    "uplink_aborted": "upload cut off",
    "queue": "queued for the medium",
    "backhaul_down": "backhaul",
    "waiting": "waiting for the round",
}


def event_dicts(round_index: int, records) -> list[dict]:
    """One dict per transfer or computation of the round's clients, in time order.

    Upload attempts (kind uplink, uplink_aborted) also carry `fade`, the attempt's fading
    power |h|^2; an `uplink` with ok false is a failed attempt (packet error, or with
    channel.rate=fixed a fade below (2^r - 1)/SNR)."""
    events = []
    for rec in records:
        fades = getattr(rec, "uplink_fades", None)
        for kind, start_s, end_s, energy_j, bits, attempt, ok in rec.spans:
            extra = {}
            if fades is not None and attempt is not None and kind in ("uplink", "uplink_aborted"):
                extra["fade"] = fades[attempt]
            events.append(
                {
                    "round": round_index,
                    "client": rec.client,
                    "cell": rec.cell,
                    "kind": kind,
                    "start_s": start_s,
                    "end_s": end_s,
                    "energy_j": energy_j,
                    "bits": bits,
                    "attempt": attempt,
                    "ok": bool(ok),
                    "outcome": rec.outcome,
                    **extra,
                }
            )
    events.sort(key=lambda e: (e["start_s"], e["client"]))
    return events


def events_text(round_index: int, records) -> str:
    """The round's events as events.jsonl lines (one JSON object a line)."""
    return "".join(json.dumps(e) + "\n" for e in event_dicts(round_index, records))


def plot_timeline(path: Path, row: dict, records, deadline_s: float | None = None) -> Path:
    """Gantt chart of one round: per client, download, compute, upload and waiting."""
    start, end = row["sim_time_start_s"], row["sim_time_end_s"]
    records = sorted(records, key=lambda rec: rec.client)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(records) + 1.6))
    for y, rec in enumerate(records):
        last = start
        for kind, t0, t1, _energy, _bits, _attempt, ok in rec.spans:
            key = "uplink_failed" if kind == "uplink" and not ok else kind
            if kind in ("tail", "idle"):
                t0 = max(t0, start)  # a tail from an earlier round: its part in this one
                ax.barh(y + 0.3, t1 - t0, left=t0 - start, color=COLOURS[key], height=0.15)
                continue
            ax.barh(y, t1 - t0, left=t0 - start, color=COLOURS[key], height=0.7)
            last = max(last, t1)
        if end > last:
            ax.barh(y, end - last, left=last - start, color=COLOURS["waiting"], height=0.7)
        if rec.outcome != "arrived":
            ax.plot(rec.end_s - start, y, "kx")
            ax.text(rec.end_s - start, y, f" {rec.outcome}", va="center", fontsize=7)
    if deadline_s:
        ax.axvline(deadline_s, color="k", ls="--", lw=1)
    ax.set_yticks(
        range(len(records)), [f"client {rec.client} (cell {rec.cell})" for rec in records]
    )
    ax.invert_yaxis()
    ax.set_xlabel(f"simulated time since the round's start (s); round {int(row['round'])}")
    ax.set_title(
        f"round {int(row['round'])}: {int(row['arrived'])} of {int(row['selected'])} arrived, "
        f"{end - start:.3g} s"
    )
    kinds = {span[0] for rec in records for span in rec.spans}
    labels = {**LABELS, **{k: v for k, v in RADIO_LABELS.items() if k in kinds}}
    ax.legend(
        handles=[Patch(color=COLOURS[k], label=v) for k, v in labels.items()],
        fontsize=7,
        loc="lower right",
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return Path(path)
