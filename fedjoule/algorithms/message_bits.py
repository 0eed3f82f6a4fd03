"""The bits of a training round's messages: each model-sized vector as its encoding
carries it, one header each way (docs/compression.md#bits). No torch: the engines without
training size their transfers with these."""

import math

SCALE_BITS = 32  # a norm or scale travels as one IEEE single


def qsgd_symbol_bits(levels: int) -> int:
    """Bits of one QSGD entry: sign and level in {-s, ..., s}, 2s + 1 symbols, fixed length."""
    return math.ceil(math.log2(2 * levels + 1))


def topk_count(fraction: float, n_params: int) -> int:
    """k = ceil(fraction P), at least 1."""
    return max(1, min(n_params, math.ceil(fraction * n_params)))


def topk_index_bits(k: int, n_params: int) -> int:
    """The cheaper of k indices of ceil(log2 P) bits each and a P-bit bitmap."""
    return min(k * math.ceil(math.log2(n_params)) if n_params > 1 else 0, n_params)


def vector_bits(spec, n_params: int, float_bits: int) -> int:
    """Bits of one encoded (P,) vector (docs/compression.md#bits):
    none P b; qsgd 32 + P ceil(log2(2s + 1)); topk k b + min(k ceil(log2 P), P);
    sign 32 + P."""
    if spec.kind == "qsgd":
        return SCALE_BITS + n_params * qsgd_symbol_bits(spec.levels)
    if spec.kind == "topk":
        k = topk_count(spec.fraction, n_params)
        return k * float_bits + topk_index_bits(k, n_params)
    if spec.kind == "sign":
        return SCALE_BITS + n_params
    return n_params * float_bits


def payload_bits(scenario, algorithm_cls, n_params: int) -> tuple[int, int]:
    """(uplink, downlink) bits of one client's messages in a training round: the
    algorithm's vectors (its class's or declaration's counts), each encoded, plus one
    header each way."""
    section, channel = scenario.compression, scenario.channel
    up = algorithm_cls.uplink_vectors * vector_bits(
        section.uplink, n_params, channel.bits_per_param
    )
    down = algorithm_cls.downlink_vectors * vector_bits(
        section.downlink, n_params, channel.bits_per_param
    )
    return up + channel.header_bits, down + channel.header_bits
