"""FoolsGold (Fung, Yoon, Beschastnikh, RAID 2020): down-weights clients whose update
histories look alike (sybils, freeloaders). docs/algorithms.md#foolsgold, official code's rules."""

from dataclasses import dataclass, field, replace

import torch

from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FoolsGoldConfig
from fedjoule.algorithms.state import ServerState


def foolsgold_weights(history: torch.Tensor, confidence: float = 1.0) -> torch.Tensor:
    """Per-client weights in [0, 1] from the rows of summed past updates (official rules)."""
    unit = history / history.norm(dim=1, keepdim=True).clamp(min=1e-30)
    cs = unit @ unit.T
    cs.fill_diagonal_(0.0)  # (the code subtracts the identity)
    v = cs.max(dim=1).values
    # pardoning: cs_ij *= v_i / v_j where v_i < v_j
    ratio = v[:, None] / v[None, :].clamp(min=1e-30)
    cs = torch.where(v[:, None] < v[None, :], cs * ratio, cs)
    alpha = (1 - cs.max(dim=1).values).clamp(0, 1)
    alpha = alpha / alpha.max().clamp(min=1e-30)
    alpha = torch.where(alpha == 1, torch.full_like(alpha, 0.99), alpha)
    logit = confidence * (torch.log(alpha / (1 - alpha)) + 0.5)
    logit = torch.where(torch.isinf(logit) & (logit > 0), torch.ones_like(logit), logit)
    return logit.nan_to_num(0.0).clamp(0, 1)


@dataclass
class FoolsGoldState(ServerState):
    """The model w, each seen client's summed updates H_i and its last weight."""

    history: dict[int, torch.Tensor] = field(default_factory=dict)
    weights: dict[int, float] = field(default_factory=dict)


class FoolsGold(Algorithm):
    """Server keeps H_i = sum of client i's updates; aggregation weights from cosine similarity."""

    declaration = DECLARATIONS["foolsgold"]
    config_class = FoolsGoldConfig

    def init_state(self, w0):
        return FoolsGoldState(w0.clone())

    def aggregate(self, state, uploads, client_ids):
        deltas = uploads["model"] - state.w
        history = dict(state.history)
        for row, k in enumerate(client_ids.tolist()):
            history[k] = history.get(k, torch.zeros_like(state.w)) + deltas[row]
        stacked = torch.stack([history[k] for k in client_ids.tolist()])
        a = foolsgold_weights(stacked, self.config.confidence).to(deltas)
        weights = {**state.weights, **dict(zip(client_ids.tolist(), a.tolist(), strict=True))}
        total = (a[:, None] * deltas).sum(0)
        if self.config.combine == "mean":
            total = total / a.sum() if a.sum() > 0 else torch.zeros_like(total)
        return replace(state, w=state.w + total, history=history, weights=weights)
