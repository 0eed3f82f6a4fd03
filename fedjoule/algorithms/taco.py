"""TACO (Liu et al., ICDCS 2025): tailored adaptive correction and freeloader detection.

docs/algorithms.md#taco. The paper's equations for alpha (Eq. 7), the aggregation (Eq. 9)
and the freeloader test (Eq. 10) were not available; the forms here are our
reconstruction from the paper's own evidence. Two choices of ours, both checked
in tests/algorithms: gamma defaults to 0.01 (the first placeholder, 0.05, exceeds
the stability bound K gamma (1 - alpha) < 1 at K = 20 and lifts benign clients' alpha
to false alarms), and the aggregation weights get a floor of 1/m, because plain
alpha_i / sum alpha gives an update whose size does not shrink as the clients' updates
cancel, so the model never settles.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import TacoConfig
from fedjoule.algorithms.state import ServerState


@dataclass
class TacoState(ServerState):
    """The model w, the latest aggregated pseudo-gradient Delta, each client's last alpha
    (NaN: never seen) and their mean, the suspicion counts and the expelled clients."""

    delta: torch.Tensor
    alpha: torch.Tensor
    alpha_mean: torch.Tensor
    suspicious: torch.Tensor
    expelled: torch.Tensor


class Taco(Algorithm):
    """Step g + gamma (1 - alpha_i) Delta; alpha-weighted aggregation; expels freeloaders."""

    declaration = DECLARATIONS["taco"]
    config_class = TacoConfig
    uplink_wire = ("pseudo_grad",)  # a difference already (lr is the server's own)

    def init_state(self, w0):
        n = self.n_clients
        return TacoState(
            w=w0.clone(),
            delta=torch.zeros_like(w0),  # latest aggregated pseudo-gradient Delta^t
            alpha=torch.full((n,), float("nan"), dtype=torch.float64),  # NaN: never seen
            alpha_mean=torch.tensor(0.0, dtype=torch.float64),
            suspicious=torch.zeros(n, dtype=torch.int64),
            expelled=torch.zeros(n, dtype=torch.bool),
        )

    def selection_weights(self, state):
        return (~state.expelled).to(torch.float64)

    def detected(self, state):
        return state.expelled

    def context(self, state, client_ids, rows, setup):
        alpha = state.alpha[client_ids]
        alpha = torch.where(alpha.isnan(), state.alpha_mean, alpha).to(state.w)
        scale = self.config.gamma / (self.nominal_steps if self.config.normalize_by_k else 1)
        return Context(
            shared={"start": state.w, "delta": state.delta},
            per_client={"coefficient": (scale * (1 - alpha))[:, None]},
        )

    def correction(self, params, ctx):
        return ctx.per_client["coefficient"] * ctx.shared["delta"]  # gamma (1 - alpha_i) Delta^t

    def uploads(self, params, ctx, setup):
        lr = torch.full((len(params),), setup.lr, dtype=params.dtype, device=params.device)
        return {"pseudo_grad": (ctx.shared["start"] - params) / setup.lr, "lr": lr}

    def aggregate(self, state, uploads, client_ids):
        deltas = uploads["pseudo_grad"]
        mean = deltas.mean(0)
        # alpha_i = clip(<Delta_i, Dbar> / |Delta_i|^2, 0, 1)   (reconstructed Eq. 7)
        alpha = ((deltas @ mean) / (deltas * deltas).sum(1).clamp(min=1e-30)).clamp(0, 1)
        alpha = alpha.to(torch.float64)
        suspicious = state.suspicious.clone()
        suspicious[client_ids] += (alpha > self.config.kappa).to(torch.int64)
        expelled = state.expelled | (suspicious > self.config.zeta)
        floor = (
            1 / len(client_ids) if self.config.weight_floor is None else self.config.weight_floor
        )
        weights = torch.where(expelled[client_ids], 0.0, alpha + floor)
        new_state = replace(
            state,
            alpha=state.alpha.index_put((client_ids,), alpha),
            alpha_mean=alpha.mean(),
            suspicious=suspicious,
            expelled=expelled,
        )
        if weights.sum() <= 0:  # every arrival expelled: keep the model
            return new_state
        p = (weights / weights.sum()).to(deltas)
        delta = (p[:, None] * deltas).sum(0)  # tailored aggregation (reconstructed Eq. 9)
        lr = uploads["lr"][0]
        return replace(new_state, w=state.w - self.config.server_lr * lr * delta, delta=delta)
