"""DRFA (Deng, Kamani, Mahdavi, NeurIPS 2020): distributionally robust federated averaging.

min_w max_lambda sum_i lambda_i f_i(w) (docs/algorithms.md#drfa): clients are sampled by
lambda, keep a snapshot at a random local step t', and a second, uniform set of
clients returns losses at the snapshot average; the server takes a projected
ascent step on lambda.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule import rng
from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import DrfaConfig
from fedjoule.algorithms.state import ServerState

HUGE = 1e6  # beyond this, entries are shifted first (else v - (v - 1) rounds to 0)


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection onto the probability simplex (Duchi et al., ICML 2008).

    The projection is unchanged by adding a constant to every entry, so huge entries
    (a huge dual step) are shifted by the maximum first, against rounding; entries at
    +inf share the mass equally (the limit), NaN entries get none."""
    top = torch.isposinf(v)
    if top.any():
        return top.to(v.dtype) / top.sum()
    v = torch.nan_to_num(v, nan=-torch.inf)
    if not torch.isfinite(v).any():  # nothing to go by: uniform
        return torch.full_like(v, 1.0 / len(v))
    if v.abs().max() > HUGE:
        v = (v - v.max()).clamp(min=-HUGE)
    u, _ = torch.sort(v, descending=True)
    css = torch.cumsum(u, 0) - 1
    index = torch.arange(1, len(v) + 1, dtype=v.dtype)
    positive = (u - css / index > 0).nonzero()
    rho = int(positive.max()) if len(positive) else 0  # (index 0 qualifies in exact terms)
    return (v - css[rho] / (rho + 1)).clamp(min=0)


@dataclass
class DrfaState(ServerState):
    """The model w, the client weights lambda (key "lambda"), the snapshot average and the
    dual step size (a float64 tensor, decayed every round)."""

    lambda_: torch.Tensor
    snapshot: torch.Tensor
    dual_lr: torch.Tensor


class Drfa(Algorithm):
    """Lambda-weighted selection, snapshot at t', dual ascent from probe losses; 2 vectors up."""

    declaration = DECLARATIONS["drfa"]
    config_class = DrfaConfig
    uplink_wire = ("model", "snapshot")
    upload_references = {"model": "start", "snapshot": "start"}

    def init_state(self, w0):
        if self.config.lambda_init == "samples":
            lam = self.client_samples / self.client_samples.sum()
        else:
            lam = torch.full((self.n_clients,), 1.0 / self.n_clients, dtype=torch.float64)
        return DrfaState(
            w0.clone(), lam, w0.clone(), torch.tensor(self.config.dual_lr, dtype=torch.float64)
        )

    def selection_weights(self, state):
        return state.lambda_ if self.config.sampling == "lambda" else None

    def snapshot_step(self, setup) -> int:
        """t' uniform in {1, ..., K-1} (code), 1 when K = 1; one draw per round for all."""
        k = self.nominal_steps
        gen = rng.stream(self.seed, "snapshot", setup.round_index)
        return int(gen.integers(1, k)) if k > 1 else 1

    def context(self, state, client_ids, rows, setup):
        w = state.w
        return Context(
            shared={"start": w, "anchor": w, "t_snap": self.snapshot_step(setup)},
            local={"snapshot": w.expand(len(client_ids), -1).clone()},
        )

    def received(self, ctx, start_rows):
        super().received(ctx, start_rows)
        ctx.local["snapshot"] = start_rows.clone()  # a client that stops before t' sends it

    def after_step(self, k, params, ctx, active):
        if k + 1 == ctx.shared["t_snap"]:
            ctx.local["snapshot"] = torch.where(active > 0, params, ctx.local["snapshot"])

    def uploads(self, params, ctx, setup):
        return {"model": params, "snapshot": ctx.local["snapshot"]}

    def combine_weights(self, state, client_ids) -> torch.Tensor:
        """Weights of the arrived clients, summing to 1: equal (lambda sampling already
        weights by lambda) or lambda_i / sum lambda (uniform sampling, importance weights)."""
        if self.config.sampling == "lambda":
            return torch.full((len(client_ids),), 1.0 / len(client_ids), dtype=torch.float64)
        lam = state.lambda_[client_ids]
        return lam / lam.sum()

    def combine(self, state, rows, client_ids):
        weights = self.combine_weights(state, client_ids).to(rows)
        return (weights[:, None] * rows).sum(0)

    def aggregate(self, state, uploads, client_ids):
        return replace(
            state,
            w=self.combine(state, uploads["model"], client_ids),
            snapshot=self.combine(state, uploads["snapshot"], client_ids),
        )

    def probe_model(self, state):
        return state.snapshot

    def dual_update(self, state, client_ids, losses, setup):
        if len(client_ids) == 0:
            return state
        # v_j = (N/|U|) f_j(w_snapshot) for j in U;  lambda <- Proj(lambda + eta K v)
        v = torch.zeros(self.n_clients, dtype=torch.float64)
        v[client_ids] = self.n_clients / len(client_ids) * losses.to(torch.float64).cpu()
        lam = project_simplex(state.lambda_ + state.dual_lr * self.nominal_steps * v)
        if self.config.lambda_floor > 0:
            lam = lam.clamp(min=self.config.lambda_floor)
            lam = lam / lam.sum()
        return replace(state, lambda_=lam, dual_lr=state.dual_lr * self.config.dual_decay)
