"""FedProx (Li et al., MLSys 2020): a proximal term mu/2 ||theta - w||^2.

The update rules: docs/algorithms.md#fedprox.
"""

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FedProxConfig


class FedProx(Algorithm):
    """FedAvg plus the gradient mu * (theta - w) of the proximal term at every local step."""

    declaration = DECLARATIONS["fedprox"]
    config_class = FedProxConfig

    def correction(self, params: torch.Tensor, ctx: Context) -> torch.Tensor:
        return self.config.mu * (params - ctx.vector("anchor"))
