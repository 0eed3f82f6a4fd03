"""Every algorithm through the simulator: vectorised == sequential (docs/algorithms.md, the checks),
and each one's uplink/downlink vector count reaches the channel (docs/models.md#payload)."""

import math

import numpy as np
import pytest
import torch

from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world

SMALL = [
    "population.size=12",
    "training.clients_per_round=5",
    "training.rounds=4",
    "training.local_epochs=1",  # unequal steps per client: masked in the vectorised executor
    "training.batch_size=10",
    "training.lr=0.05",
    "training.weight_decay=0.001",
    "training.clip_grad_norm=5",
    "dataset.synthetic.avg_samples=40",
    "dataset.synthetic.size_sigma=0.5",
    "model.name=mlp",
    "model.hidden=[8]",
    "model.zero_init=false",
    "population.freeloaders.fraction=0.25",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_vectorised_equals_sequential(name):
    scenario = load_scenario("default-theory", SMALL + [f"algorithm.name={name}"])
    sims = {}
    for kind in ("vectorised", "sequential"):
        sim = Simulation(build_world(scenario, device="cpu", executor=kind))
        sim.run(4, lambda row: None)
        sims[kind] = sim
    vec, seq = sims["vectorised"], sims["sequential"]
    assert (vec.state["w"] - seq.state["w"]).abs().max() < 1e-5
    assert (vec.state["w"] - vec.world.w0).abs().max() > 1e-3  # it trained
    for key, value in vec.state.items():
        if torch.is_tensor(value) and value.is_floating_point():
            assert torch.allclose(value, seq.state[key], atol=1e-5, equal_nan=True), key
    for name_ in vec.store.names:
        assert vec.store.cache[name_].keys() == seq.store.cache[name_].keys()
        ids = torch.tensor(sorted(vec.store.cache[name_]), dtype=torch.long)
        rows_v, rows_s = vec.store.get(name_, ids, "cpu"), seq.store.get(name_, ids, "cpu")
        assert torch.allclose(rows_v, rows_s, atol=1e-5)
    np.testing.assert_array_equal(vec.ledger["selected"], seq.ledger["selected"])


FIXED_LINK = [
    "population.size=8",
    "training.clients_per_round=4",
    "training.rounds=2",
    "channel.snr_db=10",
    "channel.fading=none",
    "channel.uplink_bandwidth_hz=1e6",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    "model.name=mlp",
    "model.hidden=[64]",
    "population.device_classes=[{name: p, share: 1, cpu_freq_min_hz: 1.5e9, "
    "cpu_freq_max_hz: 1.5e9}]",
]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_uplink_airtime_follows_the_vector_count(tmp_path, name):
    """SCAFFOLD's upload takes twice FedAvg's airtime on the same link, and so on
    (docs/algorithms.md#vectors-sent-and-state-kept)."""
    scenario = load_scenario("default-theory", FIXED_LINK + [f"algorithm.name={name}"])
    run_scenario(scenario, tmp_path, device="cpu")
    row = read_rounds(tmp_path / "rounds.csv")[0]
    cls = ALGORITHMS[name][0]
    n_params = 30 * 64 + 64 + 64 * 5 + 5
    bits = cls.uplink_vectors * n_params * 32 + scenario.channel.header_bits
    # 4 equal clients with equal compute share the band all the way: B/4 each
    per_client_s = bits / (1e6 / 4 * math.log2(11))
    training_airtime = 4 * per_client_s
    if cls.needs_probe:  # the probe set adds a 32-bit loss plus header per client
        probe_s = (scenario.channel.header_bits + 32) / (1e6 / 4 * math.log2(11))
        training_airtime += row["probed"] * probe_s
    assert row["uplink_airtime_s"] == pytest.approx(training_airtime, rel=1e-9)
