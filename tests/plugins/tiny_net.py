"""A custom model factory for the tests: a small convolutional network with batch norm."""

from torch import nn


def make_net(input_shape, n_classes, channels: int = 6):
    return nn.Sequential(
        nn.Conv2d(input_shape[0], channels, 3, padding=1),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(channels * 16, n_classes),
    )
