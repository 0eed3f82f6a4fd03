"""FedDC (Gao et al., CVPR 2022): local drift decoupling and correction (docs/algorithms.md#feddc).

The default follows the official code: SCAFFOLD option-II variates with the undecayed
base lr and the nominal step count, and a server model that averages the arrived
local models plus the mean drift of all N clients. `aggregation: paper` averages
(theta_i + h_i) over the arrived clients instead.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FedDCConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class FedDCState(ServerState):
    """The model w, the control variate c and the server's mirror h_sum of sum_j h_j."""

    c: torch.Tensor
    h_sum: torch.Tensor


class FedDC(Algorithm):
    """Penalty alpha_i/2 |theta + h_i - w|^2 plus correction `<theta, c/w_i - c_i>`; 2 vectors."""

    declaration = DECLARATIONS["feddc"]
    config_class = FedDCConfig
    client_state = ("h_i", "c_i")
    uplink_wire = ("delta", "delta_c")  # the model is rebuilt as start + delta
    upload_references = {}

    def init_state(self, w0):
        zeros = torch.zeros_like(w0)
        return FedDCState(w0.clone(), zeros.clone(), zeros.clone())

    def context(self, state, client_ids, rows, setup):
        weight = self.size_weight[client_ids].to(state.w)[:, None]
        alpha = torch.full_like(weight, self.config.alpha)
        if self.config.adaptive_alpha:
            alpha = alpha / weight
        return Context(
            shared={"start": state.w, "c": state.c},
            per_client={"h_i": rows["h_i"], "c_i": rows["c_i"], "alpha": alpha, "weight": weight},
        )

    def correction(self, params, ctx):
        p = ctx.per_client
        drift_term = p["alpha"] * (params + p["h_i"] - ctx.shared["start"])
        return drift_term + ctx.shared["c"] / p["weight"] - p["c_i"]

    def _updates(self, params, ctx):
        p = ctx.per_client
        delta = params - ctx.shared["start"]
        # c_i+ = c_i - c/w_i - delta / (K_bar lr_0)   (code: nominal K and base lr)
        step = self.nominal_steps * self.base_lr
        c_new = p["c_i"] - ctx.shared["c"] / p["weight"] - delta / step
        return delta, p["h_i"] + delta, c_new

    def uploads(self, params, ctx, setup):
        delta, h_new, c_new = self._updates(params, ctx)
        weighted_dc = ctx.per_client["weight"] * (c_new - ctx.per_client["c_i"])
        out = {"model": params, "delta": delta, "delta_c": weighted_dc}
        if self.config.aggregation == "paper":
            out["model_plus_drift"] = params + h_new
        return out

    def from_wire(self, decoded, uploads, ctx):
        out = {**uploads, **decoded}
        out["model"] = ctx.shared["start"] + decoded["delta"]
        return out

    def client_updates(self, params, ctx, rows, setup):
        _, h_new, c_new = self._updates(params, ctx)
        return {"h_i": h_new, "c_i": c_new}

    def aggregate(self, state, uploads, client_ids):
        c = state.c + uploads["delta_c"].sum(0) / self.n_clients
        h_sum = state.h_sum + uploads["delta"].sum(0)  # server mirror of sum_j h_j
        if self.config.aggregation == "paper":
            w = uploads["model_plus_drift"].mean(0)
        else:
            w = uploads["model"].mean(0) + h_sum / self.n_clients
        return replace(state, w=w, c=c, h_sum=h_sum)
