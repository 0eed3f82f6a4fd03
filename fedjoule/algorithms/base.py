"""The functional algorithm interface: pure tensor functions over the m selected clients.

Parameters are flat vectors of shape (P,); the m clients of a round are rows of an
(m, P) tensor. An algorithm says what clients start from, the direction of every
local step (by default the data gradient plus a correction term), what they upload,
what client state they keep, and how the server aggregates the uploads that arrived.
The executor owns the one loop over local steps (executor.py).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from fedjoule.algorithms.declarations import BASE, AlgorithmDeclaration, compression_refusal
from fedjoule.algorithms.options import AlgorithmConfig
from fedjoule.algorithms.state import ServerState, updated

GradAt = Callable[[torch.Tensor], torch.Tensor]  # (m, P) params -> (m, P) minibatch gradients


@dataclass
class Context:
    """What the clients of one round hold during local training.

    `shared`: the same for every client (e.g. the broadcast model, shape (P,)).
    `per_client`: fixed per-client rows, first dimension m.
    `local`: per-client working tensors the algorithm updates during the steps
    (STEM's momentum, DRFA's snapshot), first dimension m; preallocated in `context`.
    """

    shared: dict[str, Any] = field(default_factory=dict)
    per_client: dict[str, torch.Tensor] = field(default_factory=dict)
    local: dict[str, torch.Tensor] = field(default_factory=dict)

    def vector(self, name: str) -> torch.Tensor:
        """A per-client (m, P) entry when there is one (downlink compression gives each
        client its own start and anchor), else the shared (P,) one."""
        return self.per_client[name] if name in self.per_client else self.shared[name]

    def rows(self, index: slice) -> "Context":
        """The context of a subset of the clients (the sequential executor uses one row)."""
        return Context(
            self.shared,
            {k: v[index] for k, v in self.per_client.items()},
            {k: v[index].clone() for k, v in self.local.items()},
        )


@dataclass
class RoundSetup:
    """Facts of the round the algorithm may use: learning rate and each client's steps."""

    lr: float
    steps: torch.Tensor  # (m,) local steps of each selected client
    round_index: int = 0
    weight_decay: float = 0.0
    clip_grad_norm: float | None = None
    client_ids: torch.Tensor | None = None  # (m,) who they are (keys of their random draws)

    def rows(self, index: slice) -> "RoundSetup":
        """The setup of a subset of the clients (their steps and ids; the rest shared)."""
        ids = None if self.client_ids is None else self.client_ids[index]
        return RoundSetup(
            self.lr,
            self.steps[index],
            self.round_index,
            self.weight_decay,
            self.clip_grad_norm,
            ids,
        )


