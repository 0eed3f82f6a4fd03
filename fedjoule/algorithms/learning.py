"""One round of learning as the simulator and the tests drive it: train, upload, aggregate."""

from dataclasses import dataclass
from typing import Any

import torch

from fedjoule.algorithms.base import Algorithm, Context
from fedjoule.algorithms.executor import LocalWork


@dataclass
class LocalResult:
    """What the selected clients computed in one round, before the channel decides who arrives."""

    client_ids: torch.Tensor  # (m,)
    uploads: dict[str, torch.Tensor]  # each (m, ...)
    context: Context


def train_clients(
    algorithm: Algorithm,
    executor,
    state: dict[str, Any],
    client_ids: torch.Tensor,
    work: LocalWork,
) -> LocalResult:
    """Step 3 of a round: every selected client trains, in one executor call."""
    ctx = algorithm.context(state, client_ids)
    params = executor.train(algorithm, ctx, work)
    return LocalResult(client_ids, algorithm.uploads(params, ctx, client_ids), ctx)


def aggregate_arrived(
    algorithm: Algorithm, state: dict[str, Any], result: LocalResult, arrived: torch.Tensor
) -> dict[str, Any]:
    """Step 5: the server aggregates the uploads of the clients that arrived (bool mask (m,))."""
    rows = arrived.nonzero().flatten()
    uploads = {k: v[rows.to(v.device)] for k, v in result.uploads.items()}
    return algorithm.aggregate(state, uploads, result.client_ids[rows])
