"""Update compression the learning feels (docs/compression.md): the encodings' closed forms,
their exact sizes on the air, error feedback, executors and resume."""

import json
import math

import pytest
import torch
import yaml

import fedjoule
from fedjoule import load_scenario
from fedjoule.algorithms.base import Context
from fedjoule.algorithms.compression import (
    Compressor,
    qsgd,
    round_to_width,
    scaled_sign,
    top_k,
)
from fedjoule.algorithms.registry import ALGORITHMS
from fedjoule.errors import FedjouleError
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.system_world import build_system_world, model_size
from fedjoule.simulator.world import build_world

SMALL = [
    "population.size=12",
    "training.clients_per_round=5",
    "training.local_steps=3",
    "training.batch_size=10",
    "training.lr=0.05",
    "dataset.synthetic.avg_samples=40",
    "model.name=mlp",
    "model.hidden=[8]",
    "model.zero_init=false",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
]


def small(**extra) -> dict:
    """SMALL as a dict of overrides, plus `extra`."""
    return {**{k: yaml.safe_load(v) for k, v in (i.split("=", 1) for i in SMALL)}, **extra}


def run_small(tmp_path, name, extra, rounds=3, **kwargs):
    overrides = small()
    overrides.update({"training.rounds": rounds, "output.events": True, **extra})
    return fedjoule.run(
        "default-theory", tmp_path / name, overrides=overrides, device="cpu", **kwargs
    )


# ---------------------------------------------------------------------- sizes on the air
def expected_bits(kind, n_params, header=1_000, float_bits=32):
    """The documented encodings (docs/compression.md#bits), written out by hand."""
    if kind == "none":
        return n_params * float_bits + header
    if kind == "qsgd":  # levels 8: 17 symbols, 5 bits each, and the norm
        return 32 + 5 * n_params + header
    if kind == "topk":  # fraction 0.1: k = ceil(0.1 P) values and their positions
        k = math.ceil(0.1 * n_params)
        return k * float_bits + min(k * math.ceil(math.log2(n_params)), n_params) + header
    return 32 + n_params + header  # sign: the scale and one bit each


