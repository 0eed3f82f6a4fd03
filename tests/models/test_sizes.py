"""The built-in templates' parameters and forward FLOPs counted by arithmetic, without torch
(fedjoule/model_sizes.py), equal to building the model with torch and counting one sample's
forward pass, for every built-in dataset's input shape and several configurations."""

import math
import subprocess
import sys

import pytest
import torch

from fedjoule.data.shapes import DATASET_SHAPES
from fedjoule.errors import FedjouleError
from fedjoule.model_sizes import template_size
from fedjoule.models import build_model
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import ModelSection
from fedjoule.simulator import system_world
from fedjoule.simulator.system_world import model_size

# (input shape, classes) of every built-in dataset with a known shape, and synthetic ones
SHAPES = list(dict.fromkeys((s, c) for s, c, _ in DATASET_SHAPES.values())) + [
    ((60,), 10),
    ((5,), 3),
]
IMAGES = [(shape, classes) for shape, classes in SHAPES if len(shape) == 3]
# (sequence length,) and vocabulary of text input (LEAF Shakespeare: 80 and 80)
SEQUENCES = [((80,), 80), ((7,), 41)]

CONFIGS = {
    "logistic": [{}],
    "mlp": [{}, {"hidden": []}, {"hidden": [7]}, {"hidden": [5, 3, 2]}],
    "cnn": [{}],
    # the counts do not depend on the width's size: small widths keep the forward passes short
    "resnet18": [
        {"width": 4},
        {"width": 6, "norm_groups": 3},
        {"width": 4, "norm": "batch"},
        {"width": 2, "norm": "none"},
    ],
    "char-lstm": [
        {},
        {"embedding_dim": 3, "lstm_hidden": 5, "lstm_layers": 1},
        {"embedding_dim": 4, "lstm_hidden": 6, "lstm_layers": 3},
    ],
}


def torch_size(config: ModelSection, shape, classes: int, dtype=torch.float32):
    """The torch path: the built model's parameters and one counted forward pass."""
    model, _ = build_model(config, shape, classes, seed=0)
    return model.n_params, model.forward_flops_per_sample(torch.zeros((1, *shape), dtype=dtype))


def cases() -> list:
    found = []
    for name, configs in CONFIGS.items():
        shapes = {"cnn": IMAGES, "resnet18": IMAGES, "char-lstm": SEQUENCES}.get(name, SHAPES)
        for options in configs:
            for shape, classes in shapes:
                found.append(pytest.param(name, options, shape, classes, id=f"{name}-{shape}"))
    return found


@pytest.mark.parametrize(("name", "options", "shape", "classes"), cases())
def test_counted_without_torch_equals_the_torch_count(name, options, shape, classes):
    config = ModelSection(name=name, **options)
    text = name == "char-lstm"
    counted = template_size(config, shape, classes, token_input=text)
    assert counted is not None
    n_params, flops = torch_size(config, shape, classes, torch.int64 if text else torch.float32)
    assert counted[0] == n_params
    assert math.isclose(counted[1], flops, rel_tol=1e-12) and flops > 0


def test_the_documented_sizes():
    """docs/learning-models.md's table: ResNet-18 (width 64) on CIFAR-10, the LEAF LSTM."""
    resnet = ModelSection(name="resnet18")
    assert template_size(resnet, (3, 32, 32), 10) == (11_173_962, 1_113_917_440.0)
    assert template_size(resnet.model_copy(update={"norm": "none"}), (3, 32, 32), 10)[0] == (
        11_169_162
    )
    lstm = ModelSection(name="char-lstm")
    assert template_size(lstm, (80,), 80, token_input=True) == (819_920, 130_416_640.0)


@pytest.mark.parametrize(
    ("options", "shape", "text"),
    [
        ({"name": "torchvision", "arch": "resnet18"}, (3, 32, 32), False),
        ({"name": "cnn"}, (104,), False),  # the template refuses it: torch's error
        ({"name": "resnet18", "width": 6, "norm_groups": 4}, (3, 32, 32), False),
        ({"name": "char-lstm"}, (60,), False),  # float input to an embedding
        ({"name": "mlp", "weights": "w.pt"}, (60,), False),  # the file is checked on the model
    ],
)
def test_what_arithmetic_does_not_count_is_left_to_torch(tmp_path, options, shape, text):
    if "weights" in options:
        (tmp_path / "w.pt").write_bytes(b"")
        options = {**options, "weights": str(tmp_path / "w.pt")}
    assert template_size(ModelSection(**options), shape, 10, token_input=text) is None


def test_model_size_counts_without_building_and_keeps_the_stated_flops():
    scenario = load_scenario("default")
    shape, classes = system_world.dataset_shape(scenario.dataset)
    built = system_world._built_model_size(scenario, shape, classes)
    assert model_size(scenario) == built
    stated = load_scenario("default", ["model.forward_flops_per_sample=1234.5"])
    assert model_size(stated) == (built[0], 1234.5)


def test_a_template_refusing_the_input_keeps_its_error():
    scenario = load_scenario("default", ["model.name=cnn", "dataset.name=adult"])
    with pytest.raises(FedjouleError, match="model 'cnn' needs image input"):
        model_size(scenario)


def test_counting_imports_neither_torch_nor_the_models_package():
    code = (
        "import sys\n"
        "from fedjoule.model_sizes import template_size\n"
        "from fedjoule.scenarios.schema import ModelSection\n"
        "print(template_size(ModelSection(name='cnn'), (1, 28, 28), 10))\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m == 'fedjoule.models'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["(1663370, 24546304.0)", "[]"]
