"""Model templates: plain torch modules, vmappable (no BatchNorm running statistics)."""

import math

from torch import nn

from fedjoule.errors import FedjouleError


def logistic(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """Multinomial logistic (softmax) regression."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), n_classes))


def mlp(input_shape: tuple[int, ...], n_classes: int, hidden: list[int]) -> nn.Module:
    """Fully connected ReLU network, e.g. 784-200-200-10 (McMahan et al. 2017)."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = math.prod(input_shape)
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def cnn(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """The MNIST CNN of McMahan et al. 2017: conv5x5(32), pool, conv5x5(64), pool, FC 512."""
    if len(input_shape) != 3:
        raise FedjouleError(
            f"model 'cnn' needs image input (channels, height, width), got shape {input_shape}"
        )
    channels, height, width = input_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512),
        nn.ReLU(),
        nn.Linear(512, n_classes),
    )