SPECS = {
    "none": {"kind": "none"},
    "qsgd": {"kind": "qsgd", "levels": 8},
    "topk": {"kind": "topk", "fraction": 0.1, "error_feedback": True},
    "sign": {"kind": "sign", "error_feedback": True},
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_uplink_bits_are_the_encoding_size_to_the_bit(tmp_path, kind):
    result = run_small(tmp_path, kind, {"compression.uplink": SPECS[kind]}, rounds=1)
    scenario = load_scenario("default-theory", small())
    n_params, _ = model_size(scenario)
    bits = expected_bits(kind, n_params)
    events = [json.loads(line) for line in open(result.folder / "events.jsonl")]
    uplinks = [e for e in events if e["kind"] == "uplink"]
    assert uplinks and {e["bits"] for e in uplinks} == {bits}
    for row in result.rounds:
        assert row["uplink_bits"] == row["uplink_attempts"] * bits
    # the system-only engines (numpy and SimPy) charge the same bits
    assert build_system_world(load_scenario(result.folder / "scenario.yaml")).uplink_bits == bits


def test_topk_bitmap_when_cheaper_and_half_floats():
    from fedjoule.algorithms.compression import vector_bits

    class Spec:
        kind, fraction = "topk", 0.5

    # P = 1000: k = 500 indices of 10 bits (5,000) > a 1,000-bit bitmap
    assert vector_bits(Spec, 1000, 16) == 500 * 16 + 1000
    Spec.fraction = 0.01  # k = 10: 100 bits of indices
    assert vector_bits(Spec, 1000, 64) == 10 * 64 + 100


# ---------------------------------------------------------------------- the encodings
def test_qsgd_is_unbiased_and_within_its_variance_bound():
    """E Q(v) = v and E|Q(v) - v|^2 <= min(P / s^2, sqrt(P) / s) |v|^2 (Alistarh et al. 2017,
    Lemma 3.1); 20,000 draws, fixed seed."""
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(1, 50, generator=gen, dtype=torch.float64)
    draws, levels = 20_000, 2
    uniform = torch.rand(draws, 50, generator=gen, dtype=torch.float64)
    q = qsgd(v.expand(draws, -1), levels, uniform)
    norm = v.norm()
    # each entry of Q(v) lies on the grid |v| l / s and is within |v| / s of v_i: the
    # mean of 20,000 draws is within 5 standard errors (|v| / s / (2 sqrt(n)))
    tolerance = 5 * norm / levels / (2 * draws**0.5)
    assert (q.mean(0) - v[0]).abs().max() < tolerance
    variance = ((q - v) ** 2).sum(1).mean()
    bound = min(50 / levels**2, 50**0.5 / levels) * norm**2
    assert variance <= bound
    levels_seen = (q.abs() / norm * levels).round()
    assert torch.allclose(q.abs() / norm * levels, levels_seen, atol=1e-9)  # on the grid
    assert torch.equal(qsgd(torch.zeros(2, 5), 4, torch.rand(2, 5)), torch.zeros(2, 5))


def test_topk_keeps_exactly_k_largest_entries():
    gen = torch.Generator().manual_seed(1)
    v = torch.randn(4, 100, generator=gen)
    out = top_k(v, 7, 32)
    assert ((out != 0).sum(1) == 7).all()
    for row in range(4):
        kept = out[row].nonzero().flatten()
        assert torch.equal(out[row, kept], v[row, kept])
        assert v[row].abs()[kept].min() >= v[row].abs().sort().values[-7]
    half = top_k(v, 7, 16)  # the values as IEEE half
    assert torch.equal(half, round_to_width(out, 16))


def test_sign_scale_is_the_mean_magnitude():
    v = torch.tensor([[3.0, -1.0, 0.0, -2.0], [0.5, 0.5, -0.5, 0.5]])
    assert torch.equal(
        scaled_sign(v), torch.tensor([[1.5, -1.5, 1.5, -1.5], [0.5, 0.5, -0.5, 0.5]])
    )


@pytest.mark.parametrize("kind", ["topk", "sign"])
def test_error_feedback_residual_identity(kind):
    """delta + e_old = decoded + e_new: exactly for top-k (each entry is kept or left in
    the residual), to float rounding for sign."""
    scenario = load_scenario(
        "default-theory", {"compression.uplink": {**SPECS[kind], "error_feedback": True}}
    )
    algorithm = ALGORITHMS["fedavg"][0]
    compressor = Compressor.build(scenario, torch.zeros(30))
    gen = torch.Generator().manual_seed(2)
    start = torch.randn(30, generator=gen)
    params = start + torch.randn(4, 30, generator=gen)
    e_old = torch.randn(4, 30, generator=gen) * 0.1
    ctx = Context(shared={"start": start})
    algo = algorithm(ALGORITHMS["fedavg"][1](), 10, torch.ones(10), 1, 0.1, 0)
    uploads, updates = compressor.uplink_step(
        algo, {"model": params}, ctx, {"residual_model": e_old}, torch.arange(4), 0
    )
    p = (params - start) + e_old
    decoded = uploads["model"] - start
    e_new = updates["residual_model"]
    if kind == "topk":
        assert torch.equal(top_k(p, 3, 32) + e_new, p)
        assert torch.equal(e_new, p - top_k(p, 3, 32))
        assert ((e_new == 0).sum(1) == 3).all()
    else:
        assert torch.allclose(decoded + e_new, p, atol=1e-6)
        assert torch.equal(e_new, p - scaled_sign(p))


# ---------------------------------------------------------------------- runs
def test_executors_agree_with_compression():
    extra = {
        "compression.uplink": {"kind": "topk", "fraction": 0.3, "error_feedback": True},
        "compression.downlink": {"kind": "qsgd", "levels": 16},
        "algorithm.name": "fedprox",
    }
    scenario = load_scenario("default-theory", small(**extra))
    sims = {}
    for kind in ("vectorised", "sequential"):
        sim = Simulation(build_world(scenario, device="cpu", executor=kind))
        sim.run(3, lambda row: None)
        sims[kind] = sim
    vec, seq = sims["vectorised"], sims["sequential"]
    assert (vec.state["w"] - seq.state["w"]).abs().max() < 1e-5
    assert (vec.state["w"] - vec.world.w0).abs().max() > 1e-3
    assert set(vec.store.names) == {"residual_model", "downlink_model"}
    for name in vec.store.names:
        ids = torch.tensor(sorted(vec.store.cache[name]), dtype=torch.long)
        assert len(ids) > 0
        assert torch.allclose(
            vec.store.get(name, ids, "cpu"), seq.store.get(name, ids, "cpu"), atol=1e-5
        )


def test_stop_and_resume_with_error_feedback_reproduces_the_files(tmp_path):
    extra = {"compression.uplink": {"kind": "topk", "fraction": 0.1, "error_feedback": True}}
    whole = run_small(tmp_path, "whole", extra, rounds=4)
    part = run_small(tmp_path, "part", extra, rounds=4, on_round=lambda row: row["round"] < 1)
    assert part.stopped_early
    resumed = fedjoule.run(None, tmp_path / "part", resume=True, device="cpu")
    for name in ("rounds.csv", "events.jsonl", "clients.csv"):
        a = (whole.folder / name).read_text().splitlines()
        b = (resumed.folder / name).read_text().splitlines()
        if name == "rounds.csv":  # wall_time_s aside
            a, b = ([line.rsplit(",", 1)[0] for line in x] for x in (a, b))
        assert a == b, name


def test_every_builtin_algorithm_compresses_or_is_refused_with_its_reason(tmp_path):
    """Each built-in algorithm sends uplink_vectors wire vectors; those that allow downlink
    compression run with it; the others are refused naming why."""
    overrides = small()
    refused = {}
    for name, (cls, _) in ALGORITHMS.items():
        assert len(cls.uplink_wire) == cls.uplink_vectors, name
        extra = {
            "algorithm.name": name,
            "compression.uplink": {"kind": "qsgd", "levels": 4},
            "compression.downlink": {"kind": "topk", "fraction": 0.5},
        }
        try:
            scenario = load_scenario("default-theory", {**overrides, **extra})
        except FedjouleError as exc:
            refused[name] = str(exc)
            continue
        sim = Simulation(build_world(scenario, device="cpu"))
        sim.run(2, lambda row: None)
        assert torch.isfinite(sim.state["w"]).all(), name
    assert set(refused) == {"scaffold", "feddc", "stem", "taco"}
    assert "control variate c" in refused["scaffold"]
    assert "momentum d" in refused["stem"]
    with pytest.raises(FedjouleError, match="aggregation: paper"):
        load_scenario(
            "default-theory",
            {
                "algorithm": {"name": "feddc", "aggregation": "paper"},
                "compression.uplink": {"kind": "sign"},
            },
        )


def test_bits_per_param_other_than_a_float_width_points_to_compression():
    with pytest.raises(FedjouleError, match="bits_per_param=8.*compression"):
        load_scenario("default-theory", {"channel.bits_per_param": 8})
    with pytest.raises(FedjouleError, match="levels"):
        load_scenario("default-theory", {"compression.uplink": {"kind": "qsgd"}})


def test_half_precision_rounds_what_is_sent(tmp_path):
    """bits_per_param 16: the uploads are IEEE half; the bits are 16 per value."""
    scenario = load_scenario("default-theory", {"channel.bits_per_param": 16})
    compressor = Compressor.build(scenario, torch.zeros(5))
    v = torch.tensor([[1.0 + 2**-12, 3.0, -1e-8, 70000.0, 0.1]])
    out = compressor.encode(scenario.compression.uplink, v, torch.arange(1), 0, 0, 0)
    assert torch.equal(out, v.half().float())
    assert Compressor.build(load_scenario("default-theory"), torch.zeros(5)) is None  # 32: as is
