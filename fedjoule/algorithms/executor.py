"""Local training of the selected clients: all at once (vmap) or one by one (the reference).

The vectorised executor is the torch.func "model ensembling" pattern applied to
clients: the m clients' parameters are rows of one (m, P) tensor and every local
step takes `vmap(grad(loss))` over them with per-client minibatches gathered in
one indexing operation. The sequential executor runs the same algorithm functions
with plain autograd, one client at a time; tests hold the two equal.

Random layers (dropout) draw each client's numbers from that client's own generator
(ClientDraws), so both executors draw the same masks and stay equal.
"""

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
from torch.func import grad, grad_and_value, vmap

from fedjoule import rng
from fedjoule.algorithms.base import Algorithm, Context, RoundSetup
from fedjoule.algorithms.train_loss import TrainingLoss, write_losses
from fedjoule.algorithms.work import GradientCount

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# the same loss and the mean of its squared per-sample losses (FlatModel.loss_and_square)
SquareLossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple]


def minibatch_indices(
    seed: int,
    round_index: int,
    client_ids: Sequence[int],
    client_train: Sequence[np.ndarray],
    steps: int,
    batch_size: int,
    stream: str = "minibatch",
) -> torch.Tensor:
    """(m, K, B) training indices: each client walks through shuffled epochs of its data.

    Client k's batches in round r come from its own stream (seed, stream, r, k), so they
    do not depend on which other clients were selected. Every batch has B samples (a
    client with fewer than B samples repeats them), so that all clients stack.
    """
    need = steps * batch_size
    out = np.empty((len(client_ids), need), dtype=np.int64)
    for row, k in enumerate(client_ids):
        own = client_train[k]
        gen = rng.stream(seed, stream, round_index, k)
        epochs = -(-need // len(own))
        out[row] = np.concatenate([gen.permutation(own) for _ in range(epochs)])[:need]
    return torch.from_numpy(out.reshape(len(client_ids), steps, batch_size))


def global_generators(device: torch.device) -> list[torch.Generator]:
    """The generators torch's random layers draw from for a model on `device`: the CPU's,
    and the GPU's for a CUDA model."""
    gens = [torch.default_generator]
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        gens.append(torch.cuda.default_generators[index])
    return gens


def draws_random_numbers(fn: Callable[[], object], device: torch.device) -> bool:
    """Whether `fn()` draws from torch's global generators (their states change); they are
    put back as they were."""
    gens = global_generators(device)
    before = [g.get_state() for g in gens]
    try:
        fn()
        return any(not torch.equal(g.get_state(), s) for g, s in zip(gens, before, strict=True))
    finally:
        for g, s in zip(gens, before, strict=True):
            g.set_state(s)


class ClientDraws:
    """Each client's random numbers (dropout masks) in a round come from its own generator,
    stream (seed, "random_layers", round, client), continued from one gradient evaluation of
    that client to its next: they depend on neither the executor nor the other clients
    selected, and a resumed run draws the same. Torch's random layers take no generator, so
    the global ones (global_generators) hold the client's state during its evaluation and
    get theirs back afterwards.

    `batched`: vmap(..., randomness="different") draws all clients' numbers in one call;
    they then come from one generator per round and chunk of clients, stream
    (seed, "random_layers_batched", round, *client ids): reproducible, not the per-client
    draws (the `vmap` and `compiled` executors)."""

    def __init__(self, seed: int, device: torch.device, batched: bool = False):
        self.seed = seed
        self.device = device
        self.batched = batched
        self.states: list[list[torch.Tensor]] = []

    def begin(self, setup: RoundSetup, m: int) -> None:
        """Fresh generators for the m clients of `setup` (ids: setup.client_ids, else 0..m-1)."""
        ids = with_client_ids(setup, m).client_ids.tolist()
        r = setup.round_index
        if self.batched:
            self.states = [self._seeded(rng.seed_int(self.seed, "random_layers_batched", r, *ids))]
        else:
            self.states = [
                self._seeded(rng.seed_int(self.seed, "random_layers", r, k)) for k in ids
            ]

    def _seeded(self, seed: int) -> list[torch.Tensor]:
        return [
            torch.Generator(device=g.device).manual_seed(seed).get_state()
            for g in global_generators(self.device)
        ]

    @contextmanager
    def client(self, i: int) -> Iterator[None]:
        """Random layers draw from client i's generator (batched: the one) inside."""
        gens = global_generators(self.device)
        saved = [g.get_state() for g in gens]
        for g, state in zip(gens, self.states[i], strict=True):
            g.set_state(state)
        try:
            yield
        finally:
            self.states[i] = [g.get_state() for g in gens]
            for g, state in zip(gens, saved, strict=True):
                g.set_state(state)


def with_client_ids(setup: RoundSetup, m: int) -> RoundSetup:
    """`setup`, its clients numbered 0..m-1 when it does not say who they are (the keys of
    their random draws, the same in every executor)."""
    if setup.client_ids is not None:
        return setup
    return dataclasses.replace(setup, client_ids=torch.arange(m))


def own_draws(draws: ClientDraws | None, i: int):
    """Client i's draws, or nothing for a model without random layers."""
    return nullcontext() if draws is None else draws.client(i)


class DrawnTogether:
    """A batched gradient (vmap(..., randomness="different")) whose random layers draw from
    the batched generator of `draws`."""

    def __init__(self, fn: Callable, draws: ClientDraws):
        self.fn = fn
        self.draws = draws

    def __call__(self, *args, **kwargs):
        with self.draws.client(0):
            return self.fn(*args, **kwargs)


class VmapGradient:
    """vmap(grad(loss)) over the clients' (m, P) parameters; given `loss_out` (m, 2)
    (TrainingLoss.out), the same through grad_and_value, each client's losses written into
    it (the mean square with `square_loss`, SquareLossFn). `compiled`: both through
    torch.compile."""

    def __init__(
        self,
        loss: LossFn,
        randomness: str = "error",
        compiled: bool = False,
        square_loss: SquareLossFn | None = None,
    ):
        self.gradient = vmap(grad(loss), randomness=randomness)
        with_loss = grad_and_value(square_loss or loss, has_aux=square_loss is not None)
        self.with_loss = vmap(with_loss, randomness=randomness)
        self.squares = square_loss is not None
        if compiled:
            self.gradient, self.with_loss = map(torch.compile, (self.gradient, self.with_loss))

    def __call__(self, params, x, y, loss_out: torch.Tensor | None = None) -> torch.Tensor:
        if loss_out is None:
            return self.gradient(params, x, y)
        g, loss = self.with_loss(params, x, y)
        write_losses(loss_out, *(loss if self.squares else (loss,)))
        return g


def start_params(ctx: Context, m: int) -> torch.Tensor:
    """Where each client starts: a per-client `start`, or the shared one for all."""
    if "start" in ctx.per_client:
        return ctx.per_client["start"].clone()
    return ctx.shared["start"].expand(m, -1).clone()


class LoopGradient:
    """Per-client gradients computed client after client, by plain autograd, into one
    reused (m, P) buffer: the gradient of convolutional and recurrent models on a CPU.

    vmap turns a convolution over m clients into a grouped convolution, which the CPU
    backend runs 1.5-1.7x slower than m ordinary ones; torch.func.grad is level with
    autograd for convolutions over whole rounds, and runs nn.LSTM's backward as per-time-step
    operations where autograd calls the fused kernel (5-6x faster for char-lstm; vmap has
    no batching rule for the LSTM at all). benchmarks/RESULTS.md, "New models". Same
    values as vmap(grad(loss)) to float rounding. Also the gradient of any model with
    random layers: each client draws from its own generator (`draws`), as it does in the
    sequential executor. `square_loss`: the loss with its mean squared per-sample loss,
    for `loss_out` (as VmapGradient's)."""

    def __init__(
        self,
        loss: LossFn,
        draws: ClientDraws | None = None,
        square_loss: SquareLossFn | None = None,
    ):
        self.loss = loss
        self.square_loss = square_loss
        self.draws = draws
        self._own = threading.local()  # each thread's buffers (clients split across threads)

    def grad(self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            theta = params.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(theta, x, y), theta)
        return g

    def grad_and_loss(self, params, x, y, loss_out: torch.Tensor) -> torch.Tensor:
        """The gradient; the losses into `loss_out` (2,)."""
        with torch.enable_grad():
            theta = params.detach().requires_grad_(True)
            if self.square_loss is None:
                loss, square = self.loss(theta, x, y), None
            else:
                loss, square = self.square_loss(theta, x, y)
            (g,) = torch.autograd.grad(loss, theta)
        write_losses(loss_out, loss.detach(), square)
        return g

    def __call__(self, params, x, y, loss_out: torch.Tensor | None = None) -> torch.Tensor:
        own = self._own
        if getattr(own, "out", None) is None or own.out[0].shape != params.shape:
            own.out, own.flip = [torch.empty_like(params), torch.empty_like(params)], 0
        own.flip ^= 1  # two buffers: two calls in one step (STEM) do not collide
        out = own.out[own.flip]
        for i in range(len(params)):
            with own_draws(self.draws, i):
                if loss_out is None:
                    out[i] = self.grad(params[i], x[i], y[i])
                else:
                    out[i] = self.grad_and_loss(params[i], x[i], y[i], loss_out[i])
        return out


class BufferedGradient:
    """Per-client gradients of a model with running statistics (batch norm): each client's
    (B,) statistics row goes in with its parameters and comes back updated by the step's
    forward pass; clients that finished their steps keep theirs. `per_client`: one client
    after another with plain autograd (convolutions on a CPU: torch.func's batch-norm
    backward is slower there, benchmarks/RESULTS.md), else all at once with vmap. `draws`:
    the random layers' generators (client by client: each client's own; with vmap: the
    batched one, randomness="different"). `square_loss`: `buffered_loss` with the mean
    squared per-sample loss, (loss, (buffers, mean square)) (FlatModel.loss_buffers_and_square),
    for `loss_out`."""

    def __init__(
        self,
        buffered_loss: Callable,
        per_client: bool = False,
        draws: ClientDraws | None = None,
        square_loss: Callable | None = None,
    ):
        self.buffered_loss = buffered_loss
        self.square_loss = square_loss
        self.draws = draws
        self.batched = self.batched_with_loss = None
        if not per_client:
            randomness = "error" if draws is None else "different"
            self.batched = vmap(grad(buffered_loss, has_aux=True), randomness=randomness)
            self.batched_with_loss = vmap(
                grad_and_value(square_loss or buffered_loss, has_aux=True), randomness=randomness
            )
            if draws is not None:
                self.batched = DrawnTogether(self.batched, draws)
                self.batched_with_loss = DrawnTogether(self.batched_with_loss, draws)

    def _one(self, params, buffers, x, y, loss_out=None) -> tuple[torch.Tensor, torch.Tensor]:
        """One client's gradient and running statistics; its losses into `loss_out` (2,)."""
        with torch.enable_grad():
            theta = params.detach().requires_grad_(True)
            loss, updated, square = self._losses(theta, buffers, x, y, loss_out is not None)
            (g,) = torch.autograd.grad(loss, theta)
        if loss_out is not None:
            write_losses(loss_out, loss.detach(), square)
        return g, updated

    def _losses(self, theta, buffers, x, y, squares: bool):
        """(loss, updated statistics, mean square or None)."""
        if squares and self.square_loss is not None:
            loss, (updated, square) = self.square_loss(theta, buffers, x, y)
            return loss, updated, square
        return *self.buffered_loss(theta, buffers, x, y), None

    def __call__(self, params, buffers, x, y, active, loss_out=None) -> torch.Tensor:
        """(m, P) gradients; the clients' `buffers` (m, B) updated where `active`;
        `loss_out` (m, 2), if given, receives each client's losses (TrainingLoss.out)."""
        if self.batched is not None and loss_out is None:
            grads, updated = self.batched(params, buffers, x, y)
        elif self.batched is not None:
            grads, (loss, aux) = self.batched_with_loss(params, buffers, x, y)
            updated, *square = aux if self.square_loss is not None else (aux,)
            write_losses(loss_out, loss, *square)
        else:
            pairs = []
            for i in range(len(params)):
                out = None if loss_out is None else loss_out[i]
                with own_draws(self.draws, i):
                    pairs.append(self._one(params[i], buffers[i], x[i], y[i], out))
            grads = torch.stack([g for g, _ in pairs])
            updated = torch.stack([b for _, b in pairs])
        buffers.copy_(torch.where(active.bool(), updated, buffers))
        return grads


class VectorisedExecutor:
    """Trains all selected clients in one batched computation.

    `fast_grad`, when given, replaces `vmap(grad(loss))` with an equal but faster
    batched gradient (dense.DenseGradient for MLPs and logistic regression).
    `memory_budget_mb` bounds the working memory of one batched computation: when the
    selected clients' stacked parameters, gradients and activations would exceed it,
    they are trained in chunks (they are independent during local training).
    `fuse`: when the algorithm's local step is plain SGD (Algorithm.plain_sgd) and the
    fast gradient can take the step itself (DenseGradient.descend), each layer's
    gradient goes straight into its weights, without the flat (m, P) gradient.
    `buffered`: the gradient of a model with running statistics (BufferedGradient); its
    clients' (m, B) statistics are passed to `train` and updated in place.
    `eval_loss(w, x, y, buffers)`: the loss in evaluation mode, for the loss probe.
    `draws`: the generators of a model with random layers (ClientDraws), shared with the
    gradient that draws from them; renewed for each round and chunk of clients.
    `split`: with torch set to T > 1 threads, the clients are split into T groups trained
    at once, one thread each with one intra-op thread (split_across_threads), rather than
    all clients together on T intra-op threads; only for a gradient that keeps no shared
    state but per-thread buffers (dense.DenseGradient: torch.func.functional_call swaps
    the parameters of the one nn.Module, so two threads cannot call it at once).
    `square_loss`: the loss with its mean squared per-sample loss (SquareLossFn), for the
    training losses of the vmap gradient taken when no `fast_grad` is given."""

    def __init__(
        self,
        loss: LossFn,
        x: torch.Tensor,
        y: torch.Tensor,
        device: torch.device,
        fast_grad: Callable | None = None,
        memory_budget_mb: float = 1024,
        fuse: bool = True,
        buffered: BufferedGradient | None = None,
        eval_loss: Callable | None = None,
        draws: ClientDraws | None = None,
        split: bool = False,
        square_loss: SquareLossFn | None = None,
    ):
        self.device = device
        self.x = x.to(device)
        self.y = y.to(device)
        self.draws = draws
        self.split = split and draws is None and device.type == "cpu"
        self._pool: tuple[int, ThreadPoolExecutor] | None = None  # (threads, pool)
        self.batched_grad = fast_grad or VmapGradient(loss, square_loss=square_loss)
        self.buffered = buffered
        self.batched_loss = vmap(eval_loss or loss_as_eval(loss), in_dims=(None, 0, 0, None))
        self.memory_budget_mb = memory_budget_mb
        self.fuse = fuse and hasattr(self.batched_grad, "descend")

    def chunk_size(self, n_params: int, batch: int) -> int:
        """Clients per batched computation within the memory budget: per client about six
        parameter-sized tensors (parameters, two gradient buffers, weight gradients,
        correction, direction) and its batch of inputs (x3 for activations)."""
        per_client = 4 * (6 * n_params + 3 * batch * self.x[0].numel())
        return max(1, int(self.memory_budget_mb * 2**20 // per_client))

    def train(
        self,
        algorithm: Algorithm,
        ctx: Context,
        setup: RoundSetup,
        batch_idx: torch.Tensor,
        buffers: torch.Tensor | None = None,
        count: GradientCount | None = None,
        losses: TrainingLoss | None = None,
    ) -> torch.Tensor:
        """Final (m, P) parameters after each client's `setup.steps` local steps; the
        clients' running statistics `buffers` (m, B), if any, are updated in place; the
        gradient evaluations of every step go into `count` (work.py), and each step's
        training losses into `losses`, if given (train_loss.py)."""
        m, _, batch = batch_idx.shape
        n_params = ctx.shared["start"].numel()
        threads = min(torch.get_num_threads(), m) if self.split else 1
        chunk = max(1, self.chunk_size(n_params, batch) // threads)  # threads x chunk in memory
        chunk = min(chunk, -(-m // threads))
        count = GradientCount() if count is None else count
        setup = with_client_ids(setup, m)
        if m <= chunk:
            return self._train(algorithm, ctx, setup, batch_idx, buffers, losses, count)
        parts = []
        for first in range(0, m, chunk):
            rows = slice(first, first + chunk)
            own_buffers = None if buffers is None else buffers[rows]  # a view: updated in place
            own_losses = None if losses is None else losses.rows(rows)  # adds into its rows
            own = (ctx.rows(rows), setup.rows(rows), batch_idx[rows], own_buffers, own_losses)
            parts.append((rows, *own))
        if threads > 1:
            finals = self.split_across_threads(algorithm, parts, count, threads)
        else:
            finals = [self._train(algorithm, *part[1:], count) for part in parts]
        for rows, own, *_ in parts:
            for name, value in own.local.items():  # the chunk's working state back
                ctx.local[name][rows] = value
        return torch.cat(finals)

    def split_across_threads(self, algorithm, parts, count: GradientCount, threads: int):
        """Each part's (chunk of clients') training in a thread of its own with one intra-op
        thread: the clients are independent during local training, so the threads meet once
        a round rather than at every operation of every step. On busy cores torch's intra-op
        threads wait at each operation for a descheduled partner; on idle ones each wake-up
        costs more than a small operation gains (benchmarks/RESULTS.md, "Threads"). Each
        client's numbers are those of one thread: `--threads 1` and T threads give the same."""
        if self._pool is None or self._pool[0] != threads:
            self._pool = (threads, ThreadPoolExecutor(threads, thread_name_prefix="fedjoule"))
        before, grad_mode = torch.get_num_threads(), torch.is_grad_enabled()

        def train_part(part):
            torch.set_num_threads(1)  # this thread's intra-op threads (OpenMP, MKL)
            own_count = GradientCount()
            with torch.set_grad_enabled(grad_mode):  # grad mode is per thread
                return self._train(algorithm, *part[1:], own_count), own_count

        try:
            results = list(self._pool[1].map(train_part, parts))
        finally:
            torch.set_num_threads(before)
        for _, own_count in results:
            for k, calls in enumerate(own_count.per_step):
                count.record(k, calls)
        return [final for final, _ in results]

    def _train(
        self,
        algorithm: Algorithm,
        ctx: Context,
        setup: RoundSetup,
        batch_idx: torch.Tensor,
        buffers: torch.Tensor | None,
        losses: TrainingLoss | None,
        count: GradientCount,
    ) -> torch.Tensor:
        batch_idx = batch_idx.to(self.device)
        m, n_steps, batch = batch_idx.shape
        if self.draws is not None:
            self.draws.begin(setup, m)
        params = start_params(ctx, m)
        steps = setup.steps.to(self.device)
        all_active = int(steps.min())  # before this step every client is still training
        fused = self.fuse and algorithm.plain_sgd(setup) and buffers is None
        xb = torch.empty((m * batch, *self.x.shape[1:]), dtype=self.x.dtype, device=self.device)
        yb = torch.empty((m * batch, *self.y.shape[1:]), dtype=self.y.dtype, device=self.device)
        for k in range(n_steps):
            idx = batch_idx[:, k].reshape(-1)  # gather the m minibatches into reused buffers
            torch.index_select(self.x, 0, idx, out=xb)
            torch.index_select(self.y, 0, idx, out=yb)
            x_k = xb.view(m, batch, *self.x.shape[1:])
            y_k = yb.view(m, batch, *self.y.shape[1:])
            active = (steps > k).to(params.dtype)[:, None]
            if fused and k < all_active:  # the same step without the flat gradient
                loss_out = {} if losses is None else {"loss_out": losses.out(params)}
                lr, decay = setup.lr, setup.weight_decay
                self.batched_grad.descend(params, x_k, y_k, lr, decay, **loss_out)
                count.record(k, 1)  # the plain SGD step's one gradient
            else:
                grad_at = self.gradient_at(x_k, y_k, buffers, active, losses)
                direction = count.direction(algorithm, k, params, grad_at, ctx, setup, active)
                if k < all_active:
                    params.sub_(direction, alpha=setup.lr)
                else:  # clients that finished their steps stay where they are
                    params.addcmul_(direction, active, value=-setup.lr)
            if losses is not None:
                losses.end_step(None if k < all_active else active)
            algorithm.after_step(k, params, ctx, active)
        return params

    def gradient_at(self, x, y, buffers, active, losses: TrainingLoss | None):
        """The step's `grad_at(params)` on the minibatches x, y (and the running statistics
        `buffers`); its first call writes the clients' losses into `losses`."""

        def grad_at(p):
            out = None if losses is None else losses.out(p)
            loss_out = {} if out is None else {"loss_out": out}
            if buffers is None:
                return self.batched_grad(p, x, y, **loss_out)
            return self.buffered(p, buffers, x, y, active, **loss_out)

        return grad_at

    @torch.no_grad()
    def losses(
        self, w: torch.Tensor, batch_idx: torch.Tensor, buffers: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(u,) minibatch loss (evaluation mode) of model `w`, running statistics `buffers`,
        on each of u clients' batches (u, B)."""
        idx = batch_idx.to(self.device)
        return self.batched_loss(w, self.x[idx], self.y[idx], buffers)


def loss_as_eval(loss: LossFn) -> Callable:
    """A training loss as an evaluation loss (for models without running statistics)."""

    def eval_loss(w, x, y, buffers=None):
        return loss(w, x, y)

    return eval_loss


class SequentialExecutor:
    """The reference: one client at a time, plain autograd, the same algorithm functions.
    `square_loss`, `buffered_square_loss`: `loss` and `buffered_loss` with the mean squared
    per-sample loss (FlatModel.loss_and_square, loss_buffers_and_square), for the
    training losses (train_loss.py)."""

    def __init__(
        self,
        loss: LossFn,
        x: torch.Tensor,
        y: torch.Tensor,
        device: torch.device,
        buffered_loss: Callable | None = None,
        eval_loss: Callable | None = None,
        draws: ClientDraws | None = None,
        square_loss: SquareLossFn | None = None,
        buffered_square_loss: Callable | None = None,
    ):
        self.device = device
        self.x = x.to(device)
        self.y = y.to(device)
        self.draws = draws
        self.loss = loss
        self.buffered_loss = buffered_loss
        self.square_loss = square_loss
        self.buffered_square_loss = buffered_square_loss
        self.eval_loss = eval_loss or loss_as_eval(loss)

    def _grad(self, theta: torch.Tensor, xb, yb, buffers=None, loss_out=None) -> torch.Tensor:
        """The gradient at `theta`; `buffers` (B,), if given, updated in place; random
        layers draw from the client's generator (the one client of `draws`); `loss_out`
        (2,), if given, receives the losses (TrainingLoss.out's row)."""
        theta = theta.detach().requires_grad_(True)
        square = None
        with own_draws(self.draws, 0):
            if buffers is None and loss_out is not None and self.square_loss is not None:
                loss, square = self.square_loss(theta, xb, yb)
            elif buffers is None:
                loss = self.loss(theta, xb, yb)
            elif loss_out is not None and self.buffered_square_loss is not None:
                loss, (updated, square) = self.buffered_square_loss(theta, buffers, xb, yb)
                buffers.copy_(updated)
            else:
                loss, updated = self.buffered_loss(theta, buffers, xb, yb)
                buffers.copy_(updated)
        (g,) = torch.autograd.grad(loss, theta)
        if loss_out is not None:
            write_losses(loss_out, loss.detach(), square)
        return g

    def train(
        self,
        algorithm: Algorithm,
        ctx: Context,
        setup: RoundSetup,
        batch_idx: torch.Tensor,
        buffers: torch.Tensor | None = None,
        count: GradientCount | None = None,
        losses: TrainingLoss | None = None,
    ) -> torch.Tensor:
        m = batch_idx.shape[0]
        count = GradientCount() if count is None else count
        setup = with_client_ids(setup, m)
        starts = start_params(ctx, m)
        finals = []
        for i in range(m):
            own = ctx.rows(slice(i, i + 1))
            own_setup = setup.rows(slice(i, i + 1))
            theta = starts[i : i + 1]
            one = torch.ones((1, 1), dtype=theta.dtype, device=theta.device)
            own_buffers = None if buffers is None else buffers[i]  # a view: updated in place
            own_losses = None if losses is None else losses.rows(slice(i, i + 1))
            if self.draws is not None:
                self.draws.begin(own_setup, 1)
            for k in range(int(setup.steps[i])):
                idx = batch_idx[i, k].to(self.device)
                xb, yb = self.x[idx], self.y[idx]

                def grad_at(p, xb=xb, yb=yb, own_buffers=own_buffers, own_losses=own_losses):
                    out = None if own_losses is None else own_losses.out(p)
                    return torch.stack([
                        self._grad(row, xb, yb, own_buffers, None if out is None else out[0])
                        for row in p
                    ])  # fmt: skip

                direction = count.direction(algorithm, k, theta, grad_at, own, own_setup, one)
                theta = theta.sub(direction, alpha=setup.lr).detach()  # as the vectorised step
                if own_losses is not None:
                    own_losses.end_step()
                algorithm.after_step(k, theta, own, one)
            finals.append(theta[0])
            for name, value in own.local.items():  # write the client's working state back
                ctx.local[name][i : i + 1] = value
        return torch.stack(finals)

    @torch.no_grad()
    def losses(
        self, w: torch.Tensor, batch_idx: torch.Tensor, buffers: torch.Tensor | None = None
    ) -> torch.Tensor:
        idx = batch_idx.to(self.device)
        return torch.stack([self.eval_loss(w, self.x[i], self.y[i], buffers) for i in idx])
