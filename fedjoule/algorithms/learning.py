"""One round of learning as the simulator and the tests drive it: train, upload, aggregate."""

from dataclasses import dataclass
from typing import Any

import torch

from fedjoule.algorithms.base import Algorithm, Context, RoundSetup, weighted_mean
from fedjoule.algorithms.client_store import ClientStore
from fedjoule.algorithms.declarations import AlgorithmDeclaration
from fedjoule.algorithms.executor import SequentialExecutor
from fedjoule.algorithms.registry import algorithm_class, build_algorithm
from fedjoule.algorithms.state import ServerState, updated
from fedjoule.algorithms.train_loss import TrainingLoss
from fedjoule.algorithms.work import GradientCount


@dataclass
class LocalResult:
    """What the selected clients computed in one round, before the channel decides who arrives."""

    client_ids: torch.Tensor  # (m,)
    uploads: dict[str, torch.Tensor]  # each (m, ...)
    client_updates: dict[str, torch.Tensor]  # new client-state rows, each (m, P)
    context: Context
    setup: RoundSetup
    buffers: torch.Tensor | None = None  # (m, B) running statistics after training
    gradients: GradientCount | None = None  # gradient evaluations per local step (work.py)
    loss: torch.Tensor | None = None  # (m,) mean training loss over each client's steps
    loss_rms: torch.Tensor | None = None  # (m,) root mean square of its per-sample losses


