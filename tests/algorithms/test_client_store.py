"""The client-state store: lazy rows, spilling past a budget, resuming from a checkpoint."""

import csv

import torch

from fedjoule.algorithms.client_store import ClientStore
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.checkpoint import read_checkpoint
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


def test_a_checkpoint_writes_only_the_changed_rows(tmp_path):
    """In memory (no budget), a checkpoint appends the rows set since the last one."""
    store = ClientStore(("c", "h"), 10, spill_path=tmp_path / "s.bin")
    store.set("c", torch.tensor([1, 2, 5]), torch.ones(3, 10))
    store.state_dict()
    assert store.file_bytes == 3 * 40
    store.set("h", torch.tensor([2]), torch.ones(1, 10))
    saved = store.state_dict()
    assert store.file_bytes == 4 * 40 and saved["length"] == 4 * 40
    assert not store.spilling  # every row is still in memory too
    store.close()
    again = ClientStore(("c", "h"), 10, spill_path=tmp_path / "s.bin")
    again.load_state_dict(saved)
    assert torch.equal(again.get("c", torch.tensor([5, 3]), "cpu").sum(1), torch.tensor([10.0, 0]))
    assert torch.equal(again.get("h", torch.tensor([2]), "cpu"), torch.ones(1, 10))


def test_stateless_algorithms_leave_no_file(tmp_path):
    store = ClientStore((), 10, spill_path=tmp_path / "s.bin")
    assert store.state_dict() == {"rows": {}}
    assert list(tmp_path.iterdir()) == []


def test_compaction_bounds_the_file_and_keeps_old_checkpoints_valid(tmp_path):
    base = tmp_path / "s.bin"
    store = ClientStore(("c",), 10, spill_path=base)
    checkpoints = []
    for step in range(8):  # the same 3 clients rewritten: most of the file goes stale
        store.set("c", torch.tensor([0, 1, 2]), torch.full((3, 10), float(step)))
        checkpoints.append(store.state_dict())
        assert store.file_bytes <= 2 * store.live_bytes == 2 * 3 * 40
        if step < 6:
            store.commit()
    # compactions at steps 2, 4 and 6 (file 3 rows long: 9 rows > 2 x 3); the last one's
    # old file waits for its commit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s-2.bin", "s-3.bin"]
    assert [c["file"] for c in checkpoints] == ["s.bin"] * 2 + ["s-1.bin"] * 2 + ["s-2.bin"] * 2 + [
        "s-3.bin"
    ] * 2
    store.close()
    # the checkpoint saved before the uncommitted compaction still reads its own rows,
    # and the newer file it does not name is removed
    again = ClientStore(("c",), 10, spill_path=base)
    again.load_state_dict(checkpoints[5])
    assert torch.equal(again.get("c", torch.tensor([1]), "cpu"), torch.full((1, 10), 5.0))
    assert [p.name for p in tmp_path.iterdir()] == [checkpoints[5]["file"]]


def rounds(path):
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in csv.DictReader(f)]


def test_spilling_run_equals_in_memory_run_and_resumes(tmp_path):
    scenario = load_scenario(
        "default-theory",
        [
            "algorithm.name=scaffold",
            "training.rounds=6",
            "population.size=20",
            "model.name=mlp",
            "model.hidden=[32]",
        ],
    )
    _, memory = run_scenario(scenario, tmp_path / "memory", device="cpu")
    tiny = 0.05  # MB: a few rows, so nearly everything spills
    _, spilled = run_scenario(scenario, tmp_path / "spill", device="cpu", state_memory_mb=tiny)
    # 10 of 20 clients rewrite their c_i each round: the files were compacted, and only
    # the generation the last checkpoint names is left
    files = [p.name for p in (tmp_path / "spill").glob("client_state*.bin")]
    assert len(files) == 1 and files[0] != "client_state.bin"
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
        final[name] = read_checkpoint(tmp_path / name / "checkpoint.pt")["simulation"]["state"]
    assert torch.equal(final["memory"]["w"], final["spill"]["w"])
    assert torch.equal(final["memory"]["w"], final["cut"]["w"])
