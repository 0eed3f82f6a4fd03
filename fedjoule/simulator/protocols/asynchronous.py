"""protocol.kind=async and buffered: FedAsync and FedBuff, declared, with their server
formulas (the server's SimPy story: protocols/asynchronous_server.py).

- async (Xie, Koyejo, Gupta, 2019): `concurrency` clients train at any time; each arrival
  is mixed in, w <- (1 - a) w + a w_k with a = mixing x s(staleness).
- buffered (Nguyen et al., AISTATS 2022): `concurrency` in flight; every `buffer_size`
  arrivals the server applies w <- w + server_lr sum_i n_i s(t_i) D_i / sum_i n_i, the
  sample-weighted mean of the buffered deltas D_i = w_i - w_(dispatch), each scaled by its
  staleness weight (FedBuff: 1/sqrt(1 + t)).

No torch here (the formulas only use tensor methods): the schema reads the declarations.
"""

from typing import TYPE_CHECKING

from fedjoule.simulator.protocols.declaration import (
    CLIENT_COLUMNS,
    LEDGER,
    ROUND_COLUMNS,
    SUMMARY_FIELDS,
    SYNC_ONLY,
    ProtocolDeclaration,
)

if TYPE_CHECKING:  # annotations only
    import torch

STALENESS_FIELDS = ("staleness", "staleness_a", "staleness_b")
STALENESS_DEFAULTS = {
    "staleness": "polynomial",
    # FedAsync's settings: a = 10 for hinge, 0.5 for polynomial (FedBuff's 1/sqrt(1 + t))
    "staleness_a": lambda section: 10.0 if section.value("staleness") == "hinge" else 0.5,
    "staleness_b": 4.0,
}
_COMMON = {
    "algorithms": ("fedavg", "fedprox"),
    "refused": SYNC_ONLY,
    "round_columns": tuple(ROUND_COLUMNS),
    "client_columns": tuple(CLIENT_COLUMNS),
    "ledger": LEDGER,
    "summary_fields": SUMMARY_FIELDS,
}
ASYNC = ProtocolDeclaration(
    kind="async",
    fields=("concurrency", "mixing", *STALENESS_FIELDS),
    defaults={"mixing": 0.6, **STALENESS_DEFAULTS},
    round_counts="server versions (one per aggregated update: every arrival)",
    **_COMMON,
)
BUFFERED = ProtocolDeclaration(
    kind="buffered",
    fields=("concurrency", "buffer_size", "server_lr", *STALENESS_FIELDS),
    defaults={"server_lr": 1.0, **STALENESS_DEFAULTS},
    round_counts="server versions (one per buffer of protocol.buffer_size updates)",
    **_COMMON,
)


def staleness_weight(kind: str, t: float, a: float, b: float) -> float:
    """FedAsync's s(t) of an update t versions old (Xie et al., 2019, Sec. 5.2): constant
    1; polynomial (t + 1)^-a; hinge 1 for t <= b, else 1 / (a (t - b) + 1)."""
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return (t + 1.0) ** -a
    if kind == "hinge":
        return 1.0 if t <= b else 1.0 / (a * (t - b) + 1.0)
    raise ValueError(f"unknown staleness weight {kind!r}")


def mixed(w: "torch.Tensor", w_client: "torch.Tensor", alpha: float) -> "torch.Tensor":
    """FedAsync's update (Xie et al., 2019, Alg. 1): (1 - alpha) w + alpha w_client."""
    return (1.0 - alpha) * w + alpha * w_client


def buffered_step(
    w: "torch.Tensor",
    deltas: "torch.Tensor",
    samples: "torch.Tensor",
    weights: "torch.Tensor",
    server_lr: float,
) -> "torch.Tensor":
    """FedBuff's server step (Nguyen et al., 2022, Alg. 1) with FedAvg's sample weights:
    w + server_lr sum_i n_i s_i D_i / sum_i n_i for the (K, P) buffered deltas D_i."""
    n = samples.to(deltas)
    return w + server_lr * ((n * weights.to(deltas))[:, None] * deltas).sum(0) / n.sum()
