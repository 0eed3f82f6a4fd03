"""FedDyn (Acar et al., ICLR 2021): dynamic regularisation (docs/algorithms.md#feddyn)."""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FedDynConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class FedDynState(ServerState):
    """The model w and the server's correction h."""

    h: torch.Tensor


def dyn_correction(params, g_i, alpha, anchor):
    """Gradient of -<g_i, theta> + alpha_i/2 |theta - w^{t-1}|^2."""
    return -g_i + alpha * (params - anchor)


def dyn_client_update(params, g_i, alpha, anchor):
    """g_i <- g_i - alpha_i (theta_i - w^{t-1})."""
    return g_i - alpha * (params - anchor)


def dyn_server(h, models, w, alpha: float, n_clients: int):
    """h <- h - (alpha/N) sum (theta_i - w);  w <- mean theta_i - h / alpha."""
    h = h - alpha / n_clients * (models - w).sum(0)
    return models.mean(0) - h / alpha, h


def client_alpha(config, size_weight, client_ids) -> torch.Tensor:
    """alpha_i = alpha / w_i (the code's adaptive alpha), or alpha for all."""
    alpha = torch.full((len(client_ids),), config.alpha, dtype=torch.float64)
    return alpha / size_weight[client_ids] if config.adaptive_alpha else alpha


class FedDyn(Algorithm):
    """Local objective L_i - `<g_i, theta>` + alpha_i/2 |theta-w|^2; server correction -h/alpha."""

    declaration = DECLARATIONS["feddyn"]
    config_class = FedDynConfig
    client_state = ("g_i",)

    def init_state(self, w0):
        return FedDynState(w0.clone(), torch.zeros_like(w0))

    def context(self, state, client_ids, rows, setup):
        alpha = client_alpha(self.config, self.size_weight, client_ids).to(state.w)[:, None]
        return Context(
            shared={"start": state.w, "anchor": state.w},
            per_client={"g_i": rows["g_i"], "alpha": alpha},
        )

    def correction(self, params, ctx):
        p = ctx.per_client
        return dyn_correction(params, p["g_i"], p["alpha"], ctx.vector("anchor"))

    def client_updates(self, params, ctx, rows, setup):
        p = ctx.per_client
        return {"g_i": dyn_client_update(params, p["g_i"], p["alpha"], ctx.vector("anchor"))}

    def aggregate(self, state, uploads, client_ids):
        w, h = dyn_server(state.h, uploads["model"], state.w, self.config.alpha, self.n_clients)
        return replace(state, w=w, h=h)
