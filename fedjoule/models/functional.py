"""A model as one flat parameter vector: views into it, a loss for torch.func, FLOP counts."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedjoule.models.flops import forward_flops_per_sample


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

    def forward_flops_per_sample(self, example: torch.Tensor) -> float:
        """FLOPs of one sample's forward pass (`example`: a batch of one sample)."""
        return forward_flops_per_sample(self.module, example)
