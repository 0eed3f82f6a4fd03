"""The wireless scenario library: each runs and shows the effect it is there for."""

import csv

import pytest

from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario

LIBRARY = ["urban-macro", "rural-iot-low-snr", "dense-small-cells", "diurnal-phones"]


def run(name, tmp_path, *overrides):
    run_scenario(load_scenario(name, list(overrides)), tmp_path, device="cpu")
    return read_rounds(tmp_path / "rounds.csv")


@pytest.mark.parametrize("name", LIBRARY)
def test_library_scenario_is_built_in(name):
    assert load_scenario(name).name == name


def test_urban_macro_overcommits_and_draws_its_timeline(tmp_path):
    rows = run("urban-macro", tmp_path, "training.rounds=2")
    for row in rows:
        assert row["selected"] == 13 and row["arrived"] + row["dropped"] == 13
        assert row["arrived"] <= 10
    assert (tmp_path / "timeline_round_0.png").stat().st_size > 10_000
    assert (tmp_path / "events.jsonl").exists()


def test_rural_iot_spends_most_energy_transmitting(tmp_path):
    rows = run("rural-iot-low-snr", tmp_path, "training.rounds=3")
    tx = sum(r["energy_tx_j"] for r in rows)
    assert tx > 0.9 * sum(r["energy_total_j"] for r in rows)
    assert tx > 1000 * sum(r["energy_compute_j"] for r in rows)


def test_dense_small_cells_have_different_loads(tmp_path):
    run("dense-small-cells", tmp_path, "training.rounds=1")
    with (tmp_path / "clients.csv").open() as f:
        cells = [int(r["cell"]) for r in csv.DictReader(f)]
    counts = [cells.count(c) for c in range(7)]
    assert min(counts) > 0 and counts[0] == max(counts) and counts[0] > 2 * min(counts)


def test_diurnal_phones_participation_falls_and_rises(tmp_path):
    rows = run("diurnal-phones", tmp_path, "training.eval_every=48")
    online = [r["online"] for r in rows]
    assert rows[-1]["sim_time_start_s"] == 47 * 1800
    low = min(range(48), key=online.__getitem__)
    assert max(online[:low]) > 5 * online[low] and max(online[low:]) > 5 * online[low]
