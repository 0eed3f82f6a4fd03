"""The forward FLOP count behind the compute-energy model: equal to torch's FLOP counter where
that counts everything, right where it misses work (fused recurrent layers), and an error,
never a silent 0, for an operator nobody can count."""

import contextlib

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from fedjoule.errors import FedjouleError
from fedjoule.models import build_model
from fedjoule.models.flops import FLOP_FORMULAS, attention_flops, forward_flops_per_sample
from fedjoule.scenarios.schema import ModelSection


def stock_flops(module: nn.Module, example: torch.Tensor) -> int:
    """torch's FlopCounterMode as it comes, no formulas added."""
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(example)
    return counter.get_total_flops()


@pytest.mark.parametrize(
    ("name", "shape"), [("logistic", (60,)), ("mlp", (1, 28, 28)), ("cnn", (1, 28, 28))]
)
def test_forward_flops_equal_torch_flop_counter(name, shape):
    model, _ = build_model(ModelSection(name=name), shape, 10, seed=0)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.module(torch.zeros((1, *shape)))
    assert model.forward_flops_per_sample(torch.zeros((1, *shape))) == counter.get_total_flops() > 0


def test_mlp_flops_closed_form():
    model, _ = build_model(ModelSection(name="mlp", hidden=[200, 200]), (1, 28, 28), 10, seed=0)
    assert model.forward_flops_per_sample(torch.zeros((1, 1, 28, 28))) == 2 * (
        784 * 200 + 200 * 200 + 200 * 10
    )


# ResNet-18 at 32x32: 555.4 M multiply-adds in its convolutions and head (the usual CIFAR
# figure, 0.56 GMACs), which torch's counter reports as 1,110,845,440 FLOPs
RESNET18_CIFAR_CONV_FLOPS = 1_110_845_440
# its 20 norms (stem, 4 per stage, 3 projection shortcuts) see 614,400 elements at 32x32,
# at 5 FLOPs each (statistics and normalising 4, learned scale and shift 1)
RESNET18_CIFAR_NORM_ELEMENTS = (
    64 * 32 * 32 * 5 + 128 * 16 * 16 * 5 + 256 * 8 * 8 * 5 + 512 * 4 * 4 * 5
)


@pytest.mark.parametrize("norm", ["group", "batch"])
def test_resnet18_flops_equal_torch_flop_counter_within_1_percent(norm):
    model, _ = build_model(ModelSection(name="resnet18", norm=norm), (3, 32, 32), 10, seed=0)
    example = torch.zeros((1, 3, 32, 32))
    counted = model.forward_flops_per_sample(example)
    stock = stock_flops(model.module, example)
    assert stock == RESNET18_CIFAR_CONV_FLOPS
    assert counted == RESNET18_CIFAR_CONV_FLOPS + 5 * RESNET18_CIFAR_NORM_ELEMENTS == 1_113_917_440
    assert abs(counted / stock - 1) < 0.01  # 0.28 %: the norms


def test_resnet18_without_norm_is_its_convolutions():
    model, _ = build_model(ModelSection(name="resnet18", norm="none"), (3, 32, 32), 10, seed=0)
    assert model.forward_flops_per_sample(torch.zeros((1, 3, 32, 32))) == RESNET18_CIFAR_CONV_FLOPS


def char_lstm_closed_form(T, e, h, layers, V):
    """2 FLOPs per multiply-add: every step, each layer's input (e, then h) and hidden (h)
    projections to the 4 gates, and the head; biases and gate nonlinearities not counted."""
    return 2 * T * (4 * h * (e + h) + 4 * h * (h + h) * (layers - 1) + h * V)


def test_char_lstm_flops_equal_the_closed_form_where_torch_counts_only_the_head():
    model, _ = build_model(ModelSection(name="char-lstm"), (80,), 80, seed=0)
    example = torch.zeros((1, 80), dtype=torch.long)
    expected = char_lstm_closed_form(T=80, e=8, h=256, layers=2, V=80)
    assert expected == 130_416_640
    assert model.forward_flops_per_sample(example) == expected
    # torch's counter as it comes sees the fused LSTM operator as 0: only the head remains
    assert stock_flops(model.module, example) == 2 * 80 * 256 * 80 == 3_276_800


