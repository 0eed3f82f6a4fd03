"""The protocols (docs/protocols.md): fixed points with sync FedAvg, FedAsync's versions,
staleness and mixed models in closed form, and a hand-written async event schedule."""

import math

import numpy as np
import pytest
import torch

from fedjoule.errors import FedjouleError
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.protocols import buffered_step, mixed, staleness_weight
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world
from tests.simulator.killing import compare

M, STEPS, BATCH, SNR_DB, UP_HZ, DOWN_HZ = 4, 4, 10, 10.0, 1e6, 20e6
FIXED = [
    "population.size=8",
    f"training.clients_per_round={M}",
    f"training.local_steps={STEPS}",
    f"training.batch_size={BATCH}",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    f"channel.snr_db={SNR_DB}",
    "channel.fading=none",
    f"channel.uplink_bandwidth_hz={UP_HZ}",
    f"channel.downlink_bandwidth_hz={DOWN_HZ}",
    "population.device_classes=[{name: phone, share: 1.0, cpu_freq_min_hz: 1.5e9, "
    "cpu_freq_max_hz: 1.5e9, kappa: 1e-28, tx_power_dbm: 23, rx_power_w: 0.1}]",
]


def play(extra, rounds):
    """Each row of a run with the global model after it and the records it closed."""
    scenario = load_scenario("default-theory", [*FIXED, f"training.rounds={rounds}", *extra])
    sim = Simulation(build_world(scenario, device="cpu"))
    out = []

    def on_round(row):
        spans = [(rec.client, rec.spans[0][1], rec.end_s) for rec in sim.last_records]
        out.append((row, sim.state["w"].clone(), spans))

    sim.run(rounds, on_round)
    return sim, out


def test_the_protocol_formulas():
    assert staleness_weight("constant", 7, 0.5, 4) == 1.0
    assert staleness_weight("polynomial", 3, 0.5, 4) == pytest.approx(0.5)  # 1/sqrt(1+3)
    assert staleness_weight("hinge", 4, 10, 4) == 1.0
    assert staleness_weight("hinge", 6, 10, 4) == pytest.approx(1 / 21)
    w, wk = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 6.0])
    assert torch.allclose(mixed(w, wk, 0.25), torch.tensor([1.5, 3.0]))
    deltas = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    step = buffered_step(w, deltas, torch.tensor([1.0, 3.0]), torch.tensor([1.0, 0.5]), 2.0)
    # w + 2 (1 x 1 x [1, 0] + 3 x 0.5 x [0, 2]) / 4
    assert torch.allclose(step, torch.tensor([1.5, 3.5]))


@pytest.mark.parametrize(
    "protocol",
    [
        [
            "protocol.kind=buffered",
            f"protocol.concurrency={M}",
            f"protocol.buffer_size={M}",
            "protocol.server_lr=1",
            "protocol.staleness=constant",
        ],
        ["protocol.kind=hierarchical", "protocol.edge_rounds=1"],
    ],
    ids=["buffered", "hierarchical"],
)
def test_fixed_point_equals_sync_fedavg_round_by_round(protocol):
    _, sync = play([], 4)
    _, other = play(protocol, 4)
    assert len(other) == len(sync) == 4
    for (row_s, w_s, _), (row_o, w_o, _) in zip(sync, other, strict=True):
        assert torch.allclose(w_o, w_s, rtol=0, atol=1e-6)
        assert row_o["sim_time_end_s"] == pytest.approx(row_s["sim_time_end_s"], rel=1e-12)
        assert row_o["energy_total_j"] == pytest.approx(row_s["energy_total_j"], rel=1e-12)
        assert row_o["arrived"] == row_s["arrived"] == M
        assert row_o["updates"] == M and row_o["staleness_max"] == 0
    assert not torch.equal(sync[0][1], sync[-1][1])  # the model moved


ASYNC = [
    "population.size=3",
    "training.clients_per_round=3",
    "protocol.kind=async",
    "protocol.concurrency=3",
    "protocol.mixing=0.5",
    "protocol.staleness=polynomial",
    "protocol.staleness_a=0.5",
    "channel.access=ofdma",
    "channel.resource_blocks=3",  # one block per client: uploads never wait or share
    # one class, frequencies drawn uniformly: three distinct compute times
    "population.device_classes=[{name: phone, share: 1.0, cpu_freq_min_hz: 0.5e9, "
    "cpu_freq_max_hz: 2.0e9, kappa: 1e-28, tx_power_dbm: 23, rx_power_w: 0.1}]",
]


