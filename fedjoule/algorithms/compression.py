"""Update compression the learning feels: QSGD, top-k and scaled sign, with error feedback.

What goes on the air is an encoding of each client's update; the server aggregates what
it decodes, and the airtime is that of the encoding's exact size (docs/compression.md).
Every function here is vectorised over the m clients of a round: rows of (m, P) tensors.
"""

from dataclasses import dataclass

import numpy as np
import torch

from fedjoule import rng
from fedjoule.algorithms.message_bits import (  # noqa: F401 - compression's names, kept public
    payload_bits,
    topk_count,
    vector_bits,
)
from fedjoule.errors import FedjouleError

FLOAT_DTYPES = {16: torch.float16, 32: torch.float32, 64: torch.float64}  # IEEE 754 widths
UPLINK, DOWNLINK = 0, 1  # the direction key of the random streams
MIRROR = "downlink_model"  # client-store row: what the client holds, minus w0


def round_to_width(x: torch.Tensor, float_bits: int) -> torch.Tensor:
    """x as a float of `float_bits` bits would carry it (16: IEEE half), back in x's dtype;
    x itself when its dtype is no wider."""
    dtype = FLOAT_DTYPES[float_bits]
    if torch.finfo(dtype).bits >= torch.finfo(x.dtype).bits:
        return x
    return x.to(dtype).to(x.dtype)


# ---------------------------------------------------------------------- the encodings
def qsgd(v: torch.Tensor, levels: int, uniform: torch.Tensor) -> torch.Tensor:
    """Decoded QSGD of each row (Alistarh et al., NeurIPS 2017, Eq. 1): |v| sign(v_i)
    xi_i / s, xi_i = floor(s |v_i| / |v|) + 1 with probability the fractional part (else
    + 0), from `uniform` draws in [0, 1). Unbiased; a zero row stays zero."""
    norm = torch.linalg.vector_norm(v, dim=1, keepdim=True).to(torch.float32).to(v.dtype)
    scaled = v.abs() / norm.clamp(min=torch.finfo(v.dtype).tiny) * levels
    lower = scaled.floor()
    level = lower + (uniform < scaled - lower).to(v.dtype)
    return norm * torch.sign(v) * level / levels


def top_k(v: torch.Tensor, k: int, float_bits: int) -> torch.Tensor:
    """Decoded top-k of each row: the k largest-magnitude entries (torch.topk per row),
    each carried at the float width, zeros elsewhere."""
    index = v.abs().topk(k, dim=1).indices
    out = torch.zeros_like(v)
    return out.scatter_(1, index, round_to_width(v.gather(1, index), float_bits))


def scaled_sign(v: torch.Tensor) -> torch.Tensor:
    """Decoded scaled sign of each row (Karimireddy et al., ICML 2019, Alg. 1):
    |v|_1 / P sign(v), a zero entry sent as +; the scale carried as an IEEE single."""
    scale = v.abs().sum(1, keepdim=True) / v.shape[1]
    scale = scale.to(torch.float32).to(v.dtype)
    return scale * torch.where(v >= 0, 1.0, -1.0).to(v.dtype)


# ---------------------------------------------------------------------- the round's step
@dataclass
class Compressor:
    """A scenario's `compression` section at its channel's float width, for one run."""

    uplink: object  # scenario.compression.uplink
    downlink: object
    float_bits: int
    seed: int
    w0: torch.Tensor  # what every client holds before its first download

    @classmethod
    def build(cls, scenario, w0: torch.Tensor) -> "Compressor | None":
        """None when nothing changes the learning: no compression, and the float width no
        narrower than the model's."""
        section, bits = scenario.compression, scenario.channel.bits_per_param
        narrower = torch.finfo(FLOAT_DTYPES[bits]).bits < torch.finfo(w0.dtype).bits
        if section.uplink.kind == "none" and section.downlink.kind == "none" and not narrower:
            return None
        return cls(section.uplink, section.downlink, bits, scenario.seed, w0)

    def state_names(self, algorithm) -> tuple[str, ...]:
        """Client-store rows this compression keeps: each uplink vector's error-feedback
        residual, and the model each client holds (downlink compression)."""
        names = tuple(f"residual_{n}" for n in algorithm.uplink_wire if self.uplink_feedback)
        return names + ((MIRROR,) if self.downlink.kind != "none" else ())

    @property
    def uplink_feedback(self) -> bool:
        return self.uplink.kind in ("topk", "sign") and bool(self.uplink.error_feedback)

    def encode(self, spec, v: torch.Tensor, client_ids, round_index, direction, j):
        """Decoded rows of `v` under `spec`; QSGD draws its uniforms per client, round,
        direction and vector, so a client's draws do not depend on who else was selected."""
        if spec.kind == "qsgd":
            uniform = torch.stack(
                [
                    torch.from_numpy(
                        rng.stream(self.seed, "compression", round_index, k, direction, j).random(
                            v.shape[1], dtype=np.float64
                        )
                    )
                    for k in client_ids.tolist()
                ]
            ).to(v)
            return qsgd(v, spec.levels, uniform)
        if spec.kind == "topk":
            return top_k(v, topk_count(spec.fraction, v.shape[1]), self.float_bits)
        if spec.kind == "sign":
            return scaled_sign(v)
        return round_to_width(v, self.float_bits)

    def downlink_step(self, algorithm, ctx, rows: dict, client_ids, round_index) -> dict:
        """The broadcast as the clients receive it; returns the client-store updates.
        No compression: every broadcast vector rounded to the float width. Compressed: each
        client i holds w_hat_i (w0 at first); it receives C(start - w_hat_i) and starts
        from w_hat_i + C(start - w_hat_i), which becomes its w_hat_i (the server keeps the
        same copy)."""
        if self.downlink.kind == "none":
            for name, value in list(ctx.shared.items()):
                if torch.is_tensor(value) and value.is_floating_point() and value.dim() == 1:
                    ctx.shared[name] = round_to_width(value, self.float_bits)
            return {}
        start = ctx.shared["start"]
        held = self.w0.to(start) + rows[MIRROR].to(start)
        received = held + self.encode(
            self.downlink, start - held, client_ids, round_index, DOWNLINK, 0
        )
        algorithm.received(ctx, received)
        return {MIRROR: received - self.w0.to(start)}

    def uplink_step(self, algorithm, uploads: dict, ctx, rows: dict, client_ids, round_index):
        """(uploads as the server decodes them, client-store updates). Error feedback: the
        client compresses p = v + e_i, sends C(p) and keeps e_i <- p - C(p)."""
        wire = algorithm.wire_uploads(uploads, ctx)
        decoded, updates = {}, {}
        for j, (name, v) in enumerate(wire.items()):
            if self.uplink_feedback:
                v = v + rows[f"residual_{name}"].to(v)
            decoded[name] = self.encode(self.uplink, v, client_ids, round_index, UPLINK, j)
            if self.uplink_feedback:
                updates[f"residual_{name}"] = v - decoded[name]
        return algorithm.from_wire(decoded, uploads, ctx), updates


def check_wire(algorithm, wire: dict, n_params: int) -> None:
    """A plug-in's `uplink_wire` must name its (m, P) uploads."""
    if len(wire) != algorithm.uplink_vectors or any(
        v.dim() != 2 or v.shape[1] != n_params for v in wire.values()
    ):
        raise FedjouleError(
            f"algorithm {algorithm.name!r}: uplink_wire {list(algorithm.uplink_wire)} must name "
            f"its uplink_vectors={algorithm.uplink_vectors} model-sized uploads (m, P) for "
            "compression (docs/compression.md)"
        )
