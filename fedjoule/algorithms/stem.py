"""STEM (Khanduri et al., NeurIPS 2021): two-sided STORM momentum (docs/algorithms.md#stem).

Clients step along a momentum d updated with two gradients on the same minibatch,
d <- g(x_k) + (1 - a)(d - g(x_{k-1})); the server averages both x and d.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context, add_decay, clip_rows
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import StemConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class StemState(ServerState):
    """The model w, the mean momentum d and whether d was set yet (a bool tensor)."""

    d: torch.Tensor
    has_d: torch.Tensor


class Stem(Algorithm):
    """Local STORM momentum; uploads x_i and d_i, the server broadcasts their means."""

    declaration = DECLARATIONS["stem"]
    config_class = StemConfig
    uplink_wire = ("model", "momentum")
    upload_references = {"model": "start", "momentum": "d"}  # d: the broadcast momentum

    def init_state(self, w0):
        return StemState(w0.clone(), torch.zeros_like(w0), torch.tensor(False))

    def context(self, state, client_ids, rows, setup):
        m = len(client_ids)
        w = state.w
        return Context(
            shared={"start": w, "d": state.d, "has_d": bool(state.has_d)},
            local={"d": state.d.expand(m, -1).clone(), "previous": w.expand(m, -1).clone()},
        )

    def direction(self, k, params, grad_at, ctx, setup, active):
        def g(p):
            return add_decay(grad_at(p), p, setup.weight_decay)

        d = ctx.local["d"]
        if k == 0 and not ctx.shared["has_d"]:
            new = g(params)  # first round: d starts as a minibatch gradient
        elif k == 0:
            new = d
        else:  # STORM: d = g(x_k; xi) + (1 - a)(d - g(x_{k-1}; xi)), same minibatch xi
            new = g(params) + (1 - self.config.momentum_a) * (d - g(ctx.local["previous"]))
        ctx.local["d"] = torch.where(active > 0, new, d)
        ctx.local["previous"] = torch.where(active > 0, params, ctx.local["previous"])
        return clip_rows(ctx.local["d"], setup.clip_grad_norm)

    def uploads(self, params, ctx, setup):
        return {"model": params, "momentum": ctx.local["d"]}

    def aggregate(self, state, uploads, client_ids):
        return replace(
            state,
            w=uploads["model"].mean(0),
            d=uploads["momentum"].mean(0),
            has_d=torch.tensor(True),
        )
