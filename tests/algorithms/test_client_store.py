"""The client-state store: lazy rows, spilling past a budget, resuming from a checkpoint."""

import csv

import torch

from fedjoule.algorithms.client_store import ClientStore
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario


def test_spilled_rows_read_back_exactly_and_memory_stays_in_budget(tmp_path):
    gen = torch.Generator().manual_seed(0)
    store = ClientStore(("c",), 1000, budget_bytes=3 * 4000, spill_path=tmp_path / "s.bin")
    written = {}
    for _ in range(10):
        ids = torch.randint(0, 30, (4,), generator=gen).unique()
        values = torch.randn(len(ids), 1000, generator=gen)
        store.set("c", ids, values)
        written.update({int(k): v.clone() for k, v in zip(ids, values, strict=True)})
        assert store.cached_bytes <= 3 * 4000
    assert store.spilling and (tmp_path / "s.bin").stat().st_size > 0
    ids = torch.tensor(sorted(written) + [99])  # 99 was never written: zeros
    rows = store.get("c", ids, "cpu")
    for row, k in enumerate(ids.tolist()[:-1]):
        assert torch.equal(rows[row], written[k])
    assert torch.equal(rows[-1], torch.zeros(1000))


def test_a_checkpoint_survives_rows_written_after_it(tmp_path):
    store = ClientStore(("c",), 10, budget_bytes=40, spill_path=tmp_path / "s.bin")
    store.set("c", torch.tensor([1, 2]), torch.ones(2, 10))
    saved = store.state_dict()
    store.set("c", torch.tensor([1, 3]), torch.full((2, 10), 7.0))
    store.state_dict()  # later rows reach the file
    store.close()
    again = ClientStore(("c",), 10, budget_bytes=40, spill_path=tmp_path / "s.bin")
    again.load_state_dict(saved)
    rows = again.get("c", torch.tensor([1, 2, 3]), "cpu")
    assert torch.equal(rows, torch.cat([torch.ones(2, 10), torch.zeros(1, 10)]))


def rounds(path):
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in csv.DictReader(f)]


def test_spilling_run_equals_in_memory_run_and_resumes(tmp_path):
    scenario = load_scenario(
        "default",
        [
            "algorithm.name=scaffold",
            "training.rounds=6",
            "population.size=60",
            "model.name=mlp",
            "model.hidden=[32]",
        ],
    )
    _, memory = run_scenario(scenario, tmp_path / "memory", device="cpu")
    tiny = 0.05  # MB: a few rows, so nearly everything spills
    _, spilled = run_scenario(scenario, tmp_path / "spill", device="cpu", state_memory_mb=tiny)
    assert (tmp_path / "spill" / "client_state.bin").stat().st_size > 0
    run_scenario(scenario, tmp_path / "cut", device="cpu", state_memory_mb=tiny, stop_after=3)
    _, resumed = run_scenario(
        None, tmp_path / "cut", device="cpu", state_memory_mb=tiny, resume=True
    )
    for summary in (memory, spilled, resumed):
        summary.pop("wall_time_s")
    assert memory == spilled == resumed
    assert rounds(tmp_path / "memory" / "rounds.csv") == rounds(tmp_path / "cut" / "rounds.csv")
    final = {}
    for name in ("memory", "spill", "cut"):
        final[name] = torch.load(tmp_path / name / "checkpoint.pt", weights_only=False)["state"]
    assert torch.equal(final["memory"]["w"], final["spill"]["w"])
    assert torch.equal(final["memory"]["w"], final["cut"]["w"])
