"""The hand-batched dense gradient equals vmap(grad(loss)) (the executor's fast path)."""

import pytest
import torch
from torch.func import grad, vmap

from fedjoule.algorithms.dense import DenseGradient
from fedjoule.models import build_model
from fedjoule.scenarios.schema import ModelSection


@pytest.mark.parametrize(
    ("name", "hidden", "shape"),
    [("logistic", [], (30,)), ("mlp", [16], (1, 6, 6)), ("mlp", [20, 12, 8], (24,))],
)
def test_dense_gradient_equals_vmap_grad(name, hidden, shape):
    model, w0 = build_model(ModelSection(name=name, hidden=hidden), shape, 5, seed=0)
    gen = torch.Generator().manual_seed(0)
    m, batch = 7, 9
    params = w0 + 0.1 * torch.randn(m, w0.numel(), generator=gen)
    x = torch.randn(m, batch, *shape, generator=gen)
    y = torch.randint(0, 5, (m, batch), generator=gen)
    fast = DenseGradient.build(model)
    assert fast is not None
    expected = vmap(grad(model.loss))(params, x, y)
    first = fast(params, x, y).clone()
    assert torch.allclose(first, expected, atol=1e-6, rtol=1e-5)
    # the two alternating buffers: a second call does not overwrite the first result
    second = fast(params * 0.5, x, y)
    again = fast(params, x, y)
    assert torch.allclose(again, first) and not torch.allclose(second, first)


def test_only_plain_dense_stacks_get_the_fast_path():
    cnn, _ = build_model(ModelSection(name="cnn"), (1, 28, 28), 10, seed=0)
    assert DenseGradient.build(cnn) is None
    odd = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    from fedjoule.models.functional import FlatModel

    assert DenseGradient.build(FlatModel.wrap(odd)) is None


def test_loop_gradient_equals_vmap_grad_for_a_cnn():
    from fedjoule.algorithms.executor import LoopGradient

    model, w0 = build_model(ModelSection(name="cnn"), (1, 8, 8), 3, seed=0)
    gen = torch.Generator().manual_seed(1)
    params = w0 + 0.01 * torch.randn(3, w0.numel(), generator=gen)
    x = torch.randn(3, 4, 1, 8, 8, generator=gen)
    y = torch.randint(0, 3, (3, 4), generator=gen)
    expected = vmap(grad(model.loss))(params, x, y)
    loop = LoopGradient(model.loss)
    first = loop(params, x, y).clone()
    assert torch.allclose(first, expected, atol=1e-6, rtol=1e-5)
    loop(params * 0.5, x, y)
    assert torch.allclose(loop(params, x, y), first)  # alternating buffers


@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_fused_descend_equals_gradient_then_step(decay):
    """descend() (FedAvg-like steps without the flat gradient) = params - lr (g + decay params)."""
    model, w0 = build_model(ModelSection(name="mlp", hidden=[20, 12]), (24,), 5, seed=0)
    gen = torch.Generator().manual_seed(2)
    m, batch, lr = 6, 8, 0.3
    params = w0 + 0.1 * torch.randn(m, w0.numel(), generator=gen)
    x = torch.randn(m, batch, 24, generator=gen)
    y = torch.randint(0, 5, (m, batch), generator=gen)
    expected = params - lr * (vmap(grad(model.loss))(params, x, y) + decay * params)
    fast = DenseGradient.build(model)
    fast.descend(params, x, y, lr, decay)
    assert torch.allclose(params, expected, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(params, w0)


def test_only_plain_sgd_algorithms_are_fused():
    from fedjoule.algorithms.base import RoundSetup
    from fedjoule.algorithms.registry import ALGORITHMS, build_algorithm

    setup = RoundSetup(0.1, torch.full((2,), 3), 0)
    clipped = RoundSetup(0.1, torch.full((2,), 3), 0, clip_grad_norm=1.0)
    plain = {"fedavg", "drfa", "foolsgold"}  # the others add a correction or own the step
    for name, (_, config) in ALGORITHMS.items():
        algorithm = build_algorithm(config(), 4, torch.ones(4))
        assert algorithm.plain_sgd(setup) == (name in plain), name
        assert not algorithm.plain_sgd(clipped)
