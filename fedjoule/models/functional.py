"""A model as one flat parameter vector: views into it, a loss for torch.func, FLOP counts."""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


@dataclass
class FlatModel:
    """A stateless module template whose parameters are passed as one (P,) vector."""

    module: nn.Module
    names: list[str]
    shapes: list[torch.Size]
    numels: list[int]

    @classmethod
    def wrap(cls, module: nn.Module) -> "FlatModel":
        named = list(module.named_parameters())
        return cls(
            module=module,
            names=[n for n, _ in named],
            shapes=[p.shape for _, p in named],
            numels=[p.numel() for _, p in named],
        )

    @property
    def n_params(self) -> int:
        return sum(self.numels)

    def flat_parameters(self) -> torch.Tensor:
        """The module's own (initial) parameters as one vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views into a (P,) vector (works under vmap)."""
        chunks = torch.split(flat, self.numels)
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes, strict=True)}

    def logits(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, self.unflatten(flat), (x,))

    def loss(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of a minibatch (ALGORITHMS.md §0.1)."""
        return F.cross_entropy(self.logits(flat, x), y)

    def forward_flops_per_sample(self, input_shape: tuple[int, ...]) -> float:
        """FLOPs of one sample's forward pass: 2 per multiply-add of the Linear and Conv2d
        layers, as torch's FlopCounterMode counts them (tests/models check it); other
        layers' elementwise work is not counted. (FlopCounterMode itself imports
        torch._dynamo, 1-3 s of every run's start-up.)"""
        flops = []

        def count(module, inputs, output):
            if isinstance(module, nn.Linear):
                flops.append(2 * output.numel() * module.in_features)
            elif isinstance(module, nn.Conv2d):
                per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
                flops.append(2 * output.numel() * per_output)

        hooks = [m.register_forward_hook(count) for m in self.module.modules()]
        try:
            with torch.no_grad():
                self.module(torch.zeros((1, *input_shape)))
        finally:
            for hook in hooks:
                hook.remove()
        return float(sum(flops))
