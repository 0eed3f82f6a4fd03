"""FedACG (Kim, Kim, Han, CVPR 2024): accelerated client gradient (docs/algorithms.md#fedacg)."""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FedACGConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class FedACGState(ServerState):
    """The model w and the server momentum m."""

    m: torch.Tensor


class FedACG(Algorithm):
    """Clients start from the look-ahead w + lambda m and stay near it; server momentum."""

    declaration = DECLARATIONS["fedacg"]
    config_class = FedACGConfig

    def init_state(self, w0):
        return FedACGState(w0.clone(), torch.zeros_like(w0))

    def context(self, state, client_ids, rows, setup):
        look_ahead = state.w + self.config.server_momentum * state.m
        return Context(shared={"start": look_ahead, "anchor": look_ahead})

    def correction(self, params, ctx):
        return 2 * self.config.beta * (params - ctx.vector("anchor"))  # d/dtheta beta |.|^2

    def aggregate(self, state, uploads, client_ids):
        # m <- lambda m + mean(theta_i - look-ahead);  w <- w + m = mean theta_i
        look_ahead = state.w + self.config.server_momentum * state.m
        mean_delta = (uploads["model"] - look_ahead).mean(0)
        m = self.config.server_momentum * state.m + mean_delta
        return replace(state, w=state.w + m, m=m)
