"""The round kernel (simulator/round.py) and the protocol declarations (protocols/): the
declarations load without torch and hold what the schema used to list; every path plays
the kernel's named steps (a subclass sees each allocate step, and its rows are the same)."""

import subprocess
import sys

import numpy as np
import pytest

from fedjoule.energy_kinds import ENERGY_FIELDS
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator import protocols
from fedjoule.simulator.client import ClientRecord
from fedjoule.simulator.round import RoundKernel, RoundSteps
from fedjoule.simulator.round_row import ClientsOfRound, book_clients
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import build_system_world
from tests.simulator.test_system_engine import assert_rows_equal

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


def test_both_engines_play_one_round_sequence_and_share_its_steps():
    """The numpy engine's sequence, select and allocate are the kernel's own functions (a
    policy written there applies to both engines), not copies."""
    for step in ("sync_round", "open_round", "who_takes_part", "select", "allocate",
                 "client_round"):  # fmt: skip
        shared = getattr(RoundSteps, step)
        assert getattr(SystemEngine, step) is shared is getattr(RoundKernel, step), step


class FirstClientsOneStep:
    """A toy policy in the kernel's steps: the lowest-numbered candidates are selected,
    and each is given one local step."""

    def select(self, candidates, r, key=()):
        return candidates[: self.world.scenario.training.clients_per_round]

    def allocate(self, selected, r):
        allocation = super().allocate(selected, r)
        allocation.local_steps = np.ones_like(allocation.local_steps)
        return allocation


def test_a_policy_in_the_kernel_steps_applies_to_both_engines():
    class NumpyPolicy(FirstClientsOneStep, SystemEngine):
        pass

    class SimpyPolicy(FirstClientsOneStep, SimpySystemSimulation):
        pass

    sets = [*SETS, "training.local_steps=4", "availability.kind=always", "round.deadline_s=null"]
    scenario = load_scenario("default-theory", sets)
    simpy_rows, numpy_rows = [], []
    simpy = SimpyPolicy(build_system_world(scenario))
    simpy.run(4, simpy_rows.append)
    numpy_engine = NumpyPolicy(build_system_world(scenario))
    numpy_engine.run(4, numpy_rows.append)
    assert_rows_equal(simpy_rows, numpy_rows)
    m = scenario.training.clients_per_round
    for engine in (simpy, numpy_engine):  # only the first m clients, every round
        assert engine.ledger["selected"].tolist() == [4.0] * m + [0.0] * (12 - m)
    # one local step instead of four (FedAvg's work is its steps): 4 rounds of one step
    k = np.arange(m)
    for engine in (simpy, numpy_engine):
        one_step_j = engine.world.step_energy_j[k]
        assert engine.ledger["energy_compute_j"][k] == pytest.approx(4 * one_step_j, rel=1e-12)


def test_a_client_listed_twice_is_booked_twice_in_order():
    """Step 7's booking (round_row.book_clients): entries of one client (a cloud round's
    edge rounds) are charged one after the other, as one at a time would."""
    ledger = {"selected": np.zeros(3), "arrived": np.zeros(3)}
    ledger.update({name: np.zeros(3) for name in ENERGY_FIELDS})
    battery_j, threshold_j = np.array([1.0, 5.0, 2.0]), np.array([0.0, 0.0, 0.5])
    records = [
        ClientRecord(2, outcome="arrived", energy_compute_j=1.0),
        ClientRecord(0, outcome="deadline", energy_tx_j=0.7),
        ClientRecord(2, outcome="battery", energy_rx_j=0.75),
    ]
    book_clients(ledger, battery_j, threshold_j, ClientsOfRound.from_records(records))
    assert ledger["selected"].tolist() == [1.0, 0.0, 2.0]
    assert ledger["arrived"].tolist() == [0.0, 0.0, 1.0]
    assert ledger["energy_compute_j"][2] == 1.0 and ledger["energy_rx_j"][2] == 0.75
    # client 2: 2 - 1 = 1, then max(0, 1 - 0.75) = 0.25, capped at its threshold 0.5: 0.25
    assert battery_j.tolist() == pytest.approx([0.3, 5.0, 0.25], abs=1e-15)