class Algorithm:
    """Base class with FedAvg behaviour; the other algorithms override pieces of it."""

    # a built-in's facts, stated once (declarations.py): a subclass that sets `declaration`
    # gets its name, vectors, probe and step FLOPs as these class attributes
    declaration: ClassVar[AlgorithmDeclaration] = BASE
    name: ClassVar[str] = BASE.name
    uplink_vectors: ClassVar[int] = BASE.uplink_vectors  # model-sized vectors uploaded
    downlink_vectors: ClassVar[int] = BASE.downlink_vectors  # model-sized vectors broadcast
    client_state: ClassVar[tuple[str, ...]] = ()  # persistent per-client vectors, zero at first
    needs_probe: ClassVar[bool] = BASE.needs_probe  # a uniform set returns losses (DRFA, DRDM)
    config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig  # the options' model
    # compression (docs/compression.md): the uploads that go on the air, one per uplink
    # vector; those named in upload_references are sent as their difference to that
    # context entry (which the server knows) and rebuilt as reference + decoded
    uplink_wire: ClassVar[tuple[str, ...]] = ("model",)
    upload_references: ClassVar[dict[str, str]] = {"model": "start"}
    # downlink compression: allowed, else why not; an option value refusing the uplink
    downlink_compressible: ClassVar[bool] = BASE.downlink_compressible
    downlink_refusal: ClassVar[str] = BASE.downlink_refusal
    uplink_refusal: ClassVar[tuple[str, object, str] | None] = BASE.uplink_refusal
    # FLOPs per parameter of the algorithm's own vector operations in one local step, beyond
    # plain SGD's (a correction term and its addition to the gradient); a plug-in's gradient
    # evaluations are counted (work.py, docs/algorithms.md#computation)
    step_vector_flops: ClassVar[float] = BASE.step_vector_flops

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "declaration" in cls.__dict__:  # a built-in: its declared facts
            d = cls.declaration
            cls.name, cls.needs_probe = d.name, d.needs_probe
            cls.uplink_vectors, cls.downlink_vectors = d.uplink_vectors, d.downlink_vectors
            cls.step_vector_flops = d.step_vector_flops
            cls.downlink_compressible, cls.downlink_refusal = (
                d.downlink_compressible,
                d.downlink_refusal,
            )
            cls.uplink_refusal = d.uplink_refusal

    def __init__(
        self,
        config: AlgorithmConfig,
        n_clients: int,
        client_samples: torch.Tensor,
        nominal_steps: int = 1,
        base_lr: float = 0.1,
        seed: int = 0,
    ):
        self.config = config
        self.n_clients = n_clients
        self.client_samples = client_samples.to(torch.float64)  # (N,) training-set sizes
        # w_i = n_i / (n / N): the relative size weight of the FedDyn/FedDC/SCAFFOLD code
        self.size_weight = self.client_samples / self.client_samples.mean()
        self.nominal_steps = nominal_steps  # K, or E * ceil(mean n_i / B) with epochs
        self.base_lr = base_lr
        self.seed = seed  # for the algorithm's own random draws (DRFA's snapshot step)

    # ------------------------------------------------------------------ server side
    # the defaults below read state["w"] and return updated(...), so that they serve a
    # plug-in's plain dict state as well as a typed one (algorithms/state.py)
    def init_state(self, w0: torch.Tensor) -> ServerState:
        """Server state at round 0; `w` is the global model."""
        return ServerState(w0.clone())

    def selection_weights(self, state: ServerState) -> torch.Tensor | None:
        """Relative selection probabilities of the N clients (None: uniform); 0 excludes."""
        return None

    def aggregate(self, state: ServerState, uploads: dict, client_ids: torch.Tensor) -> ServerState:
        """New server state from the uploads that arrived (rows of `uploads`, ids `client_ids`)."""
        return updated(state, w=weighted_mean(uploads["model"], self.client_samples[client_ids]))

    @classmethod
    def aggregation_flops(cls, n_params: int, arrived: int) -> float:
        """FLOPs of `aggregate` over `arrived` uploads (a classmethod: the engines without
        training use it too): as its declaration states (FedAvg's weighted mean: a
        multiply and an add per parameter and upload)."""
        return cls.declaration.aggregation_flops(n_params, arrived)

    def detected(self, state: ServerState) -> torch.Tensor | None:
        """(N,) bool: clients the algorithm has flagged as freeloaders (None: no detection)."""
        return None

    # ------------------------------------------------------------------ client side
    def context(
        self, state: ServerState, client_ids: torch.Tensor, rows: dict, setup: RoundSetup
    ) -> Context:
        """What the selected clients receive; `start` is where their local training begins.
        `rows` holds their persistent client-state rows (names in `client_state`)."""
        return Context(shared={"start": state["w"], "anchor": state["w"]})

    def correction(self, params: torch.Tensor, ctx: Context) -> torch.Tensor | None:
        """Extra gradient term added at every local step, shape (m, P); None for none."""
        return None

    def direction(
        self,
        k: int,
        params: torch.Tensor,
        grad_at: GradAt,
        ctx: Context,
        setup: RoundSetup,
        active: torch.Tensor,
    ) -> torch.Tensor:
        """The direction of local step k: by default gradient + weight decay + correction,
        clipped per client (docs/algorithms.md#the-local-step). `active` (m, 1) masks finished
        clients."""
        grads = grad_at(params)  # a fresh tensor: updated in place, no (m, P) temporaries
        if setup.weight_decay:
            grads.add_(params, alpha=setup.weight_decay)
        correction = self.correction(params, ctx)
        if correction is not None:
            grads.add_(correction)
        if setup.clip_grad_norm is not None:
            grads.mul_(clip_factor(grads, setup.clip_grad_norm))
        return grads

    def plain_sgd(self, setup: RoundSetup) -> bool:
        """Whether the local step is plain SGD on the data loss (+ weight decay): no
        correction, no clipping, `direction` not overridden. The executor may then fuse
        gradient and update (dense.DenseGradient.descend)."""
        cls = type(self)
        return (
            cls.direction is Algorithm.direction
            and cls.correction is Algorithm.correction
            and setup.clip_grad_norm is None
        )

    def after_step(self, k: int, params: torch.Tensor, ctx: Context, active: torch.Tensor) -> None:
        """Hook after local step k (e.g. keep a snapshot); `params` are the new parameters."""

    def uploads(self, params: torch.Tensor, ctx: Context, setup: RoundSetup) -> dict:
        """What each client sends after local training: tensors with m rows."""
        return {"model": params}

    def client_updates(
        self, params: torch.Tensor, ctx: Context, rows: dict, setup: RoundSetup
    ) -> dict:
        """New values of the persistent client-state rows (kept only for clients that
        finished their local training)."""
        return {}

    # ------------------------------------------------------------------ compression
    @classmethod
    def compression_refusal(cls, config, direction: str) -> str | None:
        """Why this algorithm cannot compress `direction` ('uplink', 'downlink'); None: it can
        (declarations.compression_refusal over its attributes, then its uplink_wire)."""
        reason = compression_refusal(cls, config, direction)
        if reason is not None or direction == "downlink":
            return reason
        if len(cls.uplink_wire) != cls.uplink_vectors:
            return (
                f"uplink_wire names {len(cls.uplink_wire)} uploads but uplink_vectors is "
                f"{cls.uplink_vectors}"
            )
        return None

    def wire_uploads(self, uploads: dict, ctx: Context) -> dict[str, torch.Tensor]:
        """The (m, P) vectors on the air: each `uplink_wire` upload, as its difference to
        its reference where `upload_references` names one."""
        return {
            name: uploads[name] - ctx.vector(self.upload_references[name])
            if name in self.upload_references
            else uploads[name]
            for name in self.uplink_wire
        }

    def from_wire(self, decoded: dict, uploads: dict, ctx: Context) -> dict:
        """The uploads as the server rebuilds them from the decoded vectors."""
        out = dict(uploads)
        for name, value in decoded.items():
            ref = self.upload_references.get(name)
            out[name] = value + ctx.vector(ref) if ref else value
        return out

    def received(self, ctx: Context, start_rows: torch.Tensor) -> None:
        """Downlink compression: each client starts from its own reconstruction (m, P) of
        the broadcast start, which is also its anchor."""
        ctx.per_client["start"] = start_rows
        if "anchor" in ctx.shared:
            ctx.per_client["anchor"] = start_rows

    # ------------------------------------------------------------------ loss probe
    def probe_model(self, state: ServerState) -> torch.Tensor:
        """The model sent to the loss-probe set (DRFA/DRDM: the snapshot average)."""
        return state["w"]

    def dual_update(
        self, state: ServerState, client_ids: torch.Tensor, losses: torch.Tensor, setup: RoundSetup
    ) -> ServerState:
        """Server update from the probe set's minibatch losses."""
        return state


def add_decay(grads: torch.Tensor, params: torch.Tensor, weight_decay: float) -> torch.Tensor:
    """Gradient of the L2 term wd/2 |theta|^2 added to the data gradient."""
    return grads + weight_decay * params if weight_decay else grads


def clip_factor(grads: torch.Tensor, max_norm: float) -> torch.Tensor:
    """(m, 1) factors scaling each row to at most `max_norm` (clip_grad_norm_'s rule)."""
    norms = torch.linalg.vector_norm(grads, dim=1, keepdim=True)
    return torch.clamp(max_norm / (norms + 1e-6), max=1.0)


def clip_rows(grads: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    """Each client's row scaled to at most `max_norm` (a new tensor)."""
    return grads if max_norm is None else grads * clip_factor(grads, max_norm)


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Sum_i weights_i rows_i / sum_i weights_i."""
    weights = weights.to(rows)
    return (weights[:, None] * rows).sum(0) / weights.sum()
