"""Issue-level checks on real MNIST (slow: `make test-slow`)."""

import os

import pytest

from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("FEDJOULE_DATA_DIR"), reason="needs FEDJOULE_DATA_DIR"),
]


def test_mnist_dirichlet_reaches_90_percent_in_30_rounds(tmp_path):
    _, summary = run_scenario(
        load_scenario("mnist-dirichlet", ["training.rounds=30"]), tmp_path, device="cpu"
    )
    print(summary)
    assert summary["final_accuracy"] >= 0.90


def totals(tmp_path, label, *overrides):
    s = load_scenario("mnist-dirichlet", ["training.rounds=3", "training.eval_every=3", *overrides])
    run_scenario(s, tmp_path / label, device="cpu")
    rows = read_rounds(tmp_path / label / "rounds.csv")
    out = {
        k: sum(r[k] for r in rows) for k in ("uplink_airtime_s", "energy_tx_j", "energy_compute_j")
    }
    print(label, out)
    return out


def test_channel_and_local_steps_move_energy_the_right_way(tmp_path):
    high = totals(tmp_path, "snr20", "channel.snr_db=20")
    low = totals(tmp_path, "snr5", "channel.snr_db=5")
    narrow = totals(tmp_path, "snr20-2MHz", "channel.snr_db=20", "channel.uplink_bandwidth_hz=2e6")
    more_k = totals(tmp_path, "snr20-k100", "channel.snr_db=20", "training.local_steps=100")
    for worse in (low, narrow):
        assert worse["uplink_airtime_s"] > high["uplink_airtime_s"]
        assert worse["energy_tx_j"] > high["energy_tx_j"]
    assert more_k["energy_compute_j"] == pytest.approx(2 * high["energy_compute_j"], rel=1e-9)
    geometry = totals(tmp_path, "geometry-10MHz")
    geometry_narrow = totals(tmp_path, "geometry-2MHz", "channel.uplink_bandwidth_hz=2e6")
    assert geometry_narrow["uplink_airtime_s"] > geometry["uplink_airtime_s"]
    assert geometry_narrow["energy_tx_j"] > geometry["energy_tx_j"]
