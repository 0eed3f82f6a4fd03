"""Each client's training loss in a round, as it reports it with its update: the mean over
its local steps of its minibatch loss (docs/policies.md#the-training-loss).

The loss of step k is the one the step's first gradient evaluation computes on the way
(the forward pass of that gradient, at the client's parameters of step k; no extra
forward pass). A step that evaluates no gradient (STEM's first step after the first
round) adds nothing; a client that ran no step (a freeloader) reports nan. Cho, Wang and
Joshi's rpow-d (AISTATS 2022) ranks clients by the losses they computed in their last
local training, for which this mean of minibatch losses stands."""

import torch


class TrainingLoss:
    """The m clients' training losses summed over their steps, and their steps counted.
    An executor asks `out()` for the buffer its step's first gradient writes the (m,)
    losses into, and calls `end_step(active)` after each step."""

    def __init__(self, m: int, device: torch.device | str = "cpu"):
        self.total = torch.zeros(m, dtype=torch.float64, device=device)
        self.steps = torch.zeros(m, dtype=torch.float64, device=device)
        self.value: torch.Tensor | None = None  # the step's losses, once evaluated
        self.evaluated = False

    def rows(self, index: slice) -> "TrainingLoss":
        """The accumulator of a subset of the clients, adding into this one's rows."""
        part = TrainingLoss(0)
        part.total, part.steps = self.total[index], self.steps[index]
        return part

    def out(self, like: torch.Tensor) -> torch.Tensor | None:
        """The (m,) buffer for this step's losses (dtype and device of `like`), or None
        when the step has evaluated them already (a second gradient in one step)."""
        if self.evaluated:
            return None
        self.evaluated = True
        m = len(self.total)
        if self.value is None or self.value.dtype != like.dtype:
            self.value = torch.empty(m, dtype=like.dtype, device=like.device)
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
        self.total += torch.where(mask > 0, value, 0.0)
        self.steps += mask

    def mean(self) -> torch.Tensor:
        """(m,) each client's mean training loss over its steps (float64); nan for none."""
        return torch.where(self.steps > 0, self.total / self.steps.clamp(min=1), torch.nan)
