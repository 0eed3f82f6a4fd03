"""How close min-energy's few candidates get to a long search (docs/policies.md, "How close
it gets"): the uplinks and times left of the first rounds of three settings, as the engine
hands them to the allocator, each solved by `min_energy_weights` and by a reference search
of several hundred evaluations: heSRPT's weights (c on a 200-point grid) and theta^rank
(a on a 200-point grid) in Smith's order, then scipy's Nelder-Mead in log-weights from the
best (300 evaluations, lateness a penalty). Per round: the energy of min-energy's weights
over the reference's (both on time), its evaluations of the sharing, whether heSRPT's
weights alone were on time (and their energy over the reference's), and the energy of a
rule that needs no search and is sure to meet a common deadline D: (1 - b) heSRPT's +
b equal-finish's weights, b = T / D (T equal-finish's time: each client then always holds
at least b times its equal-finish share, and the rate is concave in the share).

Run: PYTHONPATH=. python benchmarks/min_energy_search.py [--rounds 8]"""

import argparse
import math

import numpy as np
from record import save_results  # benchmarks/record.py
from scipy.optimize import minimize

SETTINGS = {  # name: (scenario, --set overrides)
    "default": ("default", []),
    "default-theory, 100 of 10,000 a round": (
        "default-theory",
        ["population.size=10000", "training.clients_per_round=100"],
    ),
    "the same, proportional fair (csi oracle) and both deadline allocators": (
        "default-theory",
        [
            "population.size=10000",
            "training.clients_per_round=100",
            "policy.select=proportional-fair",
            "policy.csi=oracle",
            "policy.frequency=deadline",
            "policy.steps=deadline",
        ],
    ),  # fmt: skip
}


def captured(scenario: str, sets: list, rounds: int) -> list:
    """(uplink, time left) of each cell's min-energy call in the first rounds."""
    import fedjoule.simulator.policy_step as policy_step
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system import SystemEngine
    from fedjoule.simulator.system_world import build_system_world

    calls, allocate = [], policy_step.cell_shares

    def keep(uplink, left_s):
        calls.append((uplink, np.array(left_s)))
        return allocate(uplink, left_s)

    policy_step.cell_shares = keep
    try:
        world = build_system_world(load_scenario(scenario, ["policy.bandwidth=min-energy", *sets]))
        SystemEngine(world).run(rounds, lambda row: None)
    finally:
        policy_step.cell_shares = allocate
    return calls


def reference_j(uplink, left_s) -> float:
    """The long search's least energy with every upload on time."""
    from fedjoule.policies.min_energy import hesrpt_weights, softmax
    from fedjoule.policies.shared_upload import shared_upload_time_s

    def energy_j(weights: np.ndarray, penalty: float = 0.0) -> float:
        time_s = shared_upload_time_s(uplink, weights)
        late = np.sum(np.maximum(time_s / left_s - 1.0, 0.0))
        if late > 0 and not penalty:
            return math.inf
        return float(uplink.tx_power_w @ time_s) * (1.0 + penalty * late)

    smith = np.argsort(uplink.upload_time_s(np.ones(uplink.n)) / uplink.tx_power_w, kind="stable")
    rank = np.argsort(smith, kind="stable")
    grid = [softmax(-a * rank) for a in np.geomspace(1e-4, 10, 200)]
    grid += [hesrpt_weights(smith, c) for c in np.geomspace(1, 300, 200)]
    best = min(grid, key=energy_j)
    searched = minimize(
        lambda z: energy_j(softmax(z), 1e3), np.log(best), method="Nelder-Mead",
        options={"maxfev": 300, "xatol": 1e-6, "fatol": 0.0},
    )  # fmt: skip
    return min(energy_j(best), energy_j(softmax(searched.x)))


def compare(calls: list) -> list[dict]:
    """Per call: min-energy's energy over the reference's, its evaluations, heSRPT on time."""
    import fedjoule.policies.min_energy as min_energy
    from fedjoule.policies.bandwidth import equal_finish_shares
    from fedjoule.policies.min_energy import (
        elasticity_exponent,
        hesrpt_weights,
        min_energy_weights,
    )
    from fedjoule.policies.shared_upload import shared_upload_time_s

    rows, evaluate = [], min_energy.shared_upload
    for uplink, left_s in calls:
        count = [0]

        def counted(*args, count=count):
            count[0] += 1
            return evaluate(*args)

        min_energy.shared_upload = counted
        try:
            weights = min_energy_weights(uplink, left_s)
        finally:
            min_energy.shared_upload = evaluate
        energy_j = float(uplink.tx_power_w @ shared_upload_time_s(uplink, weights))
        smith = np.argsort(uplink.upload_time_s(np.ones(uplink.n)) / uplink.tx_power_w)
        shaped = hesrpt_weights(smith, elasticity_exponent(uplink))
        finish = equal_finish_shares(uplink)
        b = min(1.0, float(uplink.upload_time_s(finish).max() / left_s.min()))
        reference = reference_j(uplink, left_s)

        def over(weights, uplink=uplink, left_s=left_s, reference=reference):
            time_s = shared_upload_time_s(uplink, weights)
            on_time = np.all(time_s <= left_s)
            return float(uplink.tx_power_w @ time_s) / reference if on_time else math.inf

        rows.append({
            "clients": uplink.n,
            "energy_over_reference": energy_j / reference,
            "evaluations": count[0],
            "hesrpt_on_time": bool(np.all(shared_upload_time_s(uplink, shaped) <= left_s)),
            "hesrpt_over_reference": over(shaped),
            "sure_mix_over_reference": over((1.0 - b) * shaped + b * finish),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    results = {}
    for name, (scenario, sets) in SETTINGS.items():
        rows = compare(captured(scenario, sets, args.rounds))
        results[name] = rows
        ratio = [r["energy_over_reference"] for r in rows]
        print(
            f"{name}: energy over the reference {min(ratio):.4f} to {max(ratio):.4f}, "
            f"{np.mean([r['evaluations'] for r in rows]):.1f} evaluations a call, heSRPT on "
            f"time in {sum(r['hesrpt_on_time'] for r in rows)} of {len(rows)}, the sure mix "
            f"{min(r['sure_mix_over_reference'] for r in rows):.2f} to "
            f"{max(r['sure_mix_over_reference'] for r in rows):.2f}"
        )
    save_results("min_energy_search", results)


if __name__ == "__main__":
    main()