def hand_schedule(sim, n_updates):
    """FedAsync's events by hand: client k's cycle is T_k = down + K c B / f_k + up (its
    own resource block, no queue); with 3 clients and 3 slots a client that arrives is
    the only one free, so it is sent out again at once: arrivals at n T_k."""
    s, pop = sim.world.scenario, sim.world.population
    dim, classes = s.dataset.synthetic.dim, s.dataset.synthetic.classes
    bits = (dim * classes + classes) * 32 + s.channel.header_bits
    cycles = 3 * 2 * dim * classes / 4.0  # c = 3 x forward FLOPs / FLOPs per cycle
    se = math.log2(1 + 10 ** (SNR_DB / 10))
    down_s, up_s = bits / (DOWN_HZ * se), bits / (UP_HZ / 3 * se)
    cycle = {k: down_s + STEPS * cycles * BATCH / pop.cpu_freq_hz[k] + up_s for k in range(3)}
    events = sorted(
        (n * cycle[k], k, (n - 1) * cycle[k]) for k in range(3) for n in range(1, n_updates + 1)
    )[:n_updates]
    schedule = []
    for v, (arrive, k, dispatch) in enumerate(events):
        version = sum(t <= dispatch + 1e-12 for t, _, _ in events)  # arrivals seen
        previous = [i for i, e in enumerate(events[:v]) if e[1] == k]
        group = previous[-1] + 1 if previous else 0  # dispatch instants before it
        schedule.append((k, dispatch, arrive, version, v - version, group))
    return schedule


def test_async_dispatch_and_arrival_times_equal_a_hand_written_schedule():
    sim, rows = play(ASYNC, 20)
    schedule = hand_schedule(sim, 20)
    assert len(set(np.round(sim.world.population.cpu_freq_hz, 3))) == 3
    for (row, _, spans), (k, dispatch, arrive, _, stale, _) in zip(rows, schedule, strict=True):
        assert spans == [(k, pytest.approx(dispatch, rel=1e-9), pytest.approx(arrive, rel=1e-9))]
        assert row["sim_time_end_s"] == pytest.approx(arrive, rel=1e-9)
        assert row["staleness_max"] == stale and row["updates"] == 1
    assert max(entry[4] for entry in schedule) >= 2  # stale updates did occur


def test_async_versions_staleness_and_mixed_models_in_closed_form():
    sim, rows = play(ASYNC, 12)
    schedule = hand_schedule(sim, 12)
    lr = sim.world.scenario.training.lr
    ref = Simulation(build_world(sim.world.scenario, device="cpu"))
    models = [ref.state["w"].clone()]  # w_0, w_1, ... by hand
    for k, _, _, version, stale, group in schedule:
        start = {**ref.state, "w": models[version]}
        upload = ref.train_selected(start, np.array([k]), group, lr)[4].uploads["model"][0]
        alpha = 0.5 * (stale + 1) ** -0.5  # mixing x polynomial s(t), a = 0.5
        models.append((1 - alpha) * models[-1] + alpha * upload)
    for v, (row, w, _) in enumerate(rows):
        assert row["round"] == v
        assert torch.allclose(w, models[v + 1], rtol=0, atol=1e-6), v


def test_protocols_refuse_what_they_cannot_run():
    with pytest.raises(FedjouleError, match="does not run algorithm.name=scaffold"):
        load_scenario("default-theory", ["protocol.kind=async", "algorithm.name=scaffold"])
    with pytest.raises(FedjouleError, match="does not run algorithm.name=drfa"):
        load_scenario("default-theory", ["protocol.kind=hierarchical", "algorithm.name=drfa"])
    load_scenario("default-theory", ["protocol.kind=hierarchical", "algorithm.name=feddyn"])
    with pytest.raises(FedjouleError, match="mixing applies to kind async, not to kind sync"):
        load_scenario("default-theory", ["protocol.mixing=0.5"])
    with pytest.raises(FedjouleError, match="protocol.concurrency .1000. exceeds"):
        load_scenario("default-theory", ["protocol.kind=buffered", "protocol.concurrency=1000"])
    with pytest.raises(FedjouleError, match="round.overcommit applies to sync"):
        load_scenario("default-theory", ["protocol.kind=async", "round.overcommit=1.3"])


