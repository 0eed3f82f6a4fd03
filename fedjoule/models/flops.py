"""Forward FLOPs of one sample, which the compute-energy model multiplies out.

Dense and convolutional templates have a closed form (2 FLOPs per multiply-add of their
Linear and Conv2d layers, what torch's FlopCounterMode counts for them)."""

import math

import torch
from torch import nn


def closed_form_flops(module: nn.Module, example: torch.Tensor) -> float:
    """FLOPs of one sample's forward pass: 2 per multiply-add of the Linear and Conv2d
    layers, as torch's FlopCounterMode counts them (tests/models check it); other
    layers' elementwise work is not counted. `example` is a batch of one sample."""
    flops = []

    def count(module, inputs, output):
        if isinstance(module, nn.Linear):
            flops.append(2 * output.numel() * module.in_features)
        elif isinstance(module, nn.Conv2d):
            per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
            flops.append(2 * output.numel() * per_output)

    hooks = [m.register_forward_hook(count) for m in module.modules()]
    try:
        with torch.no_grad():
            module(example)
    finally:
        for hook in hooks:
            hook.remove()
    return float(sum(flops))


def forward_flops_per_sample(module: nn.Module, example: torch.Tensor) -> float:
    """Forward FLOPs of one sample (`example`: a batch of one)."""
    return closed_form_flops(module, example)
