"""channel.interference=cochannel in whole runs (SimPy engine, training skipped)."""

import csv
import json

import numpy as np
import pytest

from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.system_run import run_system

BASE = ["training.rounds=3", "output.timeline_rounds=[]"]


def run(tmp_path, name, *overrides):
    scenario = load_scenario("dense-small-cells", [*BASE, *overrides])
    out, summary = run_system(scenario, tmp_path / name, engine="simpy")
    with open(out / "clients.csv") as f:
        rows = list(csv.DictReader(f))
    return summary, rows


def test_reuse_7_on_7_cells_is_interference_free_and_reuse_1_is_not(tmp_path):
    none, rows_none = run(tmp_path, "none")
    own, rows_own = run(
        tmp_path, "own", "channel.interference=cochannel", "topology.reuse_factor=7"
    )
    shared, rows_shared = run(tmp_path, "shared", "channel.interference=cochannel")
    # reuse 7 on 7 cells: every cell alone in its group, the SINR is the SNR: same run
    for key in ("sim_time_s", "energy_total_j", "energy_tx_j", "energy_rx_j"):
        assert own[key] == pytest.approx(none[key], rel=1e-9)
    assert "mean_uplink_sinr_db" not in rows_none[0]
    # reuse 1: every upload shares its band with the other cells' -> longer and costlier
    assert shared["energy_tx_j"] > none["energy_tx_j"]
    assert shared["energy_rx_j"] > none["energy_rx_j"]
    sent = [r for r in rows_shared if int(r["selected"]) > 0 and r["mean_uplink_sinr_db"]]
    assert sent
    sinr_own = {
        r["client"]: float(r["mean_uplink_sinr_db"]) for r in rows_own if r["p5_uplink_sinr_db"]
    }
    for r in sent:
        assert float(r["p5_uplink_sinr_db"]) <= float(r["mean_uplink_sinr_db"]) + 1e-9
        if r["client"] in sinr_own:  # same fades; interference only lowers the SINR
            assert float(r["mean_uplink_sinr_db"]) <= sinr_own[r["client"]] + 1e-9
    # every joule adds up: clients.csv = summary
    total = sum(float(r["energy_total_j"]) for r in rows_shared)
    assert total == pytest.approx(shared["energy_total_j"], rel=1e-9)


def test_fixed_rate_fails_on_the_minimum_sinr(tmp_path):
    # at r = 6 bit/s/Hz (SINR threshold 63, 18 dB) many attempts fail under interference
    fixed = ["channel.rate=fixed", "channel.spectral_efficiency_bits_per_hz=6.0"]
    free, _ = run(
        tmp_path, "free", *fixed, "channel.interference=cochannel", "topology.reuse_factor=7"
    )
    none, _ = run(tmp_path, "none", *fixed)
    shared, _ = run(tmp_path, "shared", *fixed, "channel.interference=cochannel")
    assert free["dropped_outage"] == none["dropped_outage"]
    assert shared["dropped_outage"] > none["dropped_outage"]


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["topology.layout=grid", "topology.reuse_factor=3"], "topology.reuse_factor"),
        (["channel.interference=cochannel", "channel.snr_db=10"], "channel.interference"),
        (["topology.reuse_factor=5"], "reuse_factor"),
    ],
)
def test_bad_interference_settings_name_the_field(overrides, field):
    with pytest.raises(FedjouleError, match=field):
        load_scenario("dense-small-cells", overrides)


def test_numpy_engine_declares_cochannel_unsupported():
    from fedjoule.simulator.system import unsupported

    scenario = load_scenario("dense-small-cells", ["channel.interference=cochannel"])
    assert any("cochannel" in reason for reason in unsupported(scenario))
    assert json.dumps(np.zeros(1).tolist())  # (keeps the imports honest)


def test_training_run_resumes_to_the_same_sinr_columns(tmp_path):
    from fedjoule.simulator.run import run_scenario

    s = load_scenario(
        "dense-small-cells-interference",
        ["training.rounds=3", "output.timeline_rounds=[]", "population.size=42",
         "training.clients_per_round=8", "round.min_clients=2", "dataset.synthetic.dim=10",
         "model.hidden=[8]"],
    )
    whole, _ = run_scenario(s, tmp_path / "whole", device="cpu")
    part = tmp_path / "part"
    run_scenario(s, part, device="cpu", stop_after=1)
    run_scenario(None, part, device="cpu", resume=True)
    a, b = (whole / "clients.csv").read_text(), (part / "clients.csv").read_text()
    assert a == b
    assert "p5_uplink_sinr_db" in a.splitlines()[0]


def test_capacity_models_interference_on_the_simpy_engine(tmp_path):
    import fedjoule

    def answer(name, *overrides):
        small = ["population.size=56", "training.clients_per_round=8", "round.min_clients=2"]
        s = load_scenario("dense-small-cells", ["output.timeline_rounds=[]", *small, *overrides])
        return fedjoule.capacity(
            s, tmp_path / name, search="uplink_bandwidth_hz", rounds=3
        ).answer

    numpy_none = answer("none")
    # reuse 7 on 7 cells: no co-channel cell; the SimPy path gives the numpy engine's answer
    simpy_free = answer("free", "channel.interference=cochannel", "topology.reuse_factor=7")
    assert simpy_free == pytest.approx(numpy_none, rel=1e-9)
    # reuse 1: the uploads share their band with the other cells': more bandwidth needed
    assert answer("shared", "channel.interference=cochannel") > 1.5 * numpy_none
