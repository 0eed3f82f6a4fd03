"""SCAFFOLD (Karimireddy et al., ICML 2020): control variates against client drift.

The update rules: docs/algorithms.md#scaffold.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import ScaffoldConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class ScaffoldState(ServerState):
    """The model w and the server control variate c."""

    c: torch.Tensor


class Scaffold(Algorithm):
    """Local step y <- y - lr (g(y) - c_i + c); option-II variates; 2 vectors each way."""

    declaration = DECLARATIONS["scaffold"]
    config_class = ScaffoldConfig
    client_state = ("c_i",)
    uplink_wire = ("delta_y", "delta_c")  # differences already: sent as they are

    def init_state(self, w0):
        return ScaffoldState(w0.clone(), torch.zeros_like(w0))

    def context(self, state, client_ids, rows, setup):
        return Context(shared={"start": state.w, "c": state.c}, per_client={"c_i": rows["c_i"]})

    def correction(self, params, ctx):
        return ctx.shared["c"] - ctx.per_client["c_i"]

    def _new_variate(self, params, ctx, setup):
        """Option II: c_i+ = c_i - c + (x - y_i) / (K_i lr), computed once per round in
        place (at 100 clients of an MLP each (m, P) temporary is 80 MB)."""
        if "c_new" not in ctx.local:
            lr = setup.lr if self.config.variate_lr == "round" else self.base_lr
            steps = setup.steps.to(params).clamp(min=1)[:, None]
            new = ctx.shared["start"] - params
            new.div_(steps * lr).add_(ctx.per_client["c_i"]).sub_(ctx.shared["c"])
            ctx.local["c_new"] = new
        return ctx.local["c_new"]

    def uploads(self, params, ctx, setup):
        new = self._new_variate(params, ctx, setup)
        return {"delta_y": params - ctx.shared["start"], "delta_c": new - ctx.per_client["c_i"]}

    def client_updates(self, params, ctx, rows, setup):
        return {"c_i": self._new_variate(params, ctx, setup)}

    def aggregate(self, state, uploads, client_ids):
        # x += eta_g mean(delta y);  c += (1/N) sum(delta c)
        w = state.w + self.config.server_lr * uploads["delta_y"].mean(0)
        c = state.c + uploads["delta_c"].sum(0) / self.n_clients
        return replace(state, w=w, c=c)
