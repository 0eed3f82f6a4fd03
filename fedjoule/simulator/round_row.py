"""Step 7 of a round for both engines, on per-client arrays: the clients of the round into
the ledger and the batteries, and the rounds.csv row's counts and totals (docs/round.md).
The SimPy engine turns its ClientRecords into these arrays; the numpy engine has them."""

import numpy as np

from fedjoule.energy_kinds import ENERGY_FIELDS, Derived, total_j
from fedjoule.simulator.client import DROP_CAUSES
from fedjoule.simulator.round_rules import SUMMED

# the per-client figures a ClientRecord carries as floats (ClientsOfRound.from_records)
# (registered energy kinds included: energy_kinds.register)
_FLOATS = Derived(lambda: (*ENERGY_FIELDS, "downlink_airtime_s", "compute_time_s",
                           "uplink_airtime_s", "uplink_bits", "end_s"))  # fmt: skip


class ClientsOfRound:
    """The round's clients as arrays (one entry per client, at most once each): what they
    spent, when and how they ended."""

    def __init__(self, clients: np.ndarray, cells: np.ndarray) -> None:
        m = len(clients)
        self.client, self.cell = clients, cells
        for name in _FLOATS:
            setattr(self, name, np.zeros(m))
        self.uplink_attempts = np.zeros(m, dtype=int)
        self.outcome = np.full(m, "running", dtype=object)
        self.trained = np.zeros(m, dtype=bool)
        self.budget_j = np.full(m, np.inf)  # the battery budget at the round's start
        # the radio's tail after the round (the numpy engine's VectorRadio): ends, charged up to
        self.tail_end_s, self.settled_s = np.zeros(m), np.zeros(m)
        self.spent_j = None  # (N,) every client's energy in the round's row (radio states)

    @classmethod
    def from_records(cls, records) -> "ClientsOfRound":
        """A SimPy round's ClientRecords (client.py) as arrays, in their order."""
        out = cls(
            np.array([rec.client for rec in records], dtype=int),
            np.array([rec.cell for rec in records], dtype=int),
        )
        for name in _FLOATS:
            setattr(out, name, np.array([getattr(rec, name) for rec in records], dtype=float))
        out.uplink_attempts = np.array([rec.uplink_attempts for rec in records], dtype=int)
        out.outcome = np.array([rec.outcome for rec in records], dtype=object)
        out.trained = np.array([rec.trained for rec in records], dtype=bool)
        return out

    @property
    def energy_total_j(self) -> np.ndarray:
        return total_j(self.__dict__)


def book_clients(ledger: dict, battery_j: np.ndarray, threshold_j, clients, count=True):
    """The clients' energy per kind into the ledger and out of their batteries (at least 0;
    a client stopped by its battery ends exactly at its threshold, no round-off); with
    `count`, their participation (selected, arrived) too. A client listed more than once
    (a hierarchical cloud round's edge rounds) is booked once per entry, in their order."""
    for rows in _occurrences(clients.client):
        k, outcome = clients.client[rows], clients.outcome[rows]
        if count:
            ledger["selected"][k] += 1
            ledger["arrived"][k] += outcome == "arrived"
        for name in ENERGY_FIELDS:
            ledger[name][k] += getattr(clients, name)[rows]
        battery = np.maximum(0.0, battery_j[k] - clients.energy_total_j[rows])
        flat = outcome == "battery"
        battery[flat] = np.minimum(battery[flat], threshold_j[k[flat]])
        battery_j[k] = battery


def _occurrences(k: np.ndarray) -> list:
    """The entries of `k` as index arrays of distinct clients: its first occurrences, then
    its second ones, ... (one array, all of them, when no client repeats)."""
    order = np.argsort(k, kind="stable")
    first = np.r_[True, k[order][1:] != k[order][:-1]] if len(k) else np.ones(0, dtype=bool)
    if first.all():
        return [np.arange(len(k))]
    starts = np.flatnonzero(first)
    rank = np.empty(len(k), dtype=int)  # each entry's occurrence of its client, from 0
    rank[order] = np.arange(len(k)) - np.repeat(starts, np.diff(np.r_[starts, len(k)]))
    return [np.flatnonzero(rank == i) for i in range(rank.max() + 1)]


def row_columns(taking_part: ClientsOfRound, spent: ClientsOfRound, n_cells: int) -> dict:
    """The row's counts over the clients taking part (arrived, dropped by cause, attempts,
    per cell, the longest computation that arrived) and its totals over the clients that
    spent (with the loss probe's: airtimes, computation, bits, energy per kind)."""
    outcome = taking_part.outcome
    arrived = outcome == "arrived"
    n_arrived = int(arrived.sum())
    return {
        "arrived": n_arrived,
        "dropped": len(outcome) - n_arrived,
        **{f"dropped_{cause}": int((outcome == cause).sum()) for cause in DROP_CAUSES},
        "uplink_attempts": int(taking_part.uplink_attempts.sum()),
        "selected_per_cell": _per_cell(taking_part.cell, n_cells),
        "arrived_per_cell": _per_cell(taking_part.cell[arrived], n_cells),
        "downlink_airtime_s": float(spent.downlink_airtime_s.sum()),
        "compute_time_s": float(spent.compute_time_s.sum()),
        "max_compute_time_s": float(taking_part.compute_time_s[arrived].max(initial=0.0)),
        **{name: float(getattr(spent, name).sum()) for name in SUMMED},
    }


def _per_cell(cells: np.ndarray, n_cells: int) -> str:
    """Clients per cell, ';'-joined (one number per cell)."""
    return ";".join(map(str, np.bincount(cells, minlength=n_cells)))
