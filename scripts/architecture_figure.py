"""Draw docs/img/architecture.png: fedjoule's layers (left) and one round's data flow
(right), the picture of docs/architecture.md.

    .venv/bin/python scripts/architecture_figure.py

The boxes name the modules; when a module moves, change it here and run the script again.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "architecture.png"

# (title, modules), top to bottom: each layer imports only the layers below it
LAYERS = [
    ("command line | Python API", "cli.py, cli_views.py | api.py, api_views.py"),
    ("commands", "commands/: run, sweep, plan, capacity, validate, report"),
    ("studies", "planning/: sweep, plan (replay), capacity; seeds.py"),
    ("engines", "simulator/: the round kernel (round.py), protocols/, policy_step.py,\n"
     "engine.py, system_simpy.py (SimPy), system.py (numpy)"),
    ("models", "devices/ (compute, radio, battery), channel/, algorithms/ + executor,\n"
     "models/, data/, policies/ (selectors, allocators)"),
    ("one list each", "energy_kinds.py, scenarios/ (schema), plugins.py, rng.py"),
]  # fmt: skip

# the named steps of simulator/round.py, with what flows between them
STEPS = [
    ("1 online", "clients online, above their battery threshold"),
    ("2 select", "the round's clients (uniform, the algorithm's weights, a policy)"),
    ("3 allocate", "band share, CPU frequency, local steps (a policy's or fixed)"),
    ("4 train", "one batched executor call: every client's K steps"),
    ("5 transfer", "SimPy processes: downlink, compute, uplink"),
    ("6 aggregate", "the arrived uploads into the model"),
    ("7 close the row", "ledger per energy kind, batteries, radio tails"),
    ("8 evaluate", "test accuracy when due; divergence"),
    ("9 finish", "totals, tails to the next round, checkpoint"),
]


def box(ax, x, y, w, h, title, text, colour):
    ax.add_patch(
        FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01", fc=colour, ec="0.3", lw=0.8)
    )
    ax.text(x + 0.02, y + h - 0.025, title, fontsize=8.5, weight="bold", va="top")
    ax.text(x + 0.02, y + h - 0.065, text, fontsize=7, va="top", family="monospace")


def draw() -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 6.2), width_ratios=[1.15, 1])
    for ax in (left, right):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    left.set_title("layers (each imports only those below it)", fontsize=10)
    h, gap = 0.13, 0.028
    for i, (title, text) in enumerate(LAYERS):
        y = 1 - (i + 1) * (h + gap) + gap / 2
        box(left, 0.02, y, 0.96, h, title, text, "#e8eef7" if i % 2 else "#f4f4f4")
        if i:
            left.annotate(
                "", (0.5, y + h + 0.002), (0.5, y + h + gap - 0.002),
                arrowprops={"arrowstyle": "->", "color": "0.4"},
            )  # fmt: skip
    right.set_title("one round (simulator/round.py), every protocol and engine", fontsize=10)
    h, gap = 0.078, 0.03
    for i, (title, text) in enumerate(STEPS):
        y = 1 - (i + 1) * (h + gap) + gap / 2
        colour = "#fdf1e3" if title.startswith(("4", "6", "8")) else "#eaf5ea"
        box(right, 0.05, y, 0.9, h, title, text, colour)
        if i:
            right.annotate(
                "", (0.5, y + h + 0.002), (0.5, y + h + gap - 0.002),
                arrowprops={"arrowstyle": "->", "color": "0.4"},
            )  # fmt: skip
    right.text(
        0.05, -0.02, "green: the system (SimPy or numpy); orange: learning (the training run only)",
        fontsize=7, color="0.3",
    )  # fmt: skip
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=130, metadata={"Software": None})
    plt.close(fig)
    return OUT


if __name__ == "__main__":
    print(draw())
