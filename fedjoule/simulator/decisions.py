"""A policy's decisions in a round's allocation, as the run records them (docs/outputs.md):
a `decision` line per client in events.jsonl and per-client means in clients.csv.

A decision is recorded exactly where a policy set it (issue 29): an Allocation's
band_share or cpu_freq_hz that is not None (None: the scenario's value), and its
local_steps where the scenario's `policy.steps` decides them (not `fixed`) or where they
differ from the scenario's (world.client_steps) for any of the allocated clients (a
policy in the kernel's allocate step). A run without such a decision writes its files
as before.
"""

import numpy as np

# what an allocation may decide, each a clients.csv column `<name>_mean` when decided
DECIDED = ("band_share", "cpu_freq_hz", "local_steps")


def decided(allocation, client_steps: np.ndarray, steps_policy: bool = False) -> dict:
    """The fields a policy set in `allocation`, each as the allocated clients' values (in
    the order of allocation.clients); empty when it left every field as the scenario's.
    `steps_policy`: the scenario's policy decides the local steps."""
    out = {}
    for name in ("band_share", "cpu_freq_hz"):
        values = getattr(allocation, name, None)
        if values is not None:
            out[name] = np.asarray(values, dtype=float)
    steps = np.asarray(allocation.local_steps)
    if len(steps) and (steps_policy or np.any(steps != client_steps[allocation.clients])):
        out["local_steps"] = steps
    return out


def steps_policy(scenario) -> bool:
    """Whether the scenario's `policy:` decides the local steps (its `steps` not `fixed`;
    a scenario without the section: no)."""
    return getattr(getattr(scenario, "policy", None), "steps", "fixed") != "fixed"


def book(ledger: dict, clients: np.ndarray, values: dict[str, np.ndarray]) -> None:
    """Add the decided values to the ledger's per-client sums and counts (`decision_<name>_sum`,
    `decision_<name>_n`, made at the first decision; kept in checkpoints with the ledger)."""
    n = len(next(iter(ledger.values())))
    for name, decided_values in values.items():
        total = ledger.setdefault(f"decision_{name}_sum", np.zeros(n))
        count = ledger.setdefault(f"decision_{name}_n", np.zeros(n))
        np.add.at(total, clients, decided_values)
        np.add.at(count, clients, 1)


def line_values(values: dict[str, np.ndarray], i: int) -> dict:
    """The i-th allocated client's decided values, as an events.jsonl line holds them."""
    return {name: int(v[i]) if name == "local_steps" else float(v[i]) for name, v in values.items()}


def mean_columns(ledger: dict) -> dict[str, np.ndarray]:
    """clients.csv's `<name>_mean` columns of the decided fields (in DECIDED's order): each
    client's mean decided value, NaN for a client never given one; none when nothing was
    decided in the run."""
    out = {}
    for name in DECIDED:
        if f"decision_{name}_n" in ledger:
            count = ledger[f"decision_{name}_n"]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[f"{name}_mean"] = np.where(
                    count > 0, ledger[f"decision_{name}_sum"] / count, np.nan
                )
    return out