def fabricate(
    behaviour: str,
    start: torch.Tensor,
    last_update: torch.Tensor,
    noise_scale: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """A freeloader's 'trained' model (docs/algorithms.md#freeloaders): `zero` sends the
    global model back, `replay` adds the last global update again, `noisy` adds Gaussian
    noise of the update's per-coordinate scale on top."""
    if behaviour == "zero":
        return start.clone()
    fake = start + last_update
    if behaviour == "noisy":
        scale = noise_scale * last_update.norm() / last_update.numel() ** 0.5
        noise = torch.randn(start.shape, generator=generator, dtype=start.dtype)
        fake = fake + scale * noise.to(start.device)
    return fake


def train_clients(
    algorithm: Algorithm,
    executor,
    state: ServerState,
    client_ids: torch.Tensor,
    setup: RoundSetup,
    batch_idx: torch.Tensor,
    store: ClientStore | None = None,
    freeloaders: torch.Tensor | None = None,
    freeloader_model=None,
    buffers: torch.Tensor | None = None,
    compressor=None,
    record_loss: bool = False,
) -> LocalResult:
    """Step 3 of a round: every selected client trains, in one executor call.

    Freeloaders (bool mask over the m clients) do not train (their steps are masked);
    `freeloader_model(start_row)` fabricates what they upload instead. `buffers`: the
    clients' (m, B) running statistics at the start (batch norm), updated by training.
    `compressor` (compression.Compressor): what the clients receive and what the server
    decodes from their uploads (docs/compression.md); its per-client rows (residuals, the
    model each client holds) are client state like the algorithm's. `record_loss`: each
    client's mean training loss over its steps into LocalResult.loss, and the root mean
    square of its per-sample losses into LocalResult.loss_rms (train_loss.py).
    """
    device = state["w"].device
    names = algorithm.client_state + (compressor.state_names(algorithm) if compressor else ())
    rows = {n: store.get(n, client_ids, device) for n in names} if store else {}
    if freeloaders is not None and freeloaders.any():
        setup.steps = torch.where(freeloaders, 0, setup.steps)
    if setup.client_ids is None:  # the keys of each client's random draws (dropout)
        setup.client_ids = client_ids
    ctx = algorithm.context(state, client_ids, rows, setup)
    kept = {}
    if compressor is not None:
        kept = compressor.downlink_step(algorithm, ctx, rows, client_ids, setup.round_index)
    count = GradientCount()
    extra = {} if buffers is None else {"buffers": buffers}
    losses = TrainingLoss(len(client_ids), device) if record_loss else None
    if losses is not None:
        extra["losses"] = losses
    params = executor.train(algorithm, ctx, setup, batch_idx, count=count, **extra)
    if freeloaders is not None and freeloaders.any():
        for i in freeloaders.nonzero().flatten().tolist():
            params[i] = freeloader_model(params[i])
    uploads = algorithm.uploads(params, ctx, setup)
    updates = algorithm.client_updates(params, ctx, rows, setup)
    if compressor is not None:
        uploads, residuals = compressor.uplink_step(
            algorithm, uploads, ctx, rows, client_ids, setup.round_index
        )
        updates = {**updates, **kept, **residuals}
    loss, rms = (None, None) if losses is None else (losses.mean(), losses.rms())
    return LocalResult(client_ids, uploads, updates, ctx, setup, buffers, count, loss, rms)


def keep_client_state(store: ClientStore, result: LocalResult, trained: torch.Tensor) -> None:
    """Client state changes only for the clients that finished local training (bool (m,))."""
    for name, values in result.client_updates.items():
        store.set(name, *_rows(result.client_ids, values, trained))


def aggregate_arrived(
    algorithm: Algorithm, state: ServerState, result: LocalResult, arrived: torch.Tensor
) -> ServerState:
    """Step 5: the server aggregates the uploads of the clients that arrived (bool mask (m,))."""
    uploads = {k: _rows(result.client_ids, v, arrived)[1] for k, v in result.uploads.items()}
    return algorithm.aggregate(state, uploads, _rows(result.client_ids, None, arrived)[0])


def aggregate_buffers(
    buffers: torch.Tensor, result: LocalResult, arrived: torch.Tensor, samples: torch.Tensor
) -> torch.Tensor:
    """The server's running statistics: the mean of the arrived clients' rows, weighted by
    their training samples as FedAvg weights the parameters."""
    if result.buffers is None or not bool(arrived.any()):
        return buffers
    ids, rows = _rows(result.client_ids, result.buffers, arrived)
    return weighted_mean(rows, samples[ids])


def _rows(client_ids: torch.Tensor, values, mask: torch.Tensor):
    """The ids and rows where `mask` holds; no copy when it holds everywhere (at 100
    clients of an MLP every (m, P) copy is 80 MB)."""
    if bool(mask.all()):
        return client_ids, values
    rows = mask.nonzero().flatten()
    return client_ids[rows], None if values is None else values[rows.to(values.device)]


def model_is_finite(state: ServerState) -> bool:
    """No NaN or inf in the global model. Only the model: other server state may hold NaN
    on purpose (TACO's alpha of clients not yet seen), and a NaN/inf there reaches the
    model in the next aggregation."""
    return bool(torch.isfinite(state["w"]).all())


def dry_count(
    section, steps: int, rounds: int = 2, seed: int = 0, lr: float = 0.01
) -> list[list[int]]:
    """Gradient evaluations per local step in each of the first `rounds` rounds, counted
    by training one client `steps` steps on a 3-parameter quadratic, every round
    aggregated: the count of the engines that do not train (later rounds repeat the last)."""
    n_params = 3
    algorithm = build_algorithm(section, 1, torch.ones(1), steps, lr, seed)
    x = torch.linspace(-1, 1, n_params)[None, :]
    y = torch.zeros(1, dtype=torch.int64)

    def loss(theta, xb, yb):  # |theta - x|^2 / 2 over the batch
        return 0.5 * ((theta - xb) ** 2).sum(-1).mean()

    executor = SequentialExecutor(loss, x, y, torch.device("cpu"))
    store = ClientStore(algorithm.client_state, n_params)
    state = algorithm.init_state(torch.zeros(n_params))
    ids, everyone = torch.zeros(1, dtype=torch.int64), torch.ones(1, dtype=torch.bool)
    counts = []
    for r in range(rounds):
        setup = RoundSetup(lr, torch.tensor([steps]), r)
        batch_idx = torch.zeros((1, steps, 1), dtype=torch.int64)
        result = train_clients(algorithm, executor, state, ids, setup, batch_idx, store)
        keep_client_state(store, result, everyone)
        state = aggregate_arrived(algorithm, state, result, everyone)
        counts.append(result.gradients.per_step)
    return counts


@dataclass(frozen=True)
class CountedDeclaration(AlgorithmDeclaration):
    """A plug-in algorithm's facts for the engines without training, read off its class:
    its aggregation FLOPs its classmethod's, its gradient evaluations the dry count's."""

    section: Any = None  # its validated `algorithm:` section
    cls: type | None = None

    def aggregation_flops(self, n_params: int, arrived: int) -> float:
        return self.cls.aggregation_flops(n_params, arrived)

    def gradient_counts(self, steps: int, rounds: int = 2) -> list[list[int]]:
        return dry_count(self.section, steps, rounds)


def counted_declaration(section) -> CountedDeclaration:
    """The facts of the algorithm a (plug-in's) section names, read off its class."""
    cls, _ = algorithm_class(section)
    return CountedDeclaration(
        name=cls.name,
        uplink_vectors=cls.uplink_vectors,
        downlink_vectors=cls.downlink_vectors,
        needs_probe=cls.needs_probe,
        learnt_selection=cls.selection_weights is not Algorithm.selection_weights,
        step_vector_flops=cls.step_vector_flops,
        section=section,
        cls=cls,
    )


def mean_state(states: list[ServerState], weights: torch.Tensor) -> ServerState:
    """The cloud's state under hierarchical rounds: each floating tensor the weighted mean
    of the edges' (one edge: its state as it is); anything else the first edge's."""
    if len(states) == 1:
        return updated(states[0])
    means = {}
    for name, value in states[0].items():
        if torch.is_tensor(value) and value.is_floating_point():
            rows = torch.stack([s[name] for s in states]).reshape(len(states), -1)
            means[name] = weighted_mean(rows, weights).reshape(value.shape).to(value.dtype)
    return updated(states[0], **means)
