"""The energy kinds, each declared once: its column, unit, who spends it, whether it counts
in energy_total_j and the events.jsonl kinds that carry it (docs/outputs.md).

ClientRecord, the ledgers of both engines, rounds.csv, clients.csv, summary.json,
plan.csv, capacity and the plots follow this list.
"""

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
KINDS = (
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
# every energy a client spends in a round, summed in energy_total_j
ENERGY_FIELDS = tuple(k.column for k in KINDS if k.spender == DEVICE and k.in_total)
# a client's ledger: those and the end-of-run tail
DEVICE_FIELDS = tuple(k.column for k in KINDS if k.spender == DEVICE)


def total_j(energy):
    """energy_total_j of `energy`'s ENERGY_FIELDS (a mapping of floats or arrays): their
    sum, in the declared order."""
    return sum(energy[name] for name in ENERGY_FIELDS)


def with_total(row: dict) -> dict:
    """The row with its energy_total_j, the sum of its energy kinds (ENERGY_FIELDS)."""
    row["energy_total_j"] = total_j(row)
    return row
