"""protocol.kind=sync: synchronous rounds, the round kernel's own story (simulator/round.py);
no settings, every algorithm, no extra columns."""

from fedjoule.simulator.protocols.declaration import ProtocolDeclaration

SYNC = ProtocolDeclaration(
    kind="sync",
    round_counts="rounds (one aggregation of the round's arrived updates each)",
)
