"""Each client's training loss in a round, as it reports it with its update: the mean over
its local steps of its minibatch loss, and the root mean square of its per-sample losses
over all those steps' samples (docs/policies.md#the-training-loss).

The losses of step k are those the step's first gradient evaluation computes on the way
(the forward pass of that gradient, at the client's parameters of step k; no extra
forward pass): the minibatch's mean loss, and the mean of its squared per-sample losses
(models.functional.mean_square). A step that evaluates no gradient (STEM's first step
after the first round) adds nothing; a client that ran no step (a freeloader) reports nan.
Cho, Wang and Joshi's rpow-d (AISTATS 2022) ranks clients by the losses they computed in
their last local training, for which the mean of minibatch losses stands; Oort's
statistical utility (Lai et al., OSDI 2021) is |B_k| x the root mean square."""

import torch


class TrainingLoss:
    """The m clients' training losses summed over their steps, and their steps counted.
    An executor asks `out()` for the (m, 2) buffer its step's first gradient writes into
    (write_losses), and calls `end_step(active)` after each step."""

    def __init__(self, m: int, device: torch.device | str = "cpu"):
        # per client: the sum of its steps' mean losses, and of their mean squared losses
        self.total = torch.zeros((m, 2), dtype=torch.float64, device=device)
        self.steps = torch.zeros(m, dtype=torch.float64, device=device)
        self.value: torch.Tensor | None = None  # the step's losses, once evaluated
        self.evaluated = False

    def rows(self, index: slice) -> "TrainingLoss":
        """The accumulator of a subset of the clients, adding into this one's rows."""
        part = TrainingLoss(0)
        part.total, part.steps = self.total[index], self.steps[index]
        return part

    def out(self, like: torch.Tensor) -> torch.Tensor | None:
        """The (m, 2) buffer for this step's losses (dtype and device of `like`): column 0
        the minibatch mean loss, column 1 the mean of its squared per-sample losses (nan
        until a gradient that knows them writes it); None when the step has evaluated them
        already (a second gradient in one step)."""
        if self.evaluated:
            return None
        self.evaluated = True
        m = len(self.total)
        if self.value is None or self.value.dtype != like.dtype:
            self.value = torch.empty((m, 2), dtype=like.dtype, device=like.device)
        self.value[:, 1] = torch.nan
        return self.value

    def end_step(self, active: torch.Tensor | None = None) -> None:
        """Add the step's losses of the clients still training (`active` (m, 1), 1 or 0;
        None: all)."""
        if not self.evaluated:
            return
        self.evaluated = False
        value = self.value.to(torch.float64)
        if active is None:
            self.total += value
            self.steps += 1
            return
        mask = active.reshape(-1).to(torch.float64)
        self.total += torch.where(mask[:, None] > 0, value, 0.0)
        self.steps += mask

    def mean(self) -> torch.Tensor:
        """(m,) each client's mean training loss over its steps (float64); nan for none."""
        return self._per_step(self.total[:, 0])

    def rms(self) -> torch.Tensor:
        """(m,) the root mean square of each client's per-sample losses over the samples of
        its steps (every step has B samples: the root of the mean over steps of their mean
        squares); nan for none, or when its gradient did not compute them."""
        return self._per_step(self.total[:, 1]).sqrt()

    def _per_step(self, total: torch.Tensor) -> torch.Tensor:
        return torch.where(self.steps > 0, total / self.steps.clamp(min=1), torch.nan)


def write_losses(out: torch.Tensor, loss: torch.Tensor, square: torch.Tensor | None = None) -> None:
    """A gradient's losses into TrainingLoss.out()'s buffer (its rows, (m, 2) or (2,)): the
    mean loss and, where it computed it, the mean squared per-sample loss."""
    out[..., 0].copy_(loss)
    if square is not None:
        out[..., 1].copy_(square)
