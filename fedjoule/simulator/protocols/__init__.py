"""Server protocols (docs/protocols.md): sync rounds, FedAsync, FedBuff and HierFAVG, one
module each declaring its settings, the algorithms it runs, its columns and summary fields
(sync.py, asynchronous.py, hierarchical.py; plain data, no torch: the scenario schema reads
them), and a SimPy server story for each protocol beside sync over the one round kernel
(simulator/round.py): asynchronous_server.py, hierarchical_server.py.

A rounds.csv row is one server model version (a cloud aggregation). Checkpoints: a
hierarchical cloud round ends with every edge holding the cloud model, so the state between
rows is the sync one. Under async and buffered clients are in flight at every aggregation;
their trained uploads (computed at dispatch) and the buffer are saved as tensors, and a
resume replays the system timeline (no training: it does not depend on the models) from
time 0 up to the saved version, then takes the learning state from the checkpoint.
"""

import importlib

from fedjoule.simulator.protocols.asynchronous import (
    ASYNC,
    BUFFERED,
    buffered_step,
    mixed,
    staleness_weight,
)
from fedjoule.simulator.protocols.declaration import (
    CLIENT_COLUMNS,
    LEDGER,
    ROUND_COLUMNS,
    SYNC_ONLY,
    ProtocolDeclaration,
)
from fedjoule.simulator.protocols.hierarchical import HIERARCHICAL, HIERARCHICAL_TOO
from fedjoule.simulator.protocols.sync import SYNC

DECLARATIONS: dict[str, ProtocolDeclaration] = {
    d.kind: d for d in (SYNC, ASYNC, BUFFERED, HIERARCHICAL)
}
KINDS = tuple(DECLARATIONS)
# Which fields of the protocol section each kind reads (the others must stay none).
PROTOCOL_FIELDS = {kind: d.fields for kind, d in DECLARATIONS.items()}
# the null fields' defaults that do not depend on other fields (see `default`)
PROTOCOL_DEFAULTS = {
    name: value
    for d in DECLARATIONS.values()
    for name, value in d.defaults.items()
    if not callable(value)
}


def default(section, name: str):
    """A null field's default under its protocol section (docs/protocols.md)."""
    for declaration in DECLARATIONS.values():
        if name in declaration.defaults:
            value = declaration.defaults[name]
            return value(section) if callable(value) else value
    raise KeyError(name)


# the servers (SimPy stories) import torch: loaded on first use, so that the schema and
# the commands that train nothing read the declarations without it
_SERVERS = {
    "make": "server",
    "make_protocol": "server",
    "Counts": "counts",
    "add_ledger": "counts",
    "count_updates": "counts",
    "stale_columns": "counts",
    "Streaming": "asynchronous_server",
    "EndOfInstant": "asynchronous_server",
    "LATE": "asynchronous_server",
    "Hierarchical": "hierarchical_server",
    "mean_state": "hierarchical_server",
}


__all__ = [
    "ASYNC", "BUFFERED", "CLIENT_COLUMNS", "DECLARATIONS", "HIERARCHICAL", "HIERARCHICAL_TOO",
    "KINDS", "LEDGER", "PROTOCOL_DEFAULTS", "PROTOCOL_FIELDS", "ROUND_COLUMNS", "SYNC",
    "SYNC_ONLY", "ProtocolDeclaration", "buffered_step", "default", "mixed", "staleness_weight",
    *_SERVERS,
]  # fmt: skip


def __getattr__(name: str):
    if name not in _SERVERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # loaded on first use: the servers import torch (see _SERVERS)
    return getattr(importlib.import_module(f"{__name__}.{_SERVERS[name]}"), name)
