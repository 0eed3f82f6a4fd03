"""A model as one flat parameter vector (and one flat vector of its running statistics):
views into them, a loss for torch.func, FLOP counts.

Batch norm keeps running statistics (buffers) that training updates in place. Here they are
a second flat vector, (B,) per model and (m, B) for m clients: training gets a copy of each
client's vector, updates it in place and returns it (`loss_and_buffers`), which works under
vmap because the copy is batched. `num_batches_tracked` is dropped: it only matters for
momentum=None (a cumulative average), which is refused.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedjoule.errors import FedjouleError
from fedjoule.models.flops import forward_flops_per_sample

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, y) -> mean loss


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over samples, and over positions for sequence outputs
    (logits (B, T, C), labels (B, T)): every position predicts its next token."""
    if logits.dim() > 2:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return F.cross_entropy(logits, y)


def per_sample_losses(objective: Loss, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(B,) each sample's loss, whose mean is the batch's: cross-entropy without reduction
    (a sequence's: the mean over its positions); a custom loss on each sample alone (a
    batch of one)."""
    if objective is cross_entropy and logits.dim() == 2:
        return F.cross_entropy(logits, y, reduction="none")
    if objective is cross_entropy:
        each = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none"
        )
        return each.reshape(len(y), -1).mean(dim=1)
    return torch.stack([objective(logits[i : i + 1], y[i : i + 1]) for i in range(len(y))])


def mean_square(objective: Loss, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean of the batch's squared per-sample losses, off the logits already computed
    (no gradient flows through it): Oort's statistical utility (train_loss.py)."""
    return per_sample_losses(objective, logits.detach(), y).square().mean()


@dataclass
class FlatModel:
    """A stateless module template whose parameters are passed as one (P,) vector and whose
    floating-point buffers (batch-norm running statistics) as one (B,) vector."""

    module: nn.Module
    names: list[str]
    shapes: list[torch.Size]
    numels: list[int]
    buffer_names: list[str] = field(default_factory=list)
    buffer_shapes: list[torch.Size] = field(default_factory=list)
    buffer_numels: list[int] = field(default_factory=list)
    objective: Loss = cross_entropy  # the factory's own loss, or cross-entropy

    @classmethod
    def wrap(cls, module: nn.Module, loss: Loss | None = None) -> "FlatModel":
        drop_batch_counters(module)
        named = list(module.named_parameters())
        buffers = [(n, b) for n, b in module.named_buffers() if b.is_floating_point()]
        return cls(
            module=module,
            names=[n for n, _ in named],
            shapes=[p.shape for _, p in named],
            numels=[p.numel() for _, p in named],
            buffer_names=[n for n, _ in buffers],
            buffer_shapes=[b.shape for _, b in buffers],
            buffer_numels=[b.numel() for _, b in buffers],
            objective=loss or cross_entropy,
        )

    @property
    def n_params(self) -> int:
        return sum(self.numels)

    @property
    def n_buffers(self) -> int:
        return sum(self.buffer_numels)

    def flat_parameters(self) -> torch.Tensor:
        """The module's own (initial) parameters as one vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def flat_buffers(self) -> torch.Tensor:
        """The module's own (initial) running statistics as one vector ((0,) for none)."""
        named = dict(self.module.named_buffers())
        parts = [named[n].detach().reshape(-1) for n in self.buffer_names]
        dtype = next(self.module.parameters()).dtype
        return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views into a (P,) vector (works under vmap)."""
        chunks = torch.split(flat, self.numels)
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes, strict=True)}

    def unflatten_buffers(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        chunks = torch.split(flat, self.buffer_numels)
        return {
            n: c.view(s)
            for n, c, s in zip(self.buffer_names, chunks, self.buffer_shapes, strict=True)
        }

    def _tensors(self, flat, buffers) -> dict[str, torch.Tensor]:
        tensors = self.unflatten(flat)
        if self.buffer_names and buffers is not None:
            tensors.update(self.unflatten_buffers(buffers))
        return tensors

    def logits(
        self, flat: torch.Tensor, x: torch.Tensor, buffers: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The model's output in evaluation mode (batch norm uses `buffers`' statistics)."""
        set_mode(self.module, training=False)
        return functional_call(self.module, self._tensors(flat, buffers), (x,))

    def loss(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean training loss of a minibatch (cross-entropy unless the factory gave its own;
        docs/algorithms.md#the-local-step), for a model without running statistics."""
        set_mode(self.module, training=True)
        return self.objective(functional_call(self.module, self.unflatten(flat), (x,)), y)

    def loss_and_square(
        self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`loss` (the same operations), and the mean of the minibatch's squared per-sample
        losses from the same forward pass (mean_square). For grad(..., has_aux=True)."""
        set_mode(self.module, training=True)
        logits = functional_call(self.module, self.unflatten(flat), (x,))
        return self.objective(logits, y), mean_square(self.objective, logits, y)

    def loss_and_buffers(
        self, flat: torch.Tensor, buffers: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean training loss and the running statistics after this minibatch (a new (B,)
        vector; `buffers` is left as it was). For grad(..., has_aux=True)."""
        logits, updated = self._with_buffers(flat, buffers, x)
        return self.objective(logits, y), updated

    def loss_buffers_and_square(
        self, flat: torch.Tensor, buffers: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """`loss_and_buffers`, the mean squared per-sample loss with the running statistics
        (loss, (buffers, mean square)). For grad(..., has_aux=True)."""
        logits, updated = self._with_buffers(flat, buffers, x)
        return self.objective(logits, y), (updated, mean_square(self.objective, logits, y))

    def _with_buffers(self, flat, buffers, x) -> tuple[torch.Tensor, torch.Tensor]:
        """The training-mode output and the running statistics after this minibatch."""
        set_mode(self.module, training=True)
        own = {n: b.clone() for n, b in self.unflatten_buffers(buffers).items()}
        logits = functional_call(self.module, {**self.unflatten(flat), **own}, (x,))
        # (separate copies, joined afterwards: under vmap and grad an in-place update of a
        # view does not reach its base)
        return logits, torch.cat([b.reshape(-1) for b in own.values()])

    def eval_loss(
        self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, buffers=None
    ) -> torch.Tensor:
        """Mean loss in evaluation mode (the loss probe of DRFA and DRDM)."""
        return self.objective(self.logits(flat, x, buffers), y)

    def forward_flops_per_sample(self, example: torch.Tensor) -> float:
        """FLOPs of one sample's forward pass (`example`: a batch of one sample)."""
        set_mode(self.module, training=False)
        return forward_flops_per_sample(self.module, example)


def set_mode(module: nn.Module, training: bool) -> None:
    """Training or evaluation mode (batch norm's batch or running statistics, dropout on or
    off), switched only when it changes."""
    if module.training != training:
        module.train(training)


def drop_batch_counters(module: nn.Module) -> None:
    """Remove batch norm's integer `num_batches_tracked` (an in-place counter that cannot be
    batched); it is read only with momentum=None, which is refused here."""
    for name, sub in module.named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm) and sub.track_running_stats:
            if sub.momentum is None:
                raise FedjouleError(
                    f"model layer {name or type(sub).__name__}: batch norm with momentum=None "
                    "(a cumulative average) is not supported; give it a momentum (0.1 is "
                    "torch's default)"
                )
            sub.register_buffer("num_batches_tracked", None)