RESUMED = {
    "async": ["protocol.kind=async", "protocol.concurrency=6"],
    "buffered": ["protocol.kind=buffered", "protocol.concurrency=8", "protocol.buffer_size=3"],
    "hierarchical": [
        "protocol.kind=hierarchical",
        "topology.layout=hexagonal",
        "topology.cells=3",
        "topology.backhaul_capacity_bps=1e8",
        "topology.backhaul_latency_s=0.01",
        "protocol.backhaul_energy_j_per_bit=1e-8",
    ],
}


@pytest.mark.parametrize(
    "kind",
    ["async", "buffered", pytest.param("hierarchical", marks=pytest.mark.slow)],
)
def test_interrupted_protocol_runs_resume_to_identical_files(tmp_path, kind):
    """Stopped after a version with clients in flight and a half-full buffer, then
    resumed (a replay of the timeline to the saved version): the same files as one run."""
    sets = [
        "population.size=20",
        "training.rounds=9",
        "training.local_steps=5",
        "output.events=true",
        "training.eval_every=4",
        *RESUMED[kind],
    ]
    reference, _ = run_scenario(
        load_scenario("default-theory", sets), tmp_path / "ref", device="cpu"
    )
    out = tmp_path / "cut"
    run_scenario(load_scenario("default-theory", sets), out, device="cpu", stop_after=3)
    run_scenario(None, out, device="cpu", resume=True, stop_after=6)
    run_scenario(None, out, device="cpu", resume=True)
    assert compare(reference, out) == []
    # killed after its last checkpoint, before summary.json: the resume only writes it
    (out / "summary.json").unlink()
    run_scenario(None, out, device="cpu", resume=True)
    assert compare(reference, out) == []
    rows = read_rounds(out / "rounds.csv")
    assert [r["round"] for r in rows] == list(range(9))
    if kind != "hierarchical":
        assert max(r["staleness_max"] for r in rows) > 0
    else:
        assert sum(r["energy_backhaul_j"] for r in rows) > 0


@pytest.mark.parametrize("kind", sorted(RESUMED))
def test_the_system_engine_plays_each_protocol_as_the_learning_run_does(kind):
    """--no-train: the numpy engine refuses a protocol and auto falls back to SimPy, whose
    timeline and energy equal the learning run's (they do not depend on the models)."""
    from fedjoule.simulator.system_run import choose_engine
    from fedjoule.simulator.system_simpy import SimpySystemSimulation
    from fedjoule.simulator.system_world import build_system_world

    sets = ["population.size=12", "training.rounds=6", "training.local_steps=2", *RESUMED[kind]]
    scenario = load_scenario("default-theory", sets)
    with pytest.raises(FedjouleError, match=f"protocol.kind={kind}"):
        choose_engine(scenario, "numpy")
    assert choose_engine(scenario, "auto")[0] == "simpy"
    learnt, system = [], []
    Simulation(build_world(scenario, device="cpu")).run(6, learnt.append)
    SimpySystemSimulation(build_system_world(scenario)).run(6, system.append)
    assert len(learnt) == len(system) == 6
    for name in ("sim_time_end_s", "energy_total_j", "updates", "staleness_max", "dropped"):
        assert [r[name] for r in learnt] == pytest.approx([r[name] for r in system], rel=1e-12)
    assert sum(r["updates"] for r in learnt) > 0


def test_a_checkpoint_from_before_the_protocol_section_still_resumes(tmp_path):
    from fedjoule.simulator import checkpoint

    scenario = load_scenario("default-theory", [*FIXED, "training.rounds=2"])
    run_scenario(scenario, tmp_path, device="cpu", stop_after=1)
    saved = checkpoint.read_checkpoint(tmp_path / "checkpoint.pt")
    old = {k: v for k, v in saved["scenario"].items() if k != "protocol"}  # as written before
    saved.update(scenario=old, scenario_sha256=checkpoint.scenario_sha256(old))
    path = tmp_path / "checkpoint.pt"
    checkpoint.check_belongs(saved, path, scenario.model_dump(mode="json"), path)
    other = load_scenario("default-theory", [*FIXED, "training.rounds=2", "protocol.kind=async"])
    with pytest.raises(FedjouleError, match="differ in protocol"):
        checkpoint.check_belongs(saved, path, other.model_dump(mode="json"), path)


def test_compression_is_refused_outside_sync_rounds():
    with pytest.raises(FedjouleError, match="not combined with protocol.kind=async"):
        load_scenario("default-theory", ["protocol.kind=async", "compression.uplink.kind=topk"])
