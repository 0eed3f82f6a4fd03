"""summary.json's fairness figures: Jain's index of the clients' participation and of their
energy, and the policy that decided them, as summary.json and the report tables name it
(docs/outputs.md)."""

import math

from fedjoule.energy_kinds import ENERGY_FIELDS

# the scenario's `policy:` fields and their defaults (today's behaviour: uniform draw,
# equal band shares, the classes' fixed CPU frequency and local steps, no channel state)
POLICY_DEFAULTS = {
    "select": "random",
    "bandwidth": "equal",
    "frequency": "fixed",
    "steps": "fixed",
    "csi": "none",
}


def jain_index(values) -> float:
    """Jain's fairness index J = (sum x)^2 / (n sum x^2) of n values >= 0: 1 when all are
    equal, 1/n when one takes everything (R. Jain, D. Chiu, W. Hawe, DEC-TR-301, 1984);
    1 when all are 0 (nothing to share unfairly) or there are none."""
    x = [float(v) for v in values]  # (no numpy: the report tables import this module)
    square_sum = math.fsum(v * v for v in x)
    if square_sum == 0.0:
        return 1.0
    return math.fsum(x) ** 2 / (len(x) * square_sum)


def fairness(ledger: dict) -> dict:
    """jain_participation over every client's participation count (clients.csv's
    `selected`) and jain_energy over its energy_total_j (the ledger's kinds in the total)."""
    energy_j = sum(ledger[name] for name in ENERGY_FIELDS)  # per client (arrays)
    return {
        "jain_participation": jain_index(ledger["selected"]),
        "jain_energy": jain_index(energy_j),
    }


def policy_summary(scenario) -> dict:
    """The scenario's `policy:` section as summary.json names it: its select, bandwidth,
    frequency, steps and csi (a field the section lacks: its default)."""
    section = getattr(scenario, "policy", None)
    out = {}
    for name, default in POLICY_DEFAULTS.items():
        value = getattr(section, name, default)
        out[name] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    return out


def policy_label(policy) -> str:
    """A run's policy (summary.json's) as a table shows it: its choices other than the
    defaults ("select=oort, bandwidth=min-energy"), "default" when none or not given."""
    if not isinstance(policy, dict):
        return str(policy) if policy else "default"
    chosen = [f"{k}={v}" for k, v in policy.items() if v != POLICY_DEFAULTS.get(k)]
    return ", ".join(chosen) or "default"
