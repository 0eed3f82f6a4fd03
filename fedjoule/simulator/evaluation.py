"""Evaluating the global model: test accuracy and loss, and every client's local accuracy.

Accuracy is the fraction of predictions whose arg-max over the last dimension equals the
label: one per sample for a classifier, one per position for a sequence model (logits
(n, T, C), labels (n, T)), where a sample's accuracy is that of its T positions. The loss
is the model's objective (cross-entropy, or a factory's own loss), averaged over samples.
Labels that are not class ids (a regression loss) have no accuracy: NaN.
"""

import numpy as np
import torch
import torch.nn.functional as F

from fedjoule.models.functional import FlatModel, cross_entropy


class Evaluator:
    """One forward pass over the global test set gives the global metrics and, by gathering
    per-sample correctness at each client's local test indices, every client's accuracy."""

    def __init__(
        self,
        model: FlatModel,
        x_test,
        y_test,
        client_test: list[np.ndarray],
        device,
        chunk: int = 4096,
    ):
        self.model = model
        self.x = x_test.to(device)
        self.y = y_test.to(device)
        self.chunk = chunk
        width = max(len(i) for i in client_test)
        index = np.zeros((len(client_test), width), dtype=np.int64)
        mask = np.zeros((len(client_test), width), dtype=bool)
        for k, rows in enumerate(client_test):
            index[k, : len(rows)] = rows
            mask[k, : len(rows)] = True
        self.index = torch.from_numpy(index).to(device)
        self.mask = torch.from_numpy(mask).to(device)

    @torch.no_grad()
    def __call__(self, w: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, float]:
        correct, losses = [], []
        classes = not self.y.is_floating_point()
        for start in range(0, len(self.y), self.chunk):
            logits = self.model.logits(w, self.x[start : start + self.chunk], buffers)
            target = self.y[start : start + self.chunk]
            if classes:
                hit = (logits.argmax(-1) == target).to(torch.float64)
                correct.append(hit.reshape(len(target), -1).mean(1))
            losses.append(self._loss_sum(logits, target))
        if classes:
            correct_all = torch.cat(correct)
        else:
            correct_all = torch.full((len(self.y),), float("nan"), dtype=torch.float64)
        per_client = (correct_all[self.index] * self.mask).sum(1) / self.mask.sum(1)
        client_acc = per_client.cpu().numpy()
        return {
            "accuracy": float(correct_all.mean()),
            "loss": float(torch.stack(losses).sum() / len(self.y)),
            "worst_client_accuracy": float(client_acc.min()),
            "client_accuracy_p10": float(np.percentile(client_acc, 10)),
            "client_accuracy_std": float(client_acc.std()),
        }

    def _loss_sum(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The chunk's loss summed over its samples (mean over a sample's positions)."""
        if self.model.objective is not cross_entropy:
            return self.model.objective(logits, target) * len(target)
        if logits.dim() > 2:
            per_position = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum"
            )
            return per_position / target[0].numel()
        return F.cross_entropy(logits, target, reduction="sum")
