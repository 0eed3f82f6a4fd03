"""DRDM (Krouka, Ben Issaid, Bennis, TMLCN 2026): DRFA's min-max with FedDyn's drift control.

The paper's algorithm boxes were not available; this is our reconstruction
(docs/algorithms.md#drdm): DRFA's lambda sampling, snapshot and dual step, with the
FedDyn local objective and server correction.
"""

from dataclasses import dataclass, replace

import torch

from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.drfa import Drfa, DrfaState
from fedjoule.algorithms.feddyn import FedDyn, client_alpha
from fedjoule.algorithms.options import DrdmConfig


@dataclass
class DrdmState(DrfaState):
    """DRFA's state and FedDyn's server correction h."""

    h: torch.Tensor


class Drdm(Drfa):
    """DRFA whose clients run the FedDyn objective and whose server applies -h/alpha."""

    declaration = DECLARATIONS["drdm"]
    config_class = DrdmConfig
    client_state = ("g_i",)

    def init_state(self, w0):
        return DrdmState(**vars(super().init_state(w0)), h=torch.zeros_like(w0))

    def context(self, state, client_ids, rows, setup):
        ctx = super().context(state, client_ids, rows, setup)
        alpha = client_alpha(self.config, self.size_weight, client_ids).to(state.w)[:, None]
        ctx.per_client.update(g_i=rows["g_i"], alpha=alpha)
        return ctx

    # the clients' FedDyn objective and g_i update, from the same context entries
    correction = FedDyn.correction
    client_updates = FedDyn.client_updates

    def aggregate(self, state, uploads, client_ids):
        # FedDyn's server step with the drifts weighted like the models:
        # h <- h - alpha (|S|/N) sum_i omega_i (theta_i - w);  w <- sum_i omega_i theta_i - h/alpha
        # (lambda sampling: omega_i = 1/|S|, FedDyn's own form; uniform sampling: omega_i
        # proportional to lambda_i, so that the fixed point is lambda-weighted stationary)
        omega = self.combine_weights(state, client_ids).to(state.w)
        drift = (omega[:, None] * (uploads["model"] - state.w)).sum(0)
        h = state.h - self.config.alpha * len(client_ids) / self.n_clients * drift
        combined = self.combine(state, uploads["model"], client_ids)
        return replace(
            state,
            w=combined - h / self.config.alpha,
            h=h,
            snapshot=self.combine(state, uploads["snapshot"], client_ids),
        )
