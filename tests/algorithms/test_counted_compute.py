"""An algorithm's computation is counted, not declared (algorithms/work.py): a plug-in whose
step takes two gradients pays twice FedAvg's compute, STEM pays its closed-form factor, the
count is the same under every executor and client set, the engines without training charge
the learning engine's count, and compute_time_to_target_s sums rounds.csv's slowest arrived
computations up to the target, also across a kill and resume."""

import json
import math

import pytest
import torch

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.client_store import ClientStore
from fedjoule.algorithms.executor import SequentialExecutor, VectorisedExecutor
from fedjoule.algorithms.learning import (
    aggregate_arrived,
    dry_count,
    keep_client_state,
    train_clients,
)
from fedjoule.algorithms.registry import ALGORITHMS, build_algorithm
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_run import run_system
from tests.simulator.test_round_accounting import BATCH, STEPS, hand_costs, scenario

TWO_GRADIENTS = '''
from fedjoule.algorithms.base import Algorithm


class ExtraGradient(Algorithm):
    """Extragradient: the gradient at a look-ahead point theta - lr g(theta)."""

    def direction(self, k, params, grad_at, ctx, setup, active):
        return grad_at(params - setup.lr * grad_at(params))
'''


def rounds_of(tmp_path, name, *extra):
    run, _ = run_scenario(scenario(*extra), tmp_path / name, device="cpu")
    return read_rounds(run / "rounds.csv")


def test_a_plugin_taking_two_gradients_per_step_pays_twice_fedavgs_compute(tmp_path):
    (tmp_path / "extra.py").write_text(TWO_GRADIENTS)
    spec = f"algorithm={{name: custom, class: '{tmp_path / 'extra.py'}:ExtraGradient'}}"
    plug = rounds_of(tmp_path, "plug", spec)
    fedavg = rounds_of(tmp_path, "fedavg")
    for p, f in zip(plug, fedavg, strict=True):
        assert p["arrived"] == f["arrived"] > 0
        assert p["energy_compute_j"] == pytest.approx(2 * f["energy_compute_j"], rel=1e-12)
        assert p["compute_time_s"] == pytest.approx(2 * f["compute_time_s"], rel=1e-12)
        assert p["max_compute_time_s"] == pytest.approx(2 * f["max_compute_time_s"], rel=1e-12)


def test_stem_pays_its_counted_gradients_and_vector_flops(tmp_path):
    """STEM: one gradient at the first step of its first round, none at the first step of
    later rounds (it steps along the broadcast momentum), two at every other step, and
    3 FLOPs per parameter per step; FedAvg's step is one gradient."""
    s = scenario()
    stem, fedavg = rounds_of(tmp_path, "stem", "algorithm.name=stem"), rounds_of(tmp_path, "avg")
    dim, classes = s.dataset.synthetic.dim, s.dataset.synthetic.classes
    params, forward = dim * classes + classes, 2 * dim * classes  # the logistic model
    vector = STEPS * 3 * params / (3 * forward * BATCH)  # in one gradient's training FLOPs
    for r, (a, f) in enumerate(zip(stem, fedavg, strict=True)):
        gradients = 2 * (STEPS - 1) + (1 if r == 0 else 0)
        factor = (gradients + vector) / STEPS
        assert a["energy_compute_j"] == pytest.approx(factor * f["energy_compute_j"], rel=1e-12)
        # FedAvg's compute is the step formula's K steps, as before the counting
        step_j = hand_costs(s)["step_j"]
        assert f["energy_compute_j"] == pytest.approx(f["arrived"] * STEPS * step_j, rel=1e-12)
        # the server's aggregation: a multiply and an add per parameter and upload, 1e10 FLOP/s
        assert f["server_compute_time_s"] == pytest.approx(2 * f["arrived"] * params / 1e10)


def count_per_step(name, executor, steps, rounds=3, budget_mb=None):
    """Each round's gradient evaluations per step of algorithm `name` training clients with
    `steps` local steps (some 0: freeloaders) on a small softmax regression."""
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, 6, generator=gen), torch.randint(0, 3, (300,), generator=gen)

    def loss(w, xb, yb):
        return torch.nn.functional.cross_entropy(xb @ w.view(6, 3), yb)

    m = len(steps)
    config = load_scenario("default-theory", [f"algorithm.name={name}"]).algorithm
    algorithm = build_algorithm(config, m, torch.full((m,), 60), max(steps), 0.1)
    ex = executor(loss, x, y, torch.device("cpu"))
    if budget_mb is not None:
        ex.memory_budget_mb = budget_mb
        assert ex.chunk_size(18, 4) < m  # several chunks
    store = ClientStore(algorithm.client_state, 18)
    state = algorithm.init_state(torch.zeros(18))
    ids, everyone = torch.arange(m), torch.ones(m, dtype=torch.bool)
    counts = []
    for r in range(rounds):
        setup = RoundSetup(0.1, torch.tensor(steps), r)
        batches = torch.randint(0, 300, (m, max(steps), 4), generator=gen)
        result = train_clients(algorithm, ex, state, ids, setup, batches, store)
        keep_client_state(store, result, everyone)
        state = aggregate_arrived(algorithm, state, result, everyone)
        counts.append(result.gradients.per_step)
    return counts


