"""Hand-batched gradients of dense networks: the vectorised executor's fast path for MLPs
and logistic regression.

`vmap(grad(loss))` allocates fresh (m, ...) activation and gradient tensors at every
step; at 100 clients the per-client weight gradients alone are ~80 MB a step, and
the allocator's page faults cost as much as the arithmetic (measured on a 2-core CPU: about
920k page faults a round for the MNIST MLP at 100 clients). Here the
forward and backward passes of Sequential(Flatten, Linear, ReLU, ..., Linear) under
mean cross-entropy are written as batched matrix products (`baddbmm`, `bmm`) into
buffers allocated once and reused. The result equals `vmap(grad(loss))` to float
rounding (tests/algorithms/test_dense.py).
"""

import threading
from dataclasses import dataclass

import torch
from torch import nn

from fedjoule.algorithms.train_loss import write_losses
from fedjoule.models.functional import FlatModel, cross_entropy


@dataclass(frozen=True)
class DenseLayer:
    weight: slice  # the layer's weight (out, in) in the flat parameter vector
    bias: slice
    n_in: int
    n_out: int


class DenseGradient:
    """Per-client gradients of mean cross-entropy for a stack of Linear/ReLU layers."""

    def __init__(self, layers: list[DenseLayer], n_params: int):
        self.layers = layers
        self.n_params = n_params
        self._own = threading.local()  # each thread's workspace (clients split across threads)

    @classmethod
    def build(cls, model: FlatModel) -> "DenseGradient | None":
        """The fast path for `model`, or None when it is not a plain dense stack under
        cross-entropy."""
        if model.objective is not cross_entropy:
            return None
        modules = list(model.module.children()) if isinstance(model.module, nn.Sequential) else []
        if modules and isinstance(modules[0], nn.Flatten):
            modules = modules[1:]
        if not modules or not isinstance(modules[-1], nn.Linear):
            return None
        expect_linear = True
        for module in modules:
            ok = isinstance(module, nn.Linear if expect_linear else nn.ReLU)
            if not ok or (isinstance(module, nn.Linear) and module.bias is None):
                return None
            expect_linear = not expect_linear
        layers, offset = [], 0
        for linear in (mod for mod in modules if isinstance(mod, nn.Linear)):
            n_out, n_in = linear.weight.shape
            weight = slice(offset, offset + n_out * n_in)
            bias = slice(weight.stop, weight.stop + n_out)
            layers.append(DenseLayer(weight, bias, n_in, n_out))
            offset = bias.stop
        if offset != model.n_params:  # parameters not in Linear layers: not ours
            return None
        return cls(layers, model.n_params)

    def _workspace(self, m: int, batch: int, like: torch.Tensor) -> dict:
        key = (m, batch, like.dtype, like.device)
        own = self._own
        if getattr(own, "key", None) != key:  # one shape at a time: the last round's go
            own.key, own.flip = key, 0

            def empty(*shape):
                return torch.empty(shape, dtype=like.dtype, device=like.device)

            own.buffers = {
                "z": [empty(m, batch, layer.n_out) for layer in self.layers],
                "a": [empty(m, batch, layer.n_out) for layer in self.layers[:-1]],
                "dz": [empty(m, batch, layer.n_out) for layer in self.layers],
                "dh": [empty(m, batch, layer.n_in) for layer in self.layers[1:]],
                "dw": [empty(m, layer.n_out, layer.n_in) for layer in self.layers],
                # two result buffers, alternating, so that two calls in one step (STEM)
                # do not overwrite each other
                "out": [empty(m, self.n_params), empty(m, self.n_params)],
                "rows": torch.arange(m * batch, device=like.device),
            }
        return own.buffers

    def __call__(
        self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor, loss_out=None
    ) -> torch.Tensor:
        """(m, P) gradients of mean cross-entropy at `params` (m, P) on batches x (m, B, ...);
        `loss_out` (m, 2), if given, receives each client's losses. The returned buffer is
        reused two calls later."""
        ws = self._workspace(*x.shape[:2], params)
        self._own.flip ^= 1
        out = ws["out"][self._own.flip]

        def keep(layer, weight, dw, db):
            out[:, layer.weight] = dw.view(len(out), -1)
            out[:, layer.bias] = db

        self._backward(params, x, y, ws, keep, loss_out)
        return out

    def descend(
        self,
        params: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        lr: float,
        decay: float,
        loss_out: torch.Tensor | None = None,
    ) -> None:
        """One plain SGD step in place, params -= lr (gradient + decay params), without the
        flat gradient: each layer's gradient is subtracted from its weights as soon as it
        is known (after its weights have served the backward pass). `loss_out` (m, 2), if
        given, receives each client's losses before the step."""
        ws = self._workspace(*x.shape[:2], params)

        def step(layer, weight, dw, db):
            bias = params[:, layer.bias]
            if decay:
                weight.mul_(1 - lr * decay)
                bias.mul_(1 - lr * decay)
            weight.sub_(dw, alpha=lr)
            bias.sub_(db, alpha=lr)

        self._backward(params, x, y, ws, step, loss_out)

    def _backward(self, params, x, y, ws, sink, loss_out=None) -> None:
        """Forward and backward passes; `sink(layer, weight, dw, db)` receives each layer's
        gradients, last layer first, once the layer's weights are no longer needed;
        `loss_out` (m, 2), if given, each client's mean cross-entropy from the logits and
        the mean of its squared per-sample cross-entropies (TrainingLoss.out)."""
        m, batch = x.shape[:2]
        h, inputs, weights = x.reshape(m, batch, -1), [], []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):  # forward: z = h W^T + b, a = relu(z)
            weight = params[:, layer.weight].view(m, layer.n_out, layer.n_in)
            bias = params[:, layer.bias].unsqueeze(1)
            inputs.append(h)
            weights.append(weight)
            torch.baddbmm(bias, h, weight.transpose(1, 2), out=ws["z"][i])
            if i < last:
                h = torch.clamp(ws["z"][i], min=0, out=ws["a"][i])
        if loss_out is not None:  # per-sample cross-entropy = logsumexp(z) - z_y
            logits = ws["z"][last]
            picked = logits.gather(-1, y.reshape(m, batch, 1)).squeeze(-1)
            each = torch.logsumexp(logits, dim=-1) - picked
            write_losses(loss_out, each.mean(dim=1), each.square().mean(dim=1))
        # d(mean cross-entropy)/d logits = (softmax - onehot) / B
        dz = ws["dz"][last]
        dz.copy_(torch.softmax(ws["z"][last], dim=-1))
        dz.view(m * batch, -1)[ws["rows"], y.reshape(-1)] -= 1
        dz.div_(batch)
        for i in range(last, -1, -1):  # backward
            layer = self.layers[i]
            torch.bmm(dz.transpose(1, 2), inputs[i], out=ws["dw"][i])
            db = dz.sum(dim=1)
            if i:
                torch.bmm(dz, weights[i], out=ws["dh"][i - 1])
                dz = torch.mul(ws["dh"][i - 1], ws["z"][i - 1] > 0, out=ws["dz"][i - 1])
            sink(layer, weights[i], ws["dw"][i], db)
