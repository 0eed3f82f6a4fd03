"""Per-client accuracy from one gathered forward pass equals per-client forward passes."""

import numpy as np
import torch

from fedjoule.models import build_model
from fedjoule.scenarios.schema import ModelSection
from fedjoule.simulator.evaluation import Evaluator


def test_gathered_client_accuracy_equals_direct_computation():
    gen = np.random.default_rng(0)
    x = torch.randn(500, 12, generator=torch.Generator().manual_seed(1))
    y = torch.from_numpy(gen.integers(0, 4, 500))
    model, w = build_model(ModelSection(name="mlp", hidden=[16]), (12,), 4, seed=0)
    clients = [gen.choice(500, size=gen.integers(5, 60), replace=False) for _ in range(9)]
    metrics = Evaluator(model, x, y, clients, torch.device("cpu"), chunk=64)(w)
    with torch.no_grad():
        direct = [
            (model.logits(w, x[c]).argmax(1) == y[c]).double().mean().item() for c in clients
        ]
        logits = model.logits(w, x)
    assert metrics["worst_client_accuracy"] == min(direct)
    assert np.isclose(metrics["client_accuracy_std"], np.std(direct))
    assert np.isclose(metrics["client_accuracy_p10"], np.percentile(direct, 10))
    assert metrics["accuracy"] == (logits.argmax(1) == y).double().mean().item()
    expected_loss = torch.nn.functional.cross_entropy(logits, y).item()
    assert np.isclose(metrics["loss"], expected_loss, rtol=1e-6)
