"""FedProx (Li et al., MLSys 2020): a proximal term mu/2 ||theta - w||^2.

The update rules: docs/algorithms.md#fedprox.
"""

from typing import Literal

import torch
from pydantic import Field

from fedjoule.algorithms.base import Algorithm, AlgorithmConfig, Context


class FedProxConfig(AlgorithmConfig):
    """FedProx options."""

    name: Literal["fedprox"] = "fedprox"
    mu: float = Field(0.01, ge=0, description="Proximal weight mu (paper tunes 0.001-1).")


class FedProx(Algorithm):
    """FedAvg plus the gradient mu * (theta - w) of the proximal term at every local step."""

    name = "fedprox"
    downlink_compressible = True
    step_vector_flops = 3  # mu (theta - w): subtract, multiply; added to the gradient

    def correction(self, params: torch.Tensor, ctx: Context) -> torch.Tensor:
        return self.config.mu * (params - ctx.vector("anchor"))
