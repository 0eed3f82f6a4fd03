"""Forward FLOPs of one sample, which the compute-energy model multiplies out.

Conventions (docs/learning-models.md):

- a multiply-add is 2 FLOPs: a Linear or matrix product (m x k) @ (k x n) is 2mkn, a
  convolution 2 per multiply-add of its kernel; bias additions are not counted (torch's
  FlopCounterMode, torch.utils.flop_counter, whose formulas are used for matrix products
  and convolutions);
- scaled dot-product attention, in whichever fused kernel torch dispatches to: per query
  head 2·L·S·E for the scores and 2·L·S·Ev for the weighted sum (the math fallback runs as
  those two matrix products);
- recurrent layers (LSTM, GRU, RNN run as one fused operator, which torch's counter does
  not know and would count as 0): 2 FLOPs per multiply-add of the input and hidden
  projections, per step, per layer and direction, i.e. 2 x tokens x (the elements of every
  weight matrix); gate nonlinearities and biases are not counted (they are elementwise);
- normalisation (batch, group, layer, instance, RMS norm): 4 FLOPs per input element for
  the statistics and the normalisation, 5 with a learned scale and shift; batch norm is
  counted so also with running statistics (training computes batch statistics);
- elementwise (pointwise) operators, activations, softmax, pooling, reductions, views,
  copies, indexing and tensor creation: 0 (they are memory-bound and small next to the
  multiply-adds);
- an embedding is a lookup: 0.

Models made only of Linear, Conv2d, ReLU, Flatten, MaxPool2d and Sequential are counted by
a closed form over their layers (equal to torch's counter there). Every other model runs
one forward under torch's FlopCounterMode with the formulas above added, and every
operator it runs must be counted, pointwise or on the negligible list: any other operator
(a custom kernel, an unusual aten operator) is an error naming it and the layer it ran in,
never a silent 0. A model may state its own count: a `forward_flops_per_sample` attribute
on the module (a number, or a function of the example batch), or the scenario's
model.forward_flops_per_sample.
"""

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from fedjoule.errors import FedjouleError

aten = torch.ops.aten

# layer types whose FLOPs the closed form counts exactly (everything else: FlopCounterMode)
_CLOSED_FORM_LAYERS = (nn.Linear, nn.Conv2d, nn.ReLU, nn.Flatten, nn.MaxPool2d, nn.Sequential)

# FLOPs per element of a normalisation: statistics and normalising (mean, variance,
# subtract, scale), and one more for a learned scale and shift
NORM_FLOPS_PER_ELEMENT = 4
NORM_AFFINE_FLOPS_PER_ELEMENT = 1


def closed_form_flops(module: nn.Module, example: torch.Tensor) -> float:
    """FLOPs of one sample's forward pass: 2 per multiply-add of the Linear and Conv2d
    layers, as torch's FlopCounterMode counts them (tests/models check it); other
    layers' elementwise work is not counted. `example` is a batch of one sample."""
    flops = []

    def count(module, inputs, output):
        if isinstance(module, nn.Linear):
            flops.append(2 * output.numel() * module.in_features)
        elif isinstance(module, nn.Conv2d):
            per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
            flops.append(2 * output.numel() * per_output)

    hooks = [m.register_forward_hook(count) for m in module.modules()]
    try:
        with torch.no_grad():
            _forward(module, example)
    finally:
        for hook in hooks:
            hook.remove()
    return float(sum(flops))


def forward_flops_per_sample(module: nn.Module, example: torch.Tensor) -> float:
    """Forward FLOPs of one sample (`example`: a batch of one, float images or int64
    tokens): the module's own `forward_flops_per_sample` when it has one, the closed form
    for plain dense and convolutional stacks, else torch's FLOP counter with fedjoule's
    formulas. Raises FedjouleError for an operator it cannot count, or a total of 0."""
    stated = getattr(module, "forward_flops_per_sample", None)
    if stated is not None:
        return _stated_flops(stated, example)
    if all(type(m) in _CLOSED_FORM_LAYERS for m in module.modules()):
        total = closed_form_flops(module, example)
    else:
        total = counted_flops(module, example)
    if total <= 0:
        raise FedjouleError(
            f"the model ({type(module).__name__}) counts 0 forward FLOPs per sample: it has "
            "no matrix product, convolution or other counted operator; state the count with "
            "model.forward_flops_per_sample"
        )
    return total


def _forward(module: nn.Module, example: torch.Tensor) -> None:
    """One forward pass; a model that fails on the dataset's sample is the user's to fix."""
    try:
        module(example)
    except FedjouleError:
        raise
    except Exception as exc:
        raise FedjouleError(
            f"the model ({type(module).__name__}) fails on one sample of the dataset (a batch "
            f"of shape {tuple(example.shape)}, {example.dtype}): {type(exc).__name__}: {exc}"
        ) from exc


