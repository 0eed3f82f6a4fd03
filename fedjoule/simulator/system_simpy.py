"""The SimPy engine with training skipped: the reference the numpy system engine is checked
against, and its fallback for what it does not support (docs/system-engine.md)."""

from fedjoule.simulator.protocols.server import make_protocol
from fedjoule.simulator.round import RoundKernel
from fedjoule.simulator.system_world import SystemWorld, gradients_of_round


class SimpySystemSimulation(RoundKernel):
    """The round kernel as it is (simulator/round.py), on the SimPy clock: availability,
    uniform selection, the clients' processes on the shared media, the ledger. No model,
    no data, no aggregation, no evaluation; freeloaders skip their computation as in a
    training run."""

    def __init__(self, world: SystemWorld):
        super().__init__(world)
        self.protocol = make_protocol(self)  # async, buffered, hierarchical: no training

    @property
    def step_gradients(self) -> list[int]:
        """The round's gradient evaluations per local step: the world's dry count (round 0's,
        then the last counted round's; algorithms/work.py)."""
        return gradients_of_round(self.world, self.progress.next_round)
