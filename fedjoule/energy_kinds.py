"""The energy kinds, each declared once: its column, unit, who spends it, whether it counts
in energy_total_j and the events.jsonl kinds that carry it (docs/outputs.md).

ClientRecord, the ledgers of both engines, rounds.csv, clients.csv, summary.json,
plan.csv, capacity and the plots follow this list. Code outside the package adds a kind
with `register` (or `registered`, undone on leaving; docs/architecture.md); the tuples
below, and those other modules derive from them with `Derived`, follow it.
"""

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

DEVICE, INFRASTRUCTURE = "device", "infrastructure"
END_OF_RUN_TAIL = "energy_end_of_run_tail_j"
BACKHAUL = "energy_backhaul_j"


@dataclass(frozen=True)
class EnergyKind:
    """One kind of energy: `column` in rounds.csv, clients.csv and summary.json, in `unit`;
    `spender` DEVICE (a ClientRecord field and a ledger row per client) or INFRASTRUCTURE
    (a rounds.csv column only); `in_total`: part of energy_total_j; `events`: the
    events.jsonl kinds whose energy_j it is; `label`: its name in plots."""

    column: str
    label: str
    events: tuple[str, ...] = ()
    spender: str = DEVICE
    in_total: bool = True
    unit: str = "J"


# in the order of the files' columns. The radio states' three are 0 for a radio without
# states (simulator/radio_states.py); an upload queued for the medium waits connected, at
# the tail's power.
BUILT_IN = (
    EnergyKind("energy_compute_j", "compute", ("compute",)),
    EnergyKind("energy_tx_j", "transmit", ("uplink", "uplink_aborted")),
    EnergyKind("energy_rx_j", "receive", ("downlink",)),
    EnergyKind("energy_radio_promotion_j", "radio promotion", ("promotion",)),
    EnergyKind("energy_radio_tail_j", "radio tail", ("tail", "queue")),
    EnergyKind("energy_idle_j", "idle", ("idle",)),
    # the radio tails still running when the run ends, with energy.end_of_run_tail =
    # separate (charge adds them to energy_radio_tail_j, drop charges nobody)
    EnergyKind(END_OF_RUN_TAIL, "end-of-run tail", ("end_of_run_tail",), in_total=False),
    # hierarchical: the bits crossing the edge servers' backhaul, x
    # protocol.backhaul_energy_j_per_bit (docs/protocols.md); in the rows, no event
    EnergyKind(BACKHAUL, "backhaul", (), spender=INFRASTRUCTURE, in_total=False),
)
_registered: list[EnergyKind] = []  # added by `register`, after the built-ins
_generation = 0  # counts the changes of the list, so that Derived knows when to recompute


class Derived(Sequence):
    """A tuple computed by `make()` from the energy kinds, again after a kind is registered
    or removed: a module derives its columns at import time and they stay current."""

    def __init__(self, make: Callable[[], object]) -> None:
        self._make, self._seen, self._items = make, -1, ()

    def _now(self) -> tuple:
        if self._seen != _generation:
            self._items, self._seen = tuple(self._make()), _generation
        return self._items

    def __getitem__(self, index):
        return self._now()[index]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self) -> Iterator:
        return iter(self._now())

    def __contains__(self, item) -> bool:
        return item in self._now()

    def __eq__(self, other) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._now() == tuple(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._now())


KINDS = Derived(lambda: (*BUILT_IN, *_registered))
# every energy a client spends in a round, summed in energy_total_j
ENERGY_FIELDS = Derived(lambda: (k.column for k in KINDS if k.spender == DEVICE and k.in_total))
# a client's ledger: those and the end-of-run tail
DEVICE_FIELDS = Derived(lambda: (k.column for k in KINDS if k.spender == DEVICE))
_COLUMN = re.compile(r"^energy_[a-z0-9_]+_j$")


def register(kind: EnergyKind) -> None:
    """Add an energy kind after the built-ins. A DEVICE kind counts in energy_total_j: a
    ClientRecord attribute (0 until its model spends it, with `ClientRecord.spend`), a
    ledger column, a rounds.csv and clients.csv column before energy_total_j, a summary.json
    field. An INFRASTRUCTURE kind counts outside it: a column of the rows of the protocol
    that spends it (its declaration's round_columns and summary_fields)."""
    global _generation
    taken = {k.column for k in KINDS} | {"energy_total_j", "energy_to_target_j"}
    if not _COLUMN.match(kind.column) or kind.column in taken:
        raise ValueError(
            f"energy kind column {kind.column!r}: it must read energy_<name>_j and not be "
            f"one of {', '.join(sorted(taken))}"
        )
    if kind.spender not in (DEVICE, INFRASTRUCTURE) or kind.in_total != (kind.spender == DEVICE):
        raise ValueError(
            f"energy kind {kind.column}: spender {kind.spender!r}, in_total {kind.in_total}; "
            f"a registered kind is a {DEVICE} kind in energy_total_j or an "
            f"{INFRASTRUCTURE} kind outside it"
        )
    events = {name for k in KINDS for name in k.events} & set(kind.events)
    if events or kind.unit != "J":
        raise ValueError(
            f"energy kind {kind.column}: its unit must be J and its events new "
            f"(already carried: {', '.join(sorted(events)) or 'none'})"
        )
    _registered.append(kind)
    _generation += 1


def unregister(column: str) -> None:
    """Remove the registered kind of `column` (the built-ins stay)."""
    global _generation
    _registered[:] = [k for k in _registered if k.column != column]
    _generation += 1


@contextmanager
def registered(kind: EnergyKind) -> Iterator[EnergyKind]:
    """`register(kind)` for the body of a with-statement, undone on leaving it."""
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.column)


def label(column: str) -> str:
    """The plots' name of an energy column (the column itself when it is no kind's)."""
    return next((k.label for k in KINDS if k.column == column), column)


def total_j(energy):
    """energy_total_j of `energy`'s ENERGY_FIELDS (a mapping of floats or arrays): their
    sum, in the declared order."""
    return sum(energy[name] for name in ENERGY_FIELDS)


def with_total(row: dict) -> dict:
    """The row with its energy_total_j, the sum of its energy kinds (ENERGY_FIELDS)."""
    row["energy_total_j"] = total_j(row)
    return row
