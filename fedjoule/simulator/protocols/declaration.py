"""What a protocol declares: its settings and their defaults, the algorithms it runs (and
why not the others), its rounds.csv and clients.csv columns and its summary fields.

Declarations are plain data (no torch, no SimPy): the scenario schema reads them to check
a protocol section, and the run reads them to lay out its files (docs/protocols.md).
"""

from dataclasses import dataclass, field

# what every protocol beside sync adds to the files (protocols/counts.py fills them)
ROUND_COLUMNS = ["updates", "staleness_mean", "staleness_max", "energy_backhaul_j"]
CLIENT_COLUMNS = ["stale_updates", "dropped_updates"]
LEDGER = ("stale_updates", "dropped_updates")
# algorithms whose server or client state assumes synchronous rounds: their reason
SYNC_ONLY = {
    "scaffold": "its control variates assume every update starts from the current model",
    "feddyn": "its server state h and client gradients assume synchronous rounds",
    "feddc": "its drift variables assume synchronous rounds",
    "taco": "its per-client correction weights are computed over a synchronous round",
    "drfa": "it needs a loss-probe set and a snapshot round",
    "drdm": "it needs a loss-probe set each round",
    "foolsgold": "it compares the updates of one round with each other",
    "stem": "its server momentum assumes synchronous rounds",
    "fedacg": "its server momentum is broadcast to synchronous rounds",
}
SUMMARY_FIELDS = (
    "protocol", "updates_total", "updates_to_target", "staleness_mean", "energy_backhaul_j"
)  # fmt: skip


@dataclass(frozen=True)
class ProtocolDeclaration:
    """One protocol.kind. `defaults`: a null field's value, or a function of the section
    giving it. `algorithms`: the built-in algorithms it runs besides plug-ins (None: all);
    `refused`: the others, each with its reason."""

    kind: str
    fields: tuple[str, ...] = ()
    defaults: dict = field(default_factory=dict)
    algorithms: tuple[str, ...] | None = None
    refused: dict[str, str] = field(default_factory=dict)
    round_columns: tuple[str, ...] = ()
    client_columns: tuple[str, ...] = ()
    ledger: tuple[str, ...] = ()
    summary_fields: tuple[str, ...] = ()
    round_counts: str = ""  # what one rounds.csv row counts (summary.json's round_counts)
