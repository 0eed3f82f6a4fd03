"""The cost of each built-in policy per round at 10,000 clients (issue 29, item 8): the
system-only engine (`fedjoule run --no-train`'s numpy engine) on default-theory with 10,000
devices, m clients a round, the default policy against each selector, each allocator and
the observation alone (select=random with csi=last: the server's per-client record and
the allocate step's checks). The engines of one m run side by side in one process, round
by round in a rotating order, each round timed by the engine itself (the row's
wall_time_s); per round the ratio to the default's same round, then the median. The
loss-driven selectors (oort, power-of-choice) need training: their selector function alone
is timed on an Observation of 10,000 clients with reported losses, against select=random's.

Run: PYTHONPATH=. python benchmarks/policies.py [--rounds 60] [--per-round 100,1000]"""

import argparse
import os
import statistics
import time

import numpy as np
from record import save_results  # benchmarks/record.py

DEVICES = 10_000
ARMS = {  # name: the scenario's policy (--set overrides)
    "default (random, equal, fixed, fixed)": [],
    "observation alone (random, csi=last)": ["policy.csi=last"],
    "select=round-robin": ["policy.select=round-robin"],
    "select=best-channel (csi=oracle)": ["policy.select=best-channel", "policy.csi=oracle"],
    "select=proportional-fair (csi=oracle)": [
        "policy.select=proportional-fair",
        "policy.csi=oracle",
    ],  # fmt: skip
    "select=age": ["policy.select=age"],
    "select=battery": ["policy.select=battery"],
    "bandwidth=equal-finish": ["policy.bandwidth=equal-finish"],
    "bandwidth=min-energy": ["policy.bandwidth=min-energy"],
    "frequency=deadline": ["policy.frequency=deadline"],
    "steps=deadline": ["policy.steps=deadline"],
    "three without a band allocator (proportional-fair csi=oracle, deadline, deadline)": [
        "policy.select=proportional-fair",
        "policy.csi=oracle",
        "policy.frequency=deadline",
        "policy.steps=deadline",
    ],  # fmt: skip
    "all four (proportional-fair csi=oracle, min-energy, deadline, deadline)": [
        "policy.select=proportional-fair",
        "policy.csi=oracle",
        "policy.bandwidth=min-energy",
        "policy.frequency=deadline",
        "policy.steps=deadline",
    ],  # fmt: skip
}


def engines(m: int) -> dict:
    from fedjoule.scenarios.loading import load_scenario
    from fedjoule.simulator.system import SystemEngine
    from fedjoule.simulator.system_world import build_system_world

    base = [f"population.size={DEVICES}", f"training.clients_per_round={m}",
            "training.rounds=100000"]  # fmt: skip
    return {
        name: SystemEngine(build_system_world(load_scenario("default-theory", base + extra)))
        for name, extra in ARMS.items()
    }


def timed_policy_step(engine) -> list:
    """Wrap the engine's policy step (select, allocate, record) with a clock; returns the
    one-item list its seconds add up in."""
    spent = [0.0]
    step = engine.policy_step
    if step is None:
        return spent
    for name in ("select", "allocate", "record"):
        method = getattr(step, name)

        def timed(*args, method=method):
            tic = time.perf_counter()
            try:
                return method(*args)
            finally:
                spent[0] += time.perf_counter() - tic

        setattr(step, name, timed)
    return spent


def engine_rounds(m: int, rounds: int) -> tuple[dict, dict]:
    """Per arm its rounds' wall times and the policy step's part of them (s), the arms
    alternated round by round."""
    runs = engines(m)
    names = list(runs)
    spent = {name: timed_policy_step(runs[name]) for name in names}
    times, step_s = {name: [] for name in names}, {name: [] for name in names}

    def on_round(row, name):
        times[name].append(row["wall_time_s"])
        step_s[name].append(spent[name][0])
        spent[name][0] = 0.0

    for r in range(rounds + 1):  # round 0 warms each engine up, not kept
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].run(r + 1, lambda row, n=name: on_round(row, n))
    return {n: t[1:] for n, t in times.items()}, {n: t[1:] for n, t in step_s.items()}


