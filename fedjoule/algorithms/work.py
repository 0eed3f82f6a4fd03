"""A round's computation, counted: each local step's gradient evaluations, the algorithm's
own vector FLOPs, and the server's aggregation FLOPs (docs/algorithms.md#computation).

A client's compute time and energy in a round are its device's cost of one plain SGD step
(3 x forward FLOPs x batch, devices/compute.py) times its *work*: the gradient evaluations
of its steps plus its steps' vector FLOPs in units of one step's training FLOPs. FedAvg's
work is its step count K exactly; STEM's, with two gradients per step, about 2K.

Gradient evaluations are counted where the executor hands the algorithm `grad_at`, per
local step index k: the count of step k is the largest number of calls any chunk
(vectorised executor: one call evaluates all the chunk's clients) or client (sequential
executor) made at k. A client with K_i steps is charged the counts of steps 0..K_i-1, so
the count depends neither on the executor nor on which clients were selected. A fused
plain-SGD step (dense.DenseGradient.descend, no `grad_at`) is one evaluation.
"""

from typing import TYPE_CHECKING

import numpy as np

from fedjoule.algorithms.declarations import AlgorithmDeclaration
from fedjoule.devices.compute import TRAINING_FLOPS_PER_FORWARD_FLOP

if TYPE_CHECKING:  # (types only: the engines without training import no torch)
    import torch

    from fedjoule.algorithms.base import Algorithm, GradAt


class GradientCount:
    """Gradient evaluations at each local step index of one round (`per_step[k]`)."""

    def __init__(self) -> None:
        self.per_step: list[int] = []

    def record(self, k: int, calls: int) -> None:
        """Step k made `calls` evaluations for one chunk or client; the step keeps the most."""
        if len(self.per_step) <= k:
            self.per_step.extend([0] * (k + 1 - len(self.per_step)))
        self.per_step[k] = max(self.per_step[k], calls)

    def direction(
        self, algorithm: "Algorithm", k: int, params, grad_at: "GradAt", ctx, setup, active
    ) -> "torch.Tensor":
        """`algorithm.direction` of step k, its calls of `grad_at` counted."""
        calls = 0

        def counted(p: "torch.Tensor") -> "torch.Tensor":
            nonlocal calls
            calls += 1
            return grad_at(p)

        out = algorithm.direction(k, params, counted, ctx, setup, active)
        self.record(k, calls)
        return out


def evaluations(per_step: list[int], steps: np.ndarray | int) -> np.ndarray | int:
    """Gradient evaluations of a client with `steps` local steps (an array: one per client):
    the sum of the counts of steps 0..steps-1."""
    cumulative = np.concatenate([[0], np.cumsum(np.asarray(per_step, dtype=np.int64))])
    steps = np.asarray(steps)
    if np.any(steps >= len(cumulative)):  # steps nobody ran (cannot happen in a round)
        raise ValueError(f"{int(steps.max())} steps, {len(per_step)} counted")
    out = cumulative[steps]
    return int(out) if out.ndim == 0 else out


def vector_work(
    algorithm_cls: "AlgorithmDeclaration | type[Algorithm]",
    n_params: int,
    forward_flops: float,
    batch_size: int,
) -> float:
    """The algorithm's vector FLOPs of one local step (`step_vector_flops` x P) in units of
    one gradient evaluation's training FLOPs (3 x forward FLOPs x B)."""
    step_flops = TRAINING_FLOPS_PER_FORWARD_FLOP * forward_flops * batch_size
    return algorithm_cls.step_vector_flops * n_params / step_flops


def local_work(
    per_step: list[int], steps: np.ndarray | int, vector_per_step: float
) -> np.ndarray | float:
    """A client's computation in a round in units of one plain SGD step: gradient
    evaluations + steps x vector work (FedAvg: `steps` exactly)."""
    return evaluations(per_step, steps) + np.asarray(steps) * vector_per_step
