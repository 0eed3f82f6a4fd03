"""The functional algorithm interface: pure tensor functions over the m selected clients.

Parameters are flat vectors of shape (P,); the m clients of a round are rows of an
(m, P) tensor. An algorithm says what clients start from, what extra gradient term
they add at every local step, what they upload, and how the server aggregates the
uploads that arrived. The executor owns the loop over local steps (executor.py).
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from pydantic import BaseModel, ConfigDict


class AlgorithmConfig(BaseModel):
    """Options common to every algorithm; each algorithm subclasses this with a literal name."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Context:
    """What the clients of one round hold fixed during local training.

    `shared` tensors are the same for every client (e.g. the broadcast model, shape (P,));
    `per_client` tensors have the m selected clients as their first dimension.
    """

    shared: dict[str, torch.Tensor] = field(default_factory=dict)
    per_client: dict[str, torch.Tensor] = field(default_factory=dict)

    def rows(self, index: slice | torch.Tensor) -> "Context":
        """The context of a subset of the clients (the sequential executor uses one row)."""
        return Context(self.shared, {k: v[index] for k, v in self.per_client.items()})


class Algorithm:
    """Base class: FedAvg behaviour, which the other algorithms override piece by piece."""

    name: ClassVar[str] = "base"
    uplink_vectors: ClassVar[int] = 1  # model-sized vectors each client uploads (ALGORITHMS.md §12)
    downlink_vectors: ClassVar[int] = 1  # model-sized vectors the server broadcasts

    def __init__(self, config: AlgorithmConfig, n_clients: int, client_samples: torch.Tensor):
        self.config = config
        self.n_clients = n_clients
        self.client_samples = client_samples  # (N,) training-set size of every client

    def init_state(self, w0: torch.Tensor) -> dict[str, Any]:
        """Server state at round 0; `w` is the global model."""
        return {"w": w0.clone()}

    def context(self, state: dict[str, Any], client_ids: torch.Tensor) -> Context:
        """What the selected clients receive and hold fixed; `start` is where they begin."""
        return Context(shared={"start": state["w"], "anchor": state["w"]})

    def correction(self, params: torch.Tensor, ctx: Context) -> torch.Tensor | None:
        """Extra gradient term added at every local step, shape (m, P); None for none."""
        return None

    def uploads(self, params: torch.Tensor, ctx: Context, client_ids: torch.Tensor) -> dict:
        """What each client sends after local training: tensors with m rows."""
        return {"model": params}

    def aggregate(
        self, state: dict[str, Any], uploads: dict, client_ids: torch.Tensor
    ) -> dict[str, Any]:
        """New server state from the uploads that arrived (rows of `uploads`, ids `client_ids`)."""
        n = self.client_samples[client_ids].to(uploads["model"])
        w = (n[:, None] * uploads["model"]).sum(0) / n.sum()  # FedAvg: sample-weighted mean
        return {**state, "w": w}
