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

Code outside the package adds a protocol.kind with `register(declaration, server)` (or
`registered`, undone on leaving; docs/architecture.md).
"""

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
KINDS = tuple(DECLARATIONS)  # the built-in kinds (DECLARATIONS: the registered ones too)
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
    """A null field's default under its protocol section (docs/protocols.md): its kind's,
    else the first kind's that reads the field."""
    own = DECLARATIONS.get(section.kind, SYNC)
    for declaration in (own, *DECLARATIONS.values()):
        if name in declaration.defaults:
            value = declaration.defaults[name]
            return value(section) if callable(value) else value
    raise KeyError(name)


# the registered kinds' servers: server(sim) -> the protocol object of a run (register)
SERVERS: dict[str, Callable] = {}


def register(declaration: ProtocolDeclaration, server: Callable) -> None:
    """Add `declaration.kind` as a protocol.kind: the schema checks a scenario naming it by
    the declaration (the protocol fields it reads, among the built-in kinds' fields; the
    algorithms it runs), the run lays out its files by it, and `server(sim)` makes its
    SimPy server over the round kernel `sim` (simulator/round.py), as the built-in servers
    are: `play_round(env, r)` a process body returning the round's rounds.csv row (or
    `run(last_round, on_round)` playing every row itself), `after_row(row)`, `summary()`
    (its summary.json fields), `state_dict()` and `load_state_dict(saved)` (checkpoints).
    The numpy system engine plays sync rounds only: a run without training of this kind
    goes to the SimPy engine (--engine auto) or is refused (--engine numpy)."""
    kind = declaration.kind
    if kind in DECLARATIONS:
        raise ValueError(f"protocol.kind {kind!r} is taken: {', '.join(DECLARATIONS)}")
    known = {name for d in (SYNC, ASYNC, BUFFERED, HIERARCHICAL) for name in d.fields}
    unknown = sorted(set(declaration.fields) - known)
    if unknown:
        raise ValueError(
            f"protocol.kind {kind!r} reads {', '.join(unknown)}: a protocol reads fields of "
            f"the protocol section ({', '.join(sorted(known))})"
        )
    DECLARATIONS[kind], PROTOCOL_FIELDS[kind], SERVERS[kind] = (
        declaration,
        declaration.fields,
        server,
    )


def unregister(kind: str) -> None:
    """Remove the registered protocol.kind `kind` (the built-in kinds stay)."""
    if kind in KINDS:
        raise ValueError(f"protocol.kind {kind!r} is built in")
    for table in (DECLARATIONS, PROTOCOL_FIELDS, SERVERS):
        table.pop(kind, None)


@contextmanager
def registered(declaration: ProtocolDeclaration, server: Callable) -> Iterator[None]:
    """`register(declaration, server)` for the body of a with-statement, undone on leaving."""
    register(declaration, server)
    try:
        yield
    finally:
        unregister(declaration.kind)


# the servers (SimPy stories; their model arithmetic is the learning engine's) are loaded
# on first use, so that the schema reads the declarations without them
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
    "mean_state": "fedjoule.algorithms.learning",  # the cloud mean (the learning side)
}


__all__ = [
    "ASYNC", "BUFFERED", "CLIENT_COLUMNS", "DECLARATIONS", "HIERARCHICAL", "HIERARCHICAL_TOO",
    "KINDS", "LEDGER", "PROTOCOL_DEFAULTS", "PROTOCOL_FIELDS", "ROUND_COLUMNS", "SERVERS", "SYNC",
    "SYNC_ONLY", "ProtocolDeclaration", "buffered_step", "default", "mixed", "register",
    "registered", "staleness_weight", "unregister",
    *_SERVERS,
]  # fmt: skip


def __getattr__(name: str):
    if name not in _SERVERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # loaded on first use (see _SERVERS)
    module = _SERVERS[name]
    return getattr(
        importlib.import_module(module if "." in module else f"{__name__}.{module}"), name
    )
