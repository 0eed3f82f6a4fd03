"""The round kernel (simulator/round.py) and the protocol declarations (protocols/): the
declarations load without torch and hold what the schema used to list; every path plays
the kernel's named steps (a subclass sees each allocate step, and its rows are the same)."""

import subprocess
import sys

import pytest

from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator import protocols
from fedjoule.simulator.round import RoundKernel
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world

SETS = ["population.size=12", "training.rounds=4", "training.local_steps=2"]
HIERARCHICAL = ["protocol.kind=hierarchical", "topology.layout=hexagonal", "topology.cells=3"]


def test_the_declarations_load_without_torch():
    code = (
        "import sys; import fedjoule.simulator.protocols as p; "
        "assert p.PROTOCOL_FIELDS['async'][0] == 'concurrency'; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_declarations_hold_the_schema_lists():
    assert protocols.PROTOCOL_FIELDS == {
        "sync": (),
        "async": ("concurrency", "mixing", "staleness", "staleness_a", "staleness_b"),
        "buffered": (
            "concurrency", "buffer_size", "server_lr", "staleness", "staleness_a", "staleness_b"
        ),
        "hierarchical": ("edge_rounds", "backhaul_energy_j_per_bit"),
    }  # fmt: skip
    assert protocols.PROTOCOL_DEFAULTS == {
        "mixing": 0.6,
        "staleness": "polynomial",
        "staleness_b": 4.0,
        "server_lr": 1.0,
        "edge_rounds": 2,
        "backhaul_energy_j_per_bit": 0.0,
    }
    hierarchical = protocols.DECLARATIONS["hierarchical"]
    assert set(protocols.SYNC_ONLY) - set(hierarchical.refused) == {"scaffold", "feddyn"}
    assert protocols.DECLARATIONS["async"].algorithms == ("fedavg", "fedprox")
    section = load_scenario("default-theory", ["protocol.kind=async"]).protocol
    assert section.value("staleness_a") == 0.5
    hinge = ["protocol.kind=async", "protocol.staleness=hinge"]
    assert load_scenario("default-theory", hinge).protocol.value("staleness_a") == 10.0


class Allocating(SimpySystemSimulation):
    """The SimPy system engine, recording each allocate step's clients."""

    def __init__(self, world) -> None:
        super().__init__(world)
        self.allocated: list[list[int]] = []

    def allocate(self, selected, r):
        self.allocated.append([int(k) for k in selected])
        return super().allocate(selected, r)


@pytest.mark.parametrize("extra", [[], HIERARCHICAL], ids=["sync", "hierarchical"])
def test_every_round_allocates_through_the_kernel(extra):
    scenario = load_scenario("default-theory", [*SETS, *extra])
    plain, seen = [], []
    SimpySystemSimulation(build_system_world(scenario)).run(4, plain.append)
    sim = Allocating(build_system_world(scenario))
    sim.run(4, seen.append)
    assert isinstance(sim, RoundKernel) and not sim.learns
    for a, b in zip(plain, seen, strict=True):
        assert {k: v for k, v in a.items() if k != "wall_time_s"} == {
            k: v for k, v in b.items() if k != "wall_time_s"
        }
    edge_rounds = scenario.protocol.value("edge_rounds") if extra else 1
    assert len(sim.allocated) <= 4 * edge_rounds * (3 if extra else 1)
    assert sum(map(len, sim.allocated)) == sum(row["selected"] for row in seen)