def test_char_lstm_flops_other_sizes():
    config = ModelSection(name="char-lstm", embedding_dim=16, lstm_hidden=64, lstm_layers=3)
    model, _ = build_model(config, (20,), 50, seed=0)
    counted = model.forward_flops_per_sample(torch.zeros((1, 20), dtype=torch.long))
    assert counted == char_lstm_closed_form(T=20, e=16, h=64, layers=3, V=50)


class _Recurrent(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn
        self.head = nn.Linear(rnn.hidden_size * (2 if rnn.bidirectional else 1), 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def test_recurrent_formula_equals_torch_where_torch_decomposes_the_layer():
    # a GRU on the CPU runs as matrix products torch counts: the formula agrees with them
    model = _Recurrent(nn.GRU(8, 16, num_layers=2, bidirectional=True))
    example = torch.zeros((5, 1, 8))
    expected = 2 * 5 * (2 * 48 * (8 + 16) + 2 * 48 * (32 + 16) + 32 * 3)
    assert forward_flops_per_sample(model, example) == stock_flops(model, example) == expected


def test_bidirectional_lstm_counts_both_directions():
    model = _Recurrent(nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True))
    expected = 2 * 5 * (2 * 64 * (8 + 16) + 2 * 64 * (32 + 16) + 32 * 3)
    assert forward_flops_per_sample(model, torch.zeros((1, 5, 8))) == expected


def test_normalisation_counts_per_element():
    # layer norm with scale and shift: 5 per element; instance norm without: 4
    layer_norm = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8))
    assert forward_flops_per_sample(layer_norm, torch.zeros((1, 8, 4))) == 2 * 8 * 4 * 8 + 5 * 64
    instance = nn.Sequential(nn.Conv2d(1, 8, 1), nn.InstanceNorm2d(8))
    assert forward_flops_per_sample(instance, torch.zeros((1, 1, 4, 4))) == 2 * 128 + 4 * 128
    # batch norm counts as in training (batch statistics) even with running statistics
    batch = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    assert forward_flops_per_sample(batch, torch.zeros((1, 4))) == 2 * 4 * 8 + 5 * 8


def test_counting_leaves_training_mode_and_running_statistics_alone():
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
    before = model[1].running_mean.clone()
    forward_flops_per_sample(model, torch.ones((1, 4)))
    assert model.training and model[1].training
    assert torch.equal(model[1].running_mean, before)


def test_attention_is_counted_not_skipped_by_the_inference_fast_path():
    # under no_grad, nn.MultiheadAttention runs one fused operator that torch does not count;
    # counting runs with gradients on, through the attention's matrix products
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    example = torch.zeros((1, 5, 16))
    projections = 2 * 5 * (16 * 48 + 16 * 16 + 16 * 32 + 32 * 16)
    attention = 2 * 2 * 5 * 5 * 16  # scores and weighted sum, 2 heads of 8
    norms = 2 * 5 * 5 * 16
    assert forward_flops_per_sample(layer, example) == projections + attention + norms


ATTENTION_KERNELS = sorted(
    n
    for n in dir(torch.ops.aten)
    if n.startswith("_scaled_dot_product_") and not n.endswith("_backward")
)


@pytest.mark.parametrize("kernel", ATTENTION_KERNELS)
def test_every_fused_attention_kernel_is_counted(kernel):
    # on meta tensors every kernel runs here, whichever device it is built for: 2 batches,
    # 3 heads, 5 queries, 7 keys, depth 8 -> scores 2*L*S*E plus weighted sum 2*L*S*Ev
    q, k, v = (
        torch.zeros(shape, device="meta") for shape in [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)]
    )
    extra = (None, False) if ("cudnn" in kernel or "efficient" in kernel) else ()
    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter:
        getattr(torch.ops.aten, kernel)(q, k, v, *extra)
    assert counter.get_total_flops() == 2 * 2 * 3 * 5 * 7 * (8 + 8) == 6720


