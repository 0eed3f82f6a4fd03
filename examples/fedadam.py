"""FedAdam (Reddi et al., "Adaptive Federated Optimization", ICLR 2021), as a fedjoule
plug-in algorithm.

Clients run local SGD from the global model, as in FedAvg. The server treats the change
Delta = (weighted mean of the client models) - w as a pseudo-gradient and takes an Adam
step with it (the paper's Algorithm 2, FedAdam line, no bias correction):

    m <- beta1 m + (1 - beta1) Delta
    v <- beta2 v + (1 - beta2) Delta^2
    w <- w + server_lr m / (sqrt(v) + tau)

m starts at 0 and v at tau^2 (the paper's v_{-1} >= tau^2). Use it in a scenario:

    algorithm: {name: custom, class: "fedadam.py:FedAdam", options: {server_lr: 0.03}}

(docs/writing-an-algorithm.md builds this file step by step.)
"""

from dataclasses import dataclass, replace

import torch
from pydantic import Field

from fedjoule.algorithms.base import Algorithm, AlgorithmConfig, ServerState, weighted_mean


class FedAdamConfig(AlgorithmConfig):
    """FedAdam's options (the server optimiser; clients use training.lr)."""

    server_lr: float = Field(
        0.01,
        gt=0,
        le=10,
        description="Server learning rate eta; the paper's grid is 10^-3 to 10^1 and its "
        "best FedAdam values lie around 10^-2.5 to 10^-0.5.",
    )
    beta1: float = Field(0.9, ge=0, lt=1, description="Decay of the first moment m.")
    beta2: float = Field(0.99, ge=0, lt=1, description="Decay of the second moment v.")
    tau: float = Field(
        1e-3,
        gt=0,
        le=1,
        description="Adaptivity tau: added to sqrt(v); smaller is more adaptive (the "
        "paper tries 10^-5 to 10^-1).",
    )


def pseudo_gradient(models: torch.Tensor, weights: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Delta = sum_i p_i theta_i - w, p_i proportional to `weights` (the client sizes)."""
    return weighted_mean(models, weights) - w


def first_moment(m: torch.Tensor, delta: torch.Tensor, beta1: float) -> torch.Tensor:
    """m <- beta1 m + (1 - beta1) Delta."""
    return beta1 * m + (1 - beta1) * delta


def second_moment(v: torch.Tensor, delta: torch.Tensor, beta2: float) -> torch.Tensor:
    """v <- beta2 v + (1 - beta2) Delta^2 (FedAdam; FedYogi and FedAdagrad differ here)."""
    return beta2 * v + (1 - beta2) * delta.square()


def adam_step(
    w: torch.Tensor, m: torch.Tensor, v: torch.Tensor, server_lr: float, tau: float
) -> torch.Tensor:
    """w <- w + server_lr m / (sqrt(v) + tau)."""
    return w + server_lr * m / (v.sqrt() + tau)


@dataclass
class FedAdamState(ServerState):
    """The global model w (from ServerState) and the server's moments m and v."""

    m: torch.Tensor
    v: torch.Tensor


class FedAdam(Algorithm):
    """FedAvg's clients; an Adam server step on the pseudo-gradient Delta."""

    name = "fedadam"
    config_class = FedAdamConfig  # the options a scenario gives, checked by pydantic
    uplink_vectors = 1  # each client uploads its model
    downlink_vectors = 1  # the server broadcasts w

    def init_state(self, w0):
        return FedAdamState(
            w=w0.clone(),
            m=torch.zeros_like(w0),
            v=torch.full_like(w0, self.config.tau**2),
        )

    def aggregate(self, state, uploads, client_ids):
        c = self.config
        delta = pseudo_gradient(uploads["model"], self.client_samples[client_ids], state.w)
        m = first_moment(state.m, delta, c.beta1)
        v = second_moment(state.v, delta, c.beta2)
        return replace(state, w=adam_step(state.w, m, v, c.server_lr, c.tau), m=m, v=v)