def summary(times: dict, step_s: dict) -> list[dict]:
    """Per arm: median ms a round, the default's, the median per-round ratio and added
    ms, and the policy step's own ms a round (select, allocate, record) and its median
    ratio to the default's round (a band share's physics differs from equal's)."""
    default = np.array(times[next(iter(ARMS))])
    rows = []
    for name, t in times.items():
        t, step = np.array(t), np.array(step_s[name])
        rows.append({
            "arm": name,
            "ms_per_round": 1e3 * float(np.median(t)),
            "default_ms_per_round": 1e3 * float(np.median(default)),
            "ratio": float(np.median(t / default)),
            "added_ms": 1e3 * float(np.median(t - default)),
            "policy_step_ms": 1e3 * float(np.median(step)),
            "policy_step_ratio": float(np.median(step / default)),
        })  # fmt: skip
    return rows


def synthetic_observation(n: int, round_index: int = 50):
    """n clients, half of them explored (reported losses and round time), as after some
    rounds of training."""
    from fedjoule.policies.observation import Observation

    gen = np.random.default_rng(0)
    explored = gen.random(n) < 0.5
    loss = np.where(explored, gen.uniform(0.1, 2.0, n), np.nan)
    return Observation(
        round_index=round_index,
        n_clients=n,
        client_id=np.arange(n),
        n_samples=gen.integers(50, 500, n).astype(float),
        battery_fraction=gen.random(n),
        upload_rate_bps=np.where(explored, gen.uniform(1e5, 1e7, n), np.nan),
        round_time_s=np.where(explored, gen.uniform(0.05, 0.4, n), np.nan),
        loss=loss,
        participations=np.where(explored, gen.integers(1, 10, n), 0),
        age_rounds=gen.integers(1, round_index + 2, n),
        staleness_rounds=np.zeros(n, dtype=int),
        loss_rms=loss * gen.uniform(1.0, 1.5, n),  # (the root mean square is at least the mean)
    )


def selector_alone(m: int, calls: int) -> list[dict]:
    """ms a call of oort's, power-of-choice's and random's selector on 10,000 clients."""
    from fedjoule import rng
    from fedjoule.policies.select import select_oort, select_power_of_choice, select_random

    obs = synthetic_observation(DEVICES)
    arms = {
        "select=random (function)": lambda gen: select_random(obs, m, gen),
        "select=oort (function)": lambda gen: select_oort(obs, m, gen, 0.2),
        "select=power-of-choice (function)": lambda gen: select_power_of_choice(obs, m, gen),
    }
    times = {name: [] for name in arms}
    for i in range(calls):
        for name, call in arms.items():
            gen = rng.stream(0, "selection", i)
            tic = time.perf_counter()
            call(gen)
            times[name].append(time.perf_counter() - tic)
    return [{"arm": name, "ms_per_call": 1e3 * float(np.median(t))} for name, t in times.items()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--per-round", default="100,1000")
    parser.add_argument("--name", default="policies")
    args = parser.parse_args()
    results = {"devices": DEVICES, "rounds": args.rounds, "load_average": [os.getloadavg()]}
    for m in map(int, args.per_round.split(",")):
        rows = summary(*engine_rounds(m, args.rounds))
        results[f"m={m}"] = rows
        results[f"m={m} selector alone"] = selector_alone(m, args.rounds)
        print(f"{DEVICES:,} clients, {m} a round, {args.rounds} rounds (medians):")
        for row in rows:
            print(
                f"  {row['arm']:<42} {row['ms_per_round']:8.2f} ms/round  "
                f"ratio {row['ratio']:6.3f}  added {row['added_ms']:+7.2f} ms  policy step "
                f"{row['policy_step_ms']:6.3f} ms ({100 * row['policy_step_ratio']:.1f} %)"
            )
        for row in results[f"m={m} selector alone"]:
            print(f"  {row['arm']:<42} {row['ms_per_call']:8.3f} ms/call")
        results["load_average"].append(os.getloadavg())
    results["load_average_mean"] = statistics.mean(a[0] for a in results["load_average"])
    save_results(args.name, results)


if __name__ == "__main__":
    main()