def _stated_flops(stated, example: torch.Tensor) -> float:
    value = stated
    if callable(stated):
        try:
            value = stated(example)
        except Exception as exc:
            raise FedjouleError(
                f"the model's forward_flops_per_sample(example) failed: {type(exc).__name__}: {exc}"
            ) from exc
    try:
        flops = float(value)
    except (TypeError, ValueError):
        flops = math.nan
    if not math.isfinite(flops) or flops <= 0:
        raise FedjouleError(
            f"the model's forward_flops_per_sample is {value!r}; it must be a positive number "
            "(FLOPs of one sample's forward pass) or a function of the example batch "
            "returning one"
        )
    return flops


# --- formulas torch's counter lacks ------------------------------------------------------


def _tokens(input_shape) -> int:
    """Positions a recurrent layer steps through: batch x time (or packed rows)."""
    return math.prod(input_shape) // input_shape[-1]


def recurrent_flops(input_shape, *args, **kwargs) -> int:
    """aten lstm/gru/rnn_tanh/rnn_relu and cuDNN/MIOpen RNNs: the weights come as a list
    (every layer and direction, input and hidden matrices, biases, projections): 2 FLOPs
    per element of every weight matrix per token."""
    matrices = [s for arg in args if isinstance(arg, list | tuple) for s in arg]
    weights = sum(math.prod(s) for s in matrices if isinstance(s, tuple) and len(s) == 2)
    return 2 * _tokens(input_shape) * weights


def mkldnn_rnn_layer_flops(input_shape, w_ih, w_hh, *args, **kwargs) -> int:
    """One layer and direction of a CPU (oneDNN) recurrent layer: the input and the hidden
    projections at every token."""
    return 2 * _tokens(input_shape) * (math.prod(w_ih) + math.prod(w_hh))


def _norm_flops(weight_index: int) -> Callable:
    """A normalisation whose learned scale is argument `weight_index` (None without)."""

    def flops(input_shape, *args, **kwargs) -> int:
        affine = len(args) >= weight_index and args[weight_index - 1] is not None
        per_element = NORM_FLOPS_PER_ELEMENT + (NORM_AFFINE_FLOPS_PER_ELEMENT if affine else 0)
        return per_element * math.prod(input_shape)

    return flops


def attention_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    """Scaled dot-product attention, whichever fused kernel torch dispatches to: per query
    head, the scores Q K^T (2 L S E) and their weighted sum of V (2 L S Ev); the softmax,
    scaling and masking are elementwise (0). Shapes (..., L, E), (..., S, E), (..., S, Ev);
    the leading dimensions are the query's batch and heads (with grouped-query attention
    the keys have fewer heads, the work is per query head)."""
    *batch_heads, length_q, depth = query_shape
    length_k, depth_v = key_shape[-2], value_shape[-1]
    return 2 * math.prod(batch_heads) * length_q * length_k * (depth + depth_v)


def _zero_flops(*args, **kwargs) -> int:
    return 0


def _packets(*names: str) -> list:
    """The aten operators of these names that this torch has."""
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


FLOP_FORMULAS: dict = {
    **dict.fromkeys(
        _packets("lstm", "gru", "rnn_tanh", "rnn_relu", "_cudnn_rnn", "miopen_rnn"),
        recurrent_flops,
    ),
    **dict.fromkeys(_packets("mkldnn_rnn_layer"), mkldnn_rnn_layer_flops),
    # (input, weight, ...): batch norm in all its aten forms, group norm; instance norm
    # runs as _native_batch_norm_legit.no_stats
    **dict.fromkeys(
        _packets(
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training",
            "_batch_norm_with_update",
            "_batch_norm_no_update",
            "cudnn_batch_norm",
            "miopen_batch_norm",
            "native_group_norm",
        ),
        _norm_flops(1),
    ),
    # (input, normalized_shape, weight, ...)
    **dict.fromkeys(_packets("native_layer_norm", "rms_norm", "_fused_rms_norm"), _norm_flops(2)),
    **dict.fromkeys(_packets("embedding"), _zero_flops),
    # every fused attention kernel this torch has (flash for CPU, flash, efficient, cuDNN,
    # the overrideable one, MPS's): (query, key, value, ...); the math fallback decomposes
    # into matrix products, which torch counts
    **dict.fromkeys(
        _packets(
            *(
                name
                for name in dir(aten)
                if name.startswith("_scaled_dot_product_") and not name.endswith("_backward")
            )
        ),
        attention_flops,
    ),
}

