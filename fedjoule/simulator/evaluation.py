"""Evaluating the global model: test accuracy and loss, and every client's local accuracy."""

import numpy as np
import torch
import torch.nn.functional as F

from fedjoule.models.functional import FlatModel


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
    def __call__(self, w: torch.Tensor) -> dict[str, float]:
        correct, losses = [], []
        for start in range(0, len(self.y), self.chunk):
            logits = self.model.logits(w, self.x[start : start + self.chunk])
            target = self.y[start : start + self.chunk]
            correct.append(logits.argmax(1) == target)
            losses.append(F.cross_entropy(logits, target, reduction="sum"))
        correct_all = torch.cat(correct).to(torch.float64)
        per_client = (correct_all[self.index] * self.mask).sum(1) / self.mask.sum(1)
        client_acc = per_client.cpu().numpy()
        return {
            "accuracy": float(correct_all.mean()),
            "loss": float(torch.stack(losses).sum() / len(self.y)),
            "worst_client_accuracy": float(client_acc.min()),
            "client_accuracy_p10": float(np.percentile(client_acc, 10)),
            "client_accuracy_std": float(client_acc.std()),
        }
