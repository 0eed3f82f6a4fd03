"""protocol.kind=hierarchical: HierFAVG (Liu, Zhang, Song, Letaief, ICC 2020), declared; an
edge server at every base station runs `edge_rounds` synchronous rounds with its own
clients, then sends its model over the backhaul; the cloud takes the data-weighted mean of
the edge models and sends it back (the SimPy story: protocols/hierarchical_server.py)."""

from fedjoule.simulator.protocols.declaration import (
    CLIENT_COLUMNS,
    LEDGER,
    ROUND_COLUMNS,
    SUMMARY_FIELDS,
    SYNC_ONLY,
    ProtocolDeclaration,
)

# server and client state that lives at the edges and is averaged at the cloud
HIERARCHICAL_TOO = ("scaffold", "feddyn")

HIERARCHICAL = ProtocolDeclaration(
    kind="hierarchical",
    fields=("edge_rounds", "backhaul_energy_j_per_bit"),
    defaults={"edge_rounds": 2, "backhaul_energy_j_per_bit": 0.0},
    algorithms=("fedavg", "fedprox", *HIERARCHICAL_TOO),
    refused={k: v for k, v in SYNC_ONLY.items() if k not in HIERARCHICAL_TOO},
    round_columns=tuple(ROUND_COLUMNS),
    client_columns=tuple(CLIENT_COLUMNS),
    ledger=LEDGER,
    summary_fields=SUMMARY_FIELDS,
    round_counts="cloud rounds (one cloud aggregation of protocol.edge_rounds edge rounds)",
)