# Operators that cost (next to) nothing: views, shapes, copies, tensor creation, indexing,
# reductions, pooling and resampling, activations that torch does not tag pointwise, and
# dropout. Operators tagged torch.Tag.pointwise or inplace_view, and views
# (OpOverload.is_view), are accepted without being listed.
NEGLIGIBLE_OPS = frozenset(
    """
    view _unsafe_view reshape _reshape_alias t transpose permute expand squeeze unsqueeze
    flatten unflatten select slice narrow split split_with_sizes unsafe_split unbind
    unsafe_chunk chunk as_strided alias detach lift_fresh movedim diagonal view_as_real
    view_as_complex unfold
    clone copy_ _to_copy contiguous cat stack repeat tile roll flip constant_pad_nd
    reflection_pad1d reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d
    replication_pad3d lift_fresh_copy fill_ zero_ fill
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros
    ones ones_like new_ones full full_like new_full scalar_tensor arange eye
    rand rand_like randn randn_like randint randperm bernoulli bernoulli_ native_dropout
    index index_select gather scatter scatter_add index_put index_put_ _unsafe_index
    masked_select nonzero take _embedding_bag _embedding_bag_forward_only
    sum mean amax amin max min prod var std var_mean std_mean norm linalg_vector_norm
    logsumexp argmax argmin cumsum any all sort topk
    max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices
    avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
    adaptive_avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_max_pool1d
    adaptive_max_pool2d adaptive_max_pool3d upsample_nearest1d upsample_nearest2d
    upsample_nearest3d upsample_bilinear2d upsample_linear1d upsample_trilinear3d
    upsample_bicubic2d _upsample_bilinear2d_aa _upsample_nearest_exact2d
    _softmax _log_softmax _safe_softmax hardswish hardswish_ glu _prelu_kernel
    log_sigmoid_forward rrelu_with_noise
    size sym_size stride sym_stride numel sym_numel dim storage_offset sym_storage_offset
    is_contiguous sym_is_contiguous is_strides_like_format is_non_overlapping_and_dense
    """.split()
)


def counted_flops(module: nn.Module, example: torch.Tensor) -> float:
    """One forward under torch's FlopCounterMode with FLOP_FORMULAS added; every operator
    that ran must be counted, pointwise, a view or negligible (else FedjouleError)."""
    layers = _LayerTracker(module)
    recorder = _OperatorRecorder(layers)
    training = {m: m.training for m in module.modules()}
    # evaluation mode: no running statistics updated, batch norm fine with a batch of one;
    # gradients on, as in training, so that no inference-only fused kernel is taken
    # (nn.MultiheadAttention's fast path)
    module.eval()
    try:
        # the recorder is entered first, below the counter: it sees the operators the
        # counter ran, after its decompositions
        with layers, recorder, FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as c:
            with torch.enable_grad():
                _forward(module, example)
    finally:
        for m, mode in training.items():
            m.training = mode
    uncounted: dict[str, str] = {}  # operator -> the first layer it ran in
    for name, layer, func in recorder.ops:
        if func._overloadpacket not in c.flop_registry and not _negligible(func):
            uncounted.setdefault(name, layer)
    if uncounted:
        listed = "; ".join(
            f"{name} (in layer {layer or '<top level>'})" for name, layer in uncounted.items()
        )
        raise FedjouleError(
            f"cannot count the forward FLOPs of the model ({type(module).__name__}): no FLOP "
            f"formula for operator {listed}. State the count with model.forward_flops_per_sample "
            "in the scenario (FLOPs of one sample's forward pass), or give the module a "
            "forward_flops_per_sample attribute (a number, or a function of the example batch)"
        )
    return float(c.get_total_flops())


_FREE_TAGS = (torch.Tag.pointwise, torch.Tag.inplace_view)


def _negligible(func) -> bool:
    if getattr(func, "is_view", False) or any(t in _FREE_TAGS for t in func.tags):
        return True
    return func.namespace in ("aten", "prims", "prim") and func._opname in NEGLIGIBLE_OPS


class _LayerTracker:
    """The dotted path of the layer running now (`layer3.0.conv1`), from forward hooks."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.stack: list[str] = []
        self.hooks: list = []

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def __enter__(self):
        for name, sub in self.module.named_modules():
            self.hooks.append(sub.register_forward_pre_hook(self._push(name)))
            self.hooks.append(sub.register_forward_hook(self._pop, always_call=True))
        return self

    def __exit__(self, *exc):
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()
        self.stack.clear()

    def _push(self, name: str):
        def hook(module, args):
            self.stack.append(name)

        return hook

    def _pop(self, module, args, output):
        if self.stack:
            self.stack.pop()


class _OperatorRecorder(TorchDispatchMode):
    """Every operator that runs, with the layer it ran in: (name, layer, OpOverload)."""

    def __init__(self, layers: _LayerTracker) -> None:
        super().__init__()
        self.layers = layers
        self.ops: list[tuple[str, str, object]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if isinstance(func, torch._ops.OpOverload):
            self.ops.append((func.name(), self.layers.current, func))
        return func(*args, **(kwargs or {}))
