"""What every protocol beside sync counts: per client its stale and dropped updates
(clients.csv), per row the updates and their staleness (rounds.csv), over the run the
updates in all and to the target and the backhaul's energy (summary.json)."""

from dataclasses import asdict, dataclass

import numpy as np

from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.protocols.declaration import LEDGER


@dataclass
class UpdateCounts:
    """summary.json's protocol fields, summed row by row (saved in checkpoints as a dict)."""

    updates_total: int = 0
    staleness_sum: float = 0.0
    updates_to_target: int | None = None
    energy_backhaul_j: float = 0.0


def add_ledger(sim) -> None:
    """The per-client counts the protocols add to the ledger (clients.csv's columns)."""
    sim.add_ledger_columns(LEDGER)


def count_updates(sim, records: list[ClientRecord], staleness: dict) -> None:
    """stale_updates (arrived with staleness > 0) and dropped_updates per client."""
    for rec in records:
        if rec.outcome == "arrived":
            sim.count("stale_updates", rec.client, staleness.get(id(rec), 0) > 0)
        else:
            sim.count("dropped_updates", rec.client)


def stale_columns(updates: int, staleness: list) -> dict:
    return {
        "updates": updates,
        "staleness_mean": float(np.mean(staleness)) if staleness else None,
        "staleness_max": int(max(staleness)) if staleness else None,
    }


class Counts:
    """What every protocol adds to summary.json: updates aggregated in all and to the
    target, their mean staleness, the backhaul's energy."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.counts = UpdateCounts()
        add_ledger(sim)

    def after_row(self, row: dict) -> None:
        """Called by the kernel's finish step (round.book_row) with the finished row."""
        c = self.counts
        c.updates_total += int(row.get("updates") or 0)
        mean = row.get("staleness_mean")
        c.staleness_sum += (mean or 0.0) * int(row.get("updates") or 0)
        c.energy_backhaul_j += float(row.get("energy_backhaul_j") or 0.0)
        if self.sim.progress.rounds_to_target is not None and c.updates_to_target is None:
            c.updates_to_target = c.updates_total

    def counts_dict(self) -> dict:
        """The counts as a checkpoint holds them."""
        return asdict(self.counts)

    def load_counts(self, saved: dict) -> None:
        self.counts = UpdateCounts(**saved)

    def summary(self) -> dict:
        c, section = self.counts, self.sim.world.scenario.protocol
        return {
            "protocol": section.kind,
            "updates_total": c.updates_total,
            "updates_to_target": c.updates_to_target,
            "staleness_mean": c.staleness_sum / c.updates_total if c.updates_total else None,
            "energy_backhaul_j": c.energy_backhaul_j,
        }
