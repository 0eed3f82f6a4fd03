"""Model templates and their flat-parameter functional form."""

import torch

from fedjoule import rng
from fedjoule.models.functional import FlatModel
from fedjoule.models.templates import cnn, logistic, mlp


def build_model(config, input_shape: tuple[int, ...], n_classes: int, seed: int):
    """The FlatModel and its initial (P,) parameters for a scenario's `model:` section."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng.seed_int(seed, "model"))
        if config.name == "logistic":
            module = logistic(input_shape, n_classes)
        elif config.name == "mlp":
            module = mlp(input_shape, n_classes, config.hidden)
        else:
            module = cnn(input_shape, n_classes)
    model = FlatModel.wrap(module)
    w0 = model.flat_parameters()
    if config.zero_init:
        w0.zero_()
    return model, w0