STEPS_OF_CLIENTS = [5, 2, 0, 5, 3]  # a client with no steps: a freeloader


def test_the_count_is_the_same_for_every_executor_and_client_set():
    """STEM (the general path, two gradients a step): sequential, vectorised, chunked and a
    client alone count alike; one gradient, then the broadcast momentum, then two a step."""
    sequential = count_per_step("stem", SequentialExecutor, STEPS_OF_CLIENTS)
    assert count_per_step("stem", VectorisedExecutor, STEPS_OF_CLIENTS) == sequential
    chunked = count_per_step("stem", VectorisedExecutor, STEPS_OF_CLIENTS, budget_mb=1e-4)
    assert chunked == sequential
    assert count_per_step("stem", SequentialExecutor, [5]) == sequential  # a client alone
    assert sequential == [[1, 2, 2, 2, 2], [0, 2, 2, 2, 2], [0, 2, 2, 2, 2]]


def test_the_dry_count_of_the_engines_without_training_is_the_learning_count():
    """For every built-in algorithm: rounds 0 and 1 of the dry count, and round 1's again
    for later rounds, equal the learning engine's counts."""
    for name in sorted(ALGORITHMS):
        learned = count_per_step(name, SequentialExecutor, STEPS_OF_CLIENTS)
        dry = dry_count(load_scenario("default-theory", [f"algorithm.name={name}"]).algorithm, 5)
        assert [dry[0], dry[1], dry[1]] == learned, name
        two = [[1, 2, 2, 2, 2], [0, 2, 2, 2, 2], [0, 2, 2, 2, 2]]
        assert learned == (two if name == "stem" else [[1] * 5] * 3), name


def test_the_engines_without_training_charge_stems_count(tmp_path):
    s = scenario("algorithm.name=stem", "output.events=false")
    learning = rounds_of(tmp_path, "learn", "algorithm.name=stem")
    for engine in ("numpy", "simpy"):
        run, _ = run_system(s, tmp_path / engine, engine=engine)
        for a, b in zip(learning, read_rounds(run / "rounds.csv"), strict=True):
            for column in ("energy_compute_j", "compute_time_s", "max_compute_time_s"):
                assert b[column] == pytest.approx(a[column], rel=1e-12), (engine, column)
            assert b["server_compute_time_s"] == a["server_compute_time_s"]


SPREAD = (
    "population.device_classes=[{name: phone, share: 1.0, cpu_freq_min_hz: 0.3e9, "
    "cpu_freq_max_hz: 3.0e9, kappa: 1e-28, tx_power_dbm: 23, rx_power_w: 0.1}]"
)


def test_compute_time_to_target_sums_the_slowest_arrivals_and_survives_a_resume(tmp_path):
    """The TACO paper's time to accuracy: the slowest arrived client's computation summed
    over the rounds up to the target (rounds.csv max_compute_time_s), communication left out;
    over-committed clients (the slowest, stopped) do not count."""
    s = scenario(
        "training.rounds=8", "training.target_value=0.55", SPREAD, "round.overcommit=2",
        "output.events=true",
    )  # fmt: skip
    whole, summary = run_scenario(s, tmp_path / "whole", device="cpu")
    rows = read_rounds(whole / "rounds.csv")
    reached = summary["rounds_to_target"]
    assert reached is not None and 1 < reached < 8
    spans = [json.loads(line) for line in (whole / "events.jsonl").read_text().splitlines()]
    slower_dropped = 0
    for row in rows:
        own = [e for e in spans if e["kind"] == "compute" and e["round"] == row["round"]]
        arrived = [e["end_s"] - e["start_s"] for e in own if e["outcome"] == "arrived"]
        others = [e["end_s"] - e["start_s"] for e in own if e["outcome"] != "arrived"]
        assert row["max_compute_time_s"] == pytest.approx(max(arrived), rel=1e-9)
        slower_dropped += max(others, default=0.0) > max(arrived)
    assert slower_dropped > 0
    expected = math.fsum(row["max_compute_time_s"] for row in rows[:reached])
    assert summary["compute_time_to_target_s"] == pytest.approx(expected, rel=1e-12)
    assert summary["compute_time_to_target_s"] < summary["time_to_target_s"]
    # stopped after two rounds and resumed: the same figures
    part = tmp_path / "part"
    run_scenario(s, part, device="cpu", stop_after=2)
    _, resumed = run_scenario(s, part, device="cpu", resume=True)
    assert resumed["compute_time_to_target_s"] == summary["compute_time_to_target_s"]
    assert [r["max_compute_time_s"] for r in read_rounds(part / "rounds.csv")] == [
        r["max_compute_time_s"] for r in rows
    ]
