"""Per-round event output: events.jsonl lines and the round-timeline PNG (who waited on whom)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from fedjoule.report import figures  # noqa: E402
from fedjoule.report.figures import PlotContext  # noqa: E402

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
    "end_of_run_tail": "#dbdb8d",
    "idle": "#17becf",
}
OTHER = "#7f7f7f"  # the events of a registered energy kind (fedjoule/energy_kinds.py)
# the radio states (simulator/radio_states.py); tail and idle run beside the computation,
# so they are drawn as a thin bar under the row
RADIO_LABELS = {
    "promotion": "radio promotion",
    "tail": "radio tail (connected, no data)",
    "end_of_run_tail": "radio tail after the run's end",
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
    """One dict per transfer or computation of the round's clients, in time order, after
    a `decision` line for each client a policy decided for (its start_s: the allocation's
    instant; the decided band_share, cpu_freq_hz, local_steps; no energy).

    Upload attempts (kind uplink, uplink_aborted) also carry `fade`, the attempt's fading
    power |h|^2; an `uplink` with ok false is a failed attempt (packet error, or with
    channel.rate=fixed a fade below (2^r - 1)/SNR)."""
    events = []
    for rec in records:
        decision = getattr(rec, "decision", None)
        if decision:  # a policy's decisions: an instant that spends nothing (decisions.py)
            line = {"round": round_index, "client": rec.client, "cell": rec.cell,
                    "kind": "decision", **decision}  # fmt: skip
            events.append({**line, "end_s": line.get("start_s"), "energy_j": 0.0})
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


def plot_timeline(
    path: Path,
    row: dict,
    records,
    deadline_s: float | None = None,
    context: PlotContext | None = None,
) -> Path:
    """Gantt chart of one round (numbered from 0, as in rounds.csv): per client, download,
    compute, upload and waiting, against the time since the round's start in the unit its
    length reads best in. `context` names scenario and algorithm in the title (default:
    the scenario.yaml beside `path`)."""
    path = Path(path)
    context = context if context is not None else PlotContext.from_folder(path.parent)
    start, end = row["sim_time_start_s"], row["sim_time_end_s"]
    records = sorted(records, key=lambda rec: rec.client)
    # a deadline far beyond the round's end would squeeze the round into a sliver: it
    # is then named in the legend instead of drawn
    deadline_shown = bool(deadline_s) and deadline_s <= 1.5 * (end - start)
    unit, scale = figures.time_unit(max(end - start, deadline_s if deadline_shown else 0.0))
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(records) + 1.9))
    drawn: set[str] = set()
    for y, rec in enumerate(records):
        _client_row(ax, y, rec, start, end, scale, drawn)
    handles = _timeline_keys(ax, records, drawn, deadline_s, deadline_shown, scale)
    ax.set_yticks(
        range(len(records)), [f"client {rec.client} (cell {rec.cell})" for rec in records]
    )
    ax.invert_yaxis()
    ax.set_xlabel(f"simulated time since the round's start ({unit})")
    ax.set_xlim(left=0)
    what = (
        f"round {int(row['round'])}: {int(row['arrived'])} of {int(row['selected'])} arrived, "
        f"{(end - start) / scale:.3g} {unit}"
    )
    ax.set_title(figures.plot_title(what, context), fontsize=9)
    figures.legend_outside(ax, handles=handles, fontsize=7)
    fig.tight_layout()
    return figures.save_plot(fig, path)


def _client_row(ax, y: int, rec, start: float, end: float, scale: float, drawn: set) -> None:
    """Client `rec`'s bars at row y: its spans (radio tails and idle thin, above), its wait
    until the round's end, a cross and the reason where it left the round; the kinds drawn
    are added to `drawn`."""
    last = start
    for kind, t0, t1, _energy, _bits, _attempt, ok in rec.spans:
        key = "uplink_failed" if kind == "uplink" and not ok else kind
        drawn.add(key)
        if kind in ("tail", "end_of_run_tail", "idle"):
            t0 = max(t0, start)  # a tail from an earlier round: its part in this one
            width, left = (t1 - t0) / scale, (t0 - start) / scale
            ax.barh(y + 0.3, width, left=left, color=COLOURS.get(key, OTHER), height=0.15)
            continue
        left, colour = (t0 - start) / scale, COLOURS.get(key, OTHER)
        ax.barh(y, (t1 - t0) / scale, left=left, color=colour, height=0.7)
        last = max(last, t1)
    if end > last:
        drawn.add("waiting")
        width, left = (end - last) / scale, (last - start) / scale
        ax.barh(y, width, left=left, color=COLOURS["waiting"], height=0.7)
    if rec.outcome != "arrived":
        x_left = (rec.end_s - start) / scale
        ax.plot(x_left, y, "kx")
        # the reason beside the cross on the side with room, inside the axes (a label
        # right of a cross at the round's end would run past the axes' edge)
        right = x_left < 0.5 * (end - start) / scale
        ax.annotate(
            rec.outcome,
            (x_left, y),
            xytext=(6 if right else -6, 0),
            textcoords="offset points",
            ha="left" if right else "right",
            va="center",
            fontsize=7,
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            annotation_clip=True,
        )


def _timeline_keys(ax, records, drawn: set, deadline_s, deadline_shown: bool, scale: float):
    """The legend's handles: each kind drawn, the cross of a client that left, and the
    round's deadline (a dashed line, or named when beyond the right edge)."""
    handles = [
        Patch(color=COLOURS[k], label=v)
        for k, v in {**LABELS, **RADIO_LABELS}.items()
        if k in drawn or (k == "backhaul_down" and "backhaul_up" in drawn)
    ]
    handles += [Patch(color=OTHER, label=k) for k in sorted(drawn - set(COLOURS))]
    if any(rec.outcome != "arrived" for rec in records):
        handles.append(
            plt.Line2D([], [], marker="x", color="k", ls="none", label="client left the round")
        )
    if deadline_shown:
        handles.append(
            ax.axvline(deadline_s / scale, color="k", ls="--", lw=1, label="round deadline")
        )
    elif deadline_s:
        d_unit, d_scale = figures.time_unit(deadline_s)
        note = f"round deadline {deadline_s / d_scale:.3g} {d_unit} (beyond the right edge)"
        handles.append(Patch(color="none", label=note))
    return handles
