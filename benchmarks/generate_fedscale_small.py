"""Writes the generated FedScale-format traces shipped with fedjoule (no measured data):
fedjoule/channel/traces/fedscale-small-capacity.json and fedscale-small-behaviour.json,
used by the built-in scenario fedscale-format-small. Seeded: re-running it rewrites the
same files.

    .venv/bin/python benchmarks/generate_fedscale_small.py
"""

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "fedjoule" / "channel" / "traces"
DAY_S = 86_400


def generate(n_clients: int = 60, seed: int = 20) -> tuple[dict, dict]:
    gen = np.random.default_rng(seed)
    capacity, behaviour = {}, {}
    for cid in range(1, n_clients + 1):
        # inference ms per sample: log-normal around 25 ms; kbit/s: log-normal around 8 Mbit/s
        capacity[str(cid)] = {
            "computation": round(float(25.0 * np.exp(0.6 * gen.standard_normal())), 3),
            "communication": round(float(8000.0 * np.exp(0.8 * gen.standard_normal())), 1),
        }
        k = int(gen.integers(1, 4))  # one to three online intervals a day
        cuts = np.sort(gen.choice(np.arange(600, DAY_S - 600, 300), 2 * k, replace=False))
        active = [int(c) for c in cuts[0::2]]
        inactive = [int(c) for c in cuts[1::2]]
        if gen.random() < 0.3:  # online from midnight
            active[0] = 0
        behaviour[str(cid)] = {
            "duration": int(sum(b - a for a, b in zip(active, inactive, strict=True))),
            "inactive": inactive,
            "finish_time": DAY_S,
            "active": active,
            "model": str(gen.choice(["SM-G950F", "Pixel 3", "iPhone X", "Redmi Note 7"])),
        }
    return capacity, behaviour


def main() -> None:
    capacity, behaviour = generate()
    for name, obj in (("capacity", capacity), ("behaviour", behaviour)):
        path = OUT / f"fedscale-small-{name}.json"
        path.write_text(json.dumps(obj, separators=(",", ":")) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
