"""Batch norm's running statistics in the vectorised executor: each client's (B,) row is
its own during the round and equals what one-client-at-a-time autograd gives."""

import pytest
import torch
from torch import nn

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.executor import (
    BufferedGradient,
    SequentialExecutor,
    VectorisedExecutor,
)
from fedjoule.algorithms.fedprox import FedProxConfig
from fedjoule.algorithms.learning import aggregate_buffers, train_clients
from fedjoule.algorithms.registry import build_algorithm
from fedjoule.errors import FedjouleError
from fedjoule.models.functional import FlatModel


def small_bn_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 8),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.Linear(8, 3),
    )


def executors(model: FlatModel, x, y):
    cpu = torch.device("cpu")
    return {
        "vmap": VectorisedExecutor(
            model.loss,
            x,
            y,
            cpu,
            buffered=BufferedGradient(model.loss_and_buffers),
            eval_loss=model.eval_loss,
        ),
        "per-client": VectorisedExecutor(
            model.loss,
            x,
            y,
            cpu,
            buffered=BufferedGradient(model.loss_and_buffers, per_client=True),
            eval_loss=model.eval_loss,
        ),
        "sequential": SequentialExecutor(
            model.loss, x, y, cpu, model.loss_and_buffers, model.eval_loss
        ),
    }


def test_running_statistics_are_per_client_and_equal_across_executors():
    model = FlatModel.wrap(small_bn_net())
    assert model.n_buffers == 2 * 4 + 2 * 8  # running mean and variance of each layer
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(300, 2, 6, 6, generator=gen), torch.randint(0, 3, (300,), generator=gen)
    algorithm = build_algorithm(FedProxConfig(mu=0.1), 4, torch.full((4,), 75))
    w0, b0 = model.flat_parameters(), model.flat_buffers()
    state = algorithm.init_state(w0)
    ids = torch.arange(4)
    batches = torch.randint(0, 300, (4, 5, 10), generator=gen)
    steps = torch.tensor([5, 2, 0, 4])  # masked steps and a client that does not train
    out = {}
    for name, executor in executors(model, x, y).items():
        buffers = b0.expand(4, -1).clone()
        result = train_clients(
            algorithm,
            executor,
            state,
            ids,
            RoundSetup(0.05, steps.clone(), 0, 0.0, None),
            batches,
            buffers=buffers,
        )
        out[name] = (result.uploads["model"], result.buffers)
    for name in ("vmap", "per-client"):
        assert torch.allclose(out[name][0], out["sequential"][0], atol=1e-5)
        assert torch.allclose(out[name][1], out["sequential"][1], atol=1e-5)
    params, buffers = out["sequential"]
    assert torch.equal(buffers[2], b0)  # no steps: statistics untouched
    assert not torch.allclose(buffers[0], buffers[1])  # each client's own statistics
    # the running mean after one step from (mean 0, momentum 0.1) is 0.1 x the batch mean
    one = FlatModel.wrap(small_bn_net())
    _, after = one.loss_and_buffers(w0, b0, x[batches[1, 0]], y[batches[1, 0]])
    conv = nn.functional.conv2d(x[batches[1, 0]], w0[:72].view(4, 2, 3, 3), w0[72:76], padding=1)
    assert torch.allclose(after[:4], 0.1 * conv.mean(dim=(0, 2, 3)), atol=1e-6)


def test_server_statistics_are_the_sample_weighted_mean_of_arrivals():
    class Result:
        client_ids = torch.tensor([0, 2, 3])
        buffers = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 8.0]])

    samples = torch.tensor([10.0, 99.0, 30.0, 60.0])
    arrived = torch.tensor([True, False, True])
    merged = aggregate_buffers(torch.zeros(2), Result(), arrived, samples)
    assert torch.allclose(merged, torch.tensor([(10 * 1 + 60 * 5) / 70, (10 * 2 + 60 * 8) / 70]))
    nobody = torch.tensor([False, False, False])
    assert torch.equal(aggregate_buffers(torch.ones(2), Result(), nobody, samples), torch.ones(2))


def test_evaluation_uses_running_statistics():
    model = FlatModel.wrap(small_bn_net())
    x = torch.randn(5, 2, 6, 6)
    w, b = model.flat_parameters(), model.flat_buffers()
    shifted = b.clone()
    shifted[:4] = 3.0  # running means of the first layer
    assert not torch.allclose(model.logits(w, x, b), model.logits(w, x, shifted))


def test_cumulative_batch_norm_is_refused_with_the_layer_named():
    net = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, momentum=None))
    with pytest.raises(FedjouleError, match="model layer 1: batch norm with momentum=None"):
        FlatModel.wrap(net)
