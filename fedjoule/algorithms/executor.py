"""Local training of the selected clients: all at once (vmap) or one by one (the reference).

The vectorised executor is the torch.func "model ensembling" pattern applied to
clients: the m clients' parameters are rows of one (m, P) tensor and every local
step takes `vmap(grad(loss))` over them with per-client minibatches gathered in
one indexing operation. The sequential executor runs the same algorithm functions
with plain autograd, one client at a time; tests hold the two equal.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad, vmap

from fedjoule import rng
from fedjoule.algorithms.base import Algorithm, Context

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class LocalWork:
    """The local work of one round's clients."""

    batch_idx: torch.Tensor  # (m, K, B) indices into the training tensors
    steps: torch.Tensor  # (m,) local steps of each client (<= K); later steps are masked
    lr: float
    weight_decay: float = 0.0
    clip_grad_norm: float | None = None


def minibatch_indices(
    seed: int,
    round_index: int,
    client_ids: Sequence[int],
    client_train: Sequence[np.ndarray],
    steps: int,
    batch_size: int,
) -> torch.Tensor:
    """(m, K, B) training indices: each client walks through shuffled epochs of its data.

    Client k's batches in round r come from its own stream (seed, "minibatch", r, k), so
    they do not depend on which other clients were selected.
    """
    need = steps * batch_size
    out = np.empty((len(client_ids), need), dtype=np.int64)
    for row, k in enumerate(client_ids):
        own = client_train[k]
        gen = rng.stream(seed, "minibatch", round_index, k)
        epochs = -(-need // len(own))
        out[row] = np.concatenate([gen.permutation(own) for _ in range(epochs)])[:need]
    return torch.from_numpy(out.reshape(len(client_ids), steps, batch_size))


def step_direction(
    params: torch.Tensor, grads: torch.Tensor, algorithm: Algorithm, ctx: Context, work: LocalWork
) -> torch.Tensor:
    """The direction of one local step for (m, P) parameters: data gradient, weight decay,
    the algorithm's correction, then per-client norm clipping (ALGORITHMS.md §0.1)."""
    if work.weight_decay:
        grads = grads + work.weight_decay * params
    correction = algorithm.correction(params, ctx)
    if correction is not None:
        grads = grads + correction
    if work.clip_grad_norm is not None:
        norms = torch.linalg.vector_norm(grads, dim=1, keepdim=True)
        grads = grads * torch.clamp(work.clip_grad_norm / (norms + 1e-12), max=1.0)
    return grads


def start_params(ctx: Context, m: int) -> torch.Tensor:
    """Where each client starts: a per-client `start`, or the shared one for all."""
    if "start" in ctx.per_client:
        return ctx.per_client["start"].clone()
    return ctx.shared["start"].expand(m, -1).clone()


class VectorisedExecutor:
    """Trains all selected clients in one batched computation."""

    def __init__(self, loss: LossFn, x: torch.Tensor, y: torch.Tensor, device: torch.device):
        self.device = device
        self.x = x.to(device)
        self.y = y.to(device)
        self.batched_grad = vmap(grad(loss))

    def train(self, algorithm: Algorithm, ctx: Context, work: LocalWork) -> torch.Tensor:
        """Final (m, P) parameters after each client's local steps."""
        batch_idx = work.batch_idx.to(self.device)
        m, n_steps = batch_idx.shape[:2]
        params = start_params(ctx, m)
        steps = work.steps.to(self.device)
        for k in range(n_steps):
            idx = batch_idx[:, k]
            grads = self.batched_grad(params, self.x[idx], self.y[idx])
            direction = step_direction(params, grads, algorithm, ctx, work)
            active = (steps > k).to(params.dtype)[:, None]
            params.sub_(direction * (work.lr * active))
        return params


class SequentialExecutor:
    """The reference: one client at a time, plain autograd, the same algorithm functions."""

    def __init__(self, loss: LossFn, x: torch.Tensor, y: torch.Tensor, device: torch.device):
        self.device = device
        self.x = x.to(device)
        self.y = y.to(device)
        self.loss = loss

    def train(self, algorithm: Algorithm, ctx: Context, work: LocalWork) -> torch.Tensor:
        m = work.batch_idx.shape[0]
        starts = start_params(ctx, m)
        finals = []
        for i in range(m):
            own = ctx.rows(slice(i, i + 1))
            theta = starts[i]
            for k in range(int(work.steps[i])):
                idx = work.batch_idx[i, k].to(self.device)
                theta = theta.detach().requires_grad_(True)
                (g,) = torch.autograd.grad(self.loss(theta, self.x[idx], self.y[idx]), theta)
                direction = step_direction(theta.detach()[None], g[None], algorithm, own, work)
                theta = theta.detach() - work.lr * direction[0]
            finals.append(theta.detach())
        return torch.stack(finals)


EXECUTORS = {"vectorised": VectorisedExecutor, "sequential": SequentialExecutor}
