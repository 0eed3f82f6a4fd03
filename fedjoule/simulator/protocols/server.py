"""The protocol object of a run: None for sync rounds (the round kernel's own server),
else the protocol's SimPy server (asynchronous_server.py, hierarchical_server.py, or a
registered kind's: protocols.register)."""

from fedjoule.simulator.protocols import SERVERS
from fedjoule.simulator.protocols.asynchronous_server import Streaming
from fedjoule.simulator.protocols.hierarchical_server import Hierarchical


def make_protocol(sim):
    """The protocol object of a run (round kernel `sim`; None: sync rounds)."""
    kind = sim.world.scenario.protocol.kind
    if kind == "sync":
        return None
    if kind == "hierarchical":
        return Hierarchical(sim)
    if kind in SERVERS:  # registered from outside the package
        return SERVERS[kind](sim)
    return Streaming(sim)  # (build_world refuses a model with running statistics)


make = make_protocol  # the name protocols.py had
