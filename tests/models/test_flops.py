"""The forward FLOP count behind the compute-energy model equals torch's FLOP counter."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from fedjoule.models import build_model
from fedjoule.scenarios.schema import ModelSection


@pytest.mark.parametrize(
    ("name", "shape"), [("logistic", (60,)), ("mlp", (1, 28, 28)), ("cnn", (1, 28, 28))]
)
def test_forward_flops_equal_torch_flop_counter(name, shape):
    model, _ = build_model(ModelSection(name=name), shape, 10, seed=0)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.module(torch.zeros((1, *shape)))
    assert model.forward_flops_per_sample(torch.zeros((1, *shape))) == counter.get_total_flops() > 0


def test_mlp_flops_closed_form():
    model, _ = build_model(ModelSection(name="mlp", hidden=[200, 200]), (1, 28, 28), 10, seed=0)
    assert model.forward_flops_per_sample(torch.zeros((1, 1, 28, 28))) == 2 * (
        784 * 200 + 200 * 200 + 200 * 10
    )
