"""The protocol object of a run: None for sync rounds (the round kernel's own server),
else the protocol's SimPy server (asynchronous_server.py, hierarchical_server.py, or a
registered kind's: protocols.register)."""

from fedjoule.simulator.protocols import SERVERS, asynchronous_server, hierarchical_server


def make_protocol(sim):
    """The protocol object of a run (round kernel `sim`; None: sync rounds)."""
    kind = sim.world.scenario.protocol.kind
    if kind == "sync":
        return None
    if kind == "hierarchical":
        return hierarchical_server.Hierarchical(sim)
    if kind in SERVERS:  # registered from outside the package
        return SERVERS[kind](sim)
    # (build_world refuses a model with running statistics)
    return asynchronous_server.Streaming(sim)


make = make_protocol  # the name protocols.py had