class Attention(nn.Module):
    def __init__(self, depth_v: int) -> None:
        super().__init__()
        self.depth_v = depth_v

    def forward(self, x):  # queries from x; keys and values of another length
        q = x.reshape(1, 2, 5, 6)
        k = torch.ones((1, 2, 7, 6))
        v = torch.ones((1, 2, 7, self.depth_v))
        return nn.functional.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    ("depth_v", "backend"),
    [(6, None), (4, "MATH"), (6, "MATH")],  # equal depths: the fused flash kernel for CPU
)
def test_attention_counts_the_same_on_the_kernels_this_cpu_reaches(depth_v, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    expected = 2 * 2 * 5 * 7 * (6 + depth_v)  # 2 heads, each 2 L S E + 2 L S Ev
    assert attention_flops((1, 2, 5, 6), (1, 2, 7, 6), (1, 2, 7, depth_v)) == expected
    kernels = sdpa_kernel(getattr(SDPBackend, backend)) if backend else contextlib.nullcontext()
    with kernels:
        assert forward_flops_per_sample(Attention(depth_v), torch.zeros((1, 60))) == expected


def test_mobilenet_v3_small_counts_within_a_few_percent_of_torch():
    model, _ = build_model(
        ModelSection(name="torchvision", arch="mobilenet_v3_small"), (3, 32, 32), 10, seed=0
    )
    example = torch.zeros((1, 3, 32, 32))
    counted = model.forward_flops_per_sample(example)
    stock = stock_flops(model.module, example)
    assert stock == 4_339_584
    assert counted == 4_483_744  # + 3.3 %: its batch norms
    assert 0 < counted / stock - 1 < 0.05


# an operator without a FLOP formula, as a user's custom kernel would be
@torch.library.custom_op("fedjoule_test::wobble", mutates_args=())
def wobble(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sin(x)


class Wobble(nn.Module):
    def forward(self, x):
        return wobble(x)


def wobbly_model() -> nn.Module:
    block = nn.Sequential(nn.Linear(6, 4), Wobble())
    return nn.Sequential(nn.Flatten(), nn.Sequential(block), nn.Linear(4, 2))


def test_an_operator_without_formula_is_an_error_naming_it_and_its_layer():
    with pytest.raises(FedjouleError) as error:
        forward_flops_per_sample(wobbly_model(), torch.zeros((1, 6)))
    message = str(error.value)
    assert "fedjoule_test::wobble" in message
    assert "layer 1.0.1" in message  # the Wobble inside the nested blocks
    assert "model.forward_flops_per_sample" in message


def test_a_model_stating_its_flops_is_not_counted():
    model = wobbly_model()
    model.forward_flops_per_sample = 1_000
    assert forward_flops_per_sample(model, torch.zeros((1, 6))) == 1_000.0
    model.forward_flops_per_sample = lambda example: 7.5 * example.shape[-1]
    assert forward_flops_per_sample(model, torch.zeros((1, 6))) == 45.0


@pytest.mark.parametrize("stated", [0, -3, float("nan"), "many", lambda x: None])
def test_a_stated_count_must_be_a_positive_number(stated):
    model = nn.Sequential(nn.Linear(6, 2))
    model.forward_flops_per_sample = stated
    with pytest.raises(FedjouleError, match="positive number"):
        forward_flops_per_sample(model, torch.zeros((1, 6)))


def test_a_model_that_counts_nothing_is_an_error_not_zero():
    with pytest.raises(FedjouleError, match="counts 0 forward FLOPs"):
        forward_flops_per_sample(nn.Embedding(10, 3), torch.zeros((1, 4), dtype=torch.long))


def test_a_model_failing_on_the_sample_is_a_user_error():
    model = nn.Sequential(nn.Embedding(10, 3), nn.Linear(3, 2))
    with pytest.raises(FedjouleError, match=r"fails on one sample .* torch.float32"):
        forward_flops_per_sample(model, torch.zeros((1, 4)))  # text model given floats
