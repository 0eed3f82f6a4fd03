"""Parameters and forward FLOPs of one sample of the built-in model templates, by arithmetic
from the scenario's `model:` section and the input shape, without torch: the system-only
run's sizes (simulator/system_world.model_size).

Each count equals what building the template with torch (models/templates.py) and counting
it (models/flops.py) gives; tests/models/test_sizes.py compares the two. The conventions are
flops.py's (docs/learning-models.md, "FLOPs"): 2 FLOPs per multiply-add of a Linear layer
or convolution, biases not counted; an LSTM 2 per element of every weight matrix per token;
a normalisation 4 per element, 5 with a learned scale and shift; embeddings, pooling and
elementwise work 0. This module lies outside fedjoule.models, whose package imports torch.

Covered: logistic, mlp, cnn, resnet18 and char-lstm (on integer token input). Not covered
(None: the caller builds the model with torch): torchvision and custom models, a model with
initial weights to load (their file is checked against the built model), and an input the
template refuses (the torch path raises the template's own error)."""

import math

# FLOPs per element of a normalisation (models/flops.py: NORM_FLOPS_PER_ELEMENT plus
# NORM_AFFINE_FLOPS_PER_ELEMENT for the learned scale and shift every built-in norm has)
AFFINE_NORM_FLOPS_PER_ELEMENT = 5


class Count:
    """Parameters and forward FLOPs of one sample, added up layer by layer."""

    def __init__(self) -> None:
        self.params = 0
        self.flops = 0

    def linear(self, d_in: int, d_out: int, positions: int = 1) -> None:
        """nn.Linear(d_in, d_out) applied at `positions` positions."""
        self.params += d_in * d_out + d_out
        self.flops += 2 * positions * d_in * d_out

    def conv(self, c_in: int, c_out: int, kernel: int, out_pixels: int, bias: bool) -> None:
        """nn.Conv2d(c_in, c_out, kernel) with `out_pixels` output positions per channel."""
        self.params += c_out * c_in * kernel * kernel + (c_out if bias else 0)
        self.flops += 2 * c_out * out_pixels * c_in * kernel * kernel

    def norm(self, norm: str, channels: int, pixels: int) -> None:
        """GroupNorm or BatchNorm2d (a learned scale and shift per channel), or none."""
        if norm != "none":
            self.params += 2 * channels
            self.flops += AFFINE_NORM_FLOPS_PER_ELEMENT * channels * pixels


def template_size(
    config, input_shape: tuple[int, ...], n_classes: int, token_input: bool = False
) -> tuple[int, float] | None:
    """(parameters, forward FLOPs of one sample) of `config` (a ModelSection) on samples of
    `input_shape` with `n_classes` classes; `token_input`: the samples are int64 token ids
    (the text dataset). None where this module does not count the model (see above)."""
    if config.weights:
        return None
    count = Count()
    shape = tuple(input_shape)
    if config.name == "logistic":
        count.linear(math.prod(shape), n_classes)
    elif config.name == "mlp":
        _mlp(count, math.prod(shape), config.hidden, n_classes)
    elif config.name == "cnn" and len(shape) == 3 and min(shape[1:]) >= 4:
        _cnn(count, shape, n_classes)
    elif config.name == "resnet18" and _resnet18_builds(config, shape):
        _resnet18(count, shape, n_classes, config.norm, config.width)
    elif config.name == "char-lstm" and len(shape) == 1 and token_input:
        _char_lstm(count, shape[0], n_classes, config)
    else:
        return None
    return count.params, float(count.flops)


def _mlp(count: Count, width: int, hidden: list[int], n_classes: int) -> None:
    for h in hidden:
        count.linear(width, h)
        width = h
    count.linear(width, n_classes)


def _cnn(count: Count, shape: tuple[int, ...], n_classes: int) -> None:
    """McMahan et al.'s CNN: 5x5 convolutions with padding 2 keep the size, each 2x2
    max-pool floors it to half."""
    channels, height, width = shape
    count.conv(channels, 32, 5, height * width, bias=True)
    height, width = height // 2, width // 2
    count.conv(32, 64, 5, height * width, bias=True)
    height, width = height // 2, width // 2
    count.linear(64 * height * width, 512)
    count.linear(512, n_classes)


def _resnet18_builds(config, shape: tuple[int, ...]) -> bool:
    """The input and options templates.resnet18 accepts (else its error, through torch)."""
    if len(shape) != 3 or config.norm not in ("group", "batch", "none"):
        return False
    return config.norm != "group" or config.width % config.norm_groups == 0


def _resnet18(count: Count, shape: tuple[int, ...], n_classes: int, norm: str, width: int):
    """The CIFAR-style ResNet-18: 3x3 stem, four stages of two basic blocks (strides 1, 2,
    2, 2; a 1x1 projection shortcut where the shape changes), average pool, linear head.
    A 3x3 convolution with padding 1 (or a 1x1 without) and stride s maps a side n to
    (n - 1) // s + 1."""
    bias = norm == "none"
    channels, height, side_w = shape
    count.conv(channels, width, 3, height * side_w, bias)
    count.norm(norm, width, height * side_w)
    c_in = width
    for stage, first_stride in enumerate((1, 2, 2, 2)):
        c_out = width * 2**stage
        for stride in (first_stride, 1):
            height, side_w = (height - 1) // stride + 1, (side_w - 1) // stride + 1
            pixels = height * side_w
            count.conv(c_in, c_out, 3, pixels, bias)
            count.norm(norm, c_out, pixels)
            count.conv(c_out, c_out, 3, pixels, bias)
            count.norm(norm, c_out, pixels)
            if stride != 1 or c_in != c_out:
                count.conv(c_in, c_out, 1, pixels, bias)
                count.norm(norm, c_out, pixels)
            c_in = c_out
    count.linear(c_in, n_classes)


def _char_lstm(count: Count, steps: int, vocabulary: int, config) -> None:
    """Embedding (a lookup: 0 FLOPs), LSTM layers (four gates: input and hidden matrices
    4h x d_in and 4h x h, two biases 4h), linear head at every step."""
    count.params += vocabulary * config.embedding_dim
    hidden, d_in = config.lstm_hidden, config.embedding_dim
    for _ in range(config.lstm_layers):
        matrices = 4 * hidden * d_in + 4 * hidden * hidden
        count.params += matrices + 8 * hidden
        count.flops += 2 * steps * matrices
        d_in = hidden
    count.linear(hidden, vocabulary, positions=steps)
