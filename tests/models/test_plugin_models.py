"""Models resolved through the registry: resnet18, char-lstm, torchvision architectures and
a user's factory (a file or a module), with their errors."""

import textwrap

import pytest
import torch
import torchvision
from torch import nn

from fedjoule.errors import FedjouleError
from fedjoule.models import build_model
from fedjoule.plugins import REGISTRY
from fedjoule.scenarios.schema import ModelSection


def test_every_scenario_model_name_is_registered():
    assert set(REGISTRY.entries("model")) >= {
        "logistic",
        "mlp",
        "cnn",
        "resnet18",
        "char-lstm",
        "torchvision",
        "custom",
    }


def test_seeding_is_unchanged_for_the_existing_templates():
    model, w0 = build_model(ModelSection(name="mlp", hidden=[16]), (12,), 4, seed=3)
    again, w1 = build_model(ModelSection(name="mlp", hidden=[16]), (12,), 4, seed=3)
    assert torch.equal(w0, w1) and model.n_params == 12 * 16 + 16 + 16 * 4 + 4
    _, other = build_model(ModelSection(name="mlp", hidden=[16]), (12,), 4, seed=4)
    assert not torch.equal(w0, other)


@pytest.mark.parametrize(("norm", "kind"), [("group", nn.GroupNorm), ("batch", nn.BatchNorm2d)])
def test_resnet18(norm, kind):
    model, w0 = build_model(ModelSection(name="resnet18", norm=norm), (3, 32, 32), 10, seed=0)
    # 11,173,962 parameters with 10 classes, as the usual CIFAR ResNet-18 (either norm has a
    # scale and a shift per channel)
    assert model.n_params == w0.numel() == 11_173_962
    norms = [m for m in model.module.modules() if isinstance(m, kind)]
    assert len(norms) == 20
    if norm == "group":
        assert {m.num_groups for m in norms} == {2}
    assert not any(m.bias is not None for m in model.module.modules() if isinstance(m, nn.Conv2d))
    model.module.eval()
    assert model.module(torch.zeros((2, 3, 32, 32))).shape == (2, 10)
    assert dict(model.module.named_modules())["layer3.0.shortcut.0"].stride == (2, 2)


def test_resnet18_width_groups_and_no_norm():
    config = ModelSection(name="resnet18", width=8, norm_groups=4)
    model, _ = build_model(config, (1, 28, 28), 7, seed=0)
    assert model.module(torch.zeros((1, 1, 28, 28))).shape == (1, 7)
    assert model.module.fc.in_features == 64
    assert {m.num_groups for m in model.module.modules() if isinstance(m, nn.GroupNorm)} == {4}
    plain, _ = build_model(ModelSection(name="resnet18", norm="none", width=8), (3, 8, 8), 3, 0)
    assert all(m.bias is not None for m in plain.module.modules() if isinstance(m, nn.Conv2d))
    assert not any(isinstance(m, nn.GroupNorm | nn.BatchNorm2d) for m in plain.module.modules())


def test_resnet18_refusals():
    with pytest.raises(FedjouleError, match="norm_groups 4 must divide"):
        build_model(ModelSection(name="resnet18", width=6, norm_groups=4), (3, 8, 8), 3, 0)
    with pytest.raises(FedjouleError, match="needs image input"):
        build_model(ModelSection(name="resnet18"), (60,), 3, 0)


def test_char_lstm():
    model, w0 = build_model(ModelSection(name="char-lstm"), (80,), 80, seed=0)
    # LEAF Shakespeare: embedding 80x8, LSTM 8->256, 256->256, head 256->80
    lstm = 4 * 256 * (8 + 256 + 2) + 4 * 256 * (256 + 256 + 2)
    assert model.n_params == w0.numel() == 80 * 8 + lstm + 256 * 80 + 80 == 819_920
    tokens = torch.randint(0, 80, (2, 80))
    assert model.module(tokens).shape == (2, 80, 80)  # a prediction at every position
    with pytest.raises(FedjouleError, match="needs sequence input"):
        build_model(ModelSection(name="char-lstm"), (1, 28, 28), 10, seed=0)


def test_torchvision_architecture():
    config = ModelSection(name="torchvision", arch="mobilenet_v3_small", options={"dropout": 0.1})
    model, w0 = build_model(config, (3, 32, 32), 10, seed=0)
    reference = torchvision.models.mobilenet_v3_small(num_classes=10)
    assert model.n_params == sum(p.numel() for p in reference.parameters()) == 1_528_106
    assert model.module.classifier[2].p == 0.1
    _, again = build_model(config, (3, 32, 32), 10, seed=0)
    assert torch.equal(w0, again)


def test_torchvision_refusals():
    with pytest.raises(FedjouleError, match="not a classification architecture") as error:
        build_model(ModelSection(name="torchvision", arch="resnet19"), (3, 32, 32), 10, 0)
    assert "resnet18" in str(error.value) and "mobilenet_v3_small" in str(error.value)
    with pytest.raises(FedjouleError, match="RGB images"):
        build_model(ModelSection(name="torchvision", arch="resnet18"), (1, 28, 28), 10, 0)
    config = ModelSection(name="torchvision", arch="resnet18", options={"num_classes": 5})
    with pytest.raises(FedjouleError, match="options.num_classes"):
        build_model(config, (3, 32, 32), 10, 0)
    config = ModelSection(name="torchvision", arch="resnet18", options={"wings": 2})
    with pytest.raises(FedjouleError, match="wings"):
        build_model(config, (3, 32, 32), 10, 0)


def test_torchvision_weights_from_a_local_file(tmp_path):
    source = torchvision.models.resnet18(num_classes=10)
    torch.save(source.state_dict(), tmp_path / "resnet18.pt")
    config = ModelSection(
        name="torchvision", arch="resnet18", weights=str(tmp_path / "resnet18.pt")
    )
    model, w0 = build_model(config, (3, 32, 32), 10, seed=0)
    assert torch.equal(w0, torch.cat([p.detach().reshape(-1) for p in source.parameters()]))
    # a head for another number of classes does not fit: a clear error, not a traceback
    with pytest.raises(FedjouleError, match="does not fit model torchvision") as error:
        build_model(config, (3, 32, 32), 100, seed=0)
    assert "fc.weight" in str(error.value)
    torch.save({"epoch": 3}, tmp_path / "not-weights.pt")
    config = ModelSection(
        name="torchvision", arch="resnet18", weights=str(tmp_path / "not-weights.pt")
    )
    with pytest.raises(FedjouleError, match="not a state_dict"):
        build_model(config, (3, 32, 32), 10, seed=0)


FACTORY = textwrap.dedent(
    """
    import torch
    from torch import nn

    def make(input_shape, n_classes, hidden=5):
        return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], hidden), nn.ReLU(),
                             nn.Linear(hidden, n_classes))

    def halved_squared_error(logits, y):
        return 0.5 * ((logits - nn.functional.one_hot(y, logits.shape[-1])) ** 2).mean()

    def with_loss(input_shape, n_classes):
        return make(input_shape, n_classes), halved_squared_error

    def seeded(input_shape, n_classes):
        return nn.Linear(input_shape[0], n_classes), torch.rand(1)

    def broken(input_shape, n_classes):
        raise KeyError("no such layer")

    def not_a_model(input_shape, n_classes):
        return 42
    """
)


def test_custom_factory_from_a_file(tmp_path, monkeypatch):
    (tmp_path / "net.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    config = ModelSection(name="custom", factory="net.py:make", options={"hidden": 7})
    assert config.source.file == str(tmp_path / "net.py")
    model, w0 = build_model(config, (6,), 3, seed=0)
    assert model.n_params == 6 * 7 + 7 + 7 * 3 + 3
    _, again = build_model(config, (6,), 3, seed=0)
    assert torch.equal(w0, again)  # the factory runs under the model seed
    assert model.forward_flops_per_sample(torch.zeros((1, 6))) == 2 * (6 * 7 + 7 * 3)
    # found again through its recorded path from another working folder
    monkeypatch.chdir(tmp_path.parent)
    assert build_model(config, (6,), 3, seed=0)[0].n_params == model.n_params


def test_custom_factory_from_a_module(tmp_path, monkeypatch):
    package = tmp_path / "fedjoule_test_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = ModelSection(name="custom", factory="fedjoule_test_models.nets:make")
    assert config.source.module == "fedjoule_test_models.nets"
    model, _ = build_model(config, (4,), 2, seed=0)
    assert model.n_params == 4 * 5 + 5 + 5 * 2 + 2


def test_custom_factory_returning_a_loss(tmp_path):
    (tmp_path / "net.py").write_text(FACTORY)
    config = ModelSection(name="custom", factory=f"{tmp_path / 'net.py'}:with_loss")
    model, w0 = build_model(config, (6,), 3, seed=0)
    x, y = torch.randn(4, 6), torch.tensor([0, 2, 1, 2])
    logits = model.module(x)
    expected = 0.5 * ((logits - nn.functional.one_hot(y, 3)) ** 2).mean()
    assert torch.allclose(model.loss(w0, x, y), expected)
    assert not torch.allclose(expected, nn.functional.cross_entropy(logits, y))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("broken", r"model factory '.*net.py:broken' failed: KeyError: 'no such layer'"),
        ("not_a_model", r"factory '.*net.py:not_a_model' returned int 42"),
        ("seeded", r"factory '.*net.py:seeded' returned tuple"),
    ],
)
def test_custom_factory_errors_name_the_factory(tmp_path, name, message):
    (tmp_path / "net.py").write_text(FACTORY)
    config = ModelSection(name="custom", factory=f"{tmp_path / 'net.py'}:{name}")
    with pytest.raises(FedjouleError, match=message):
        build_model(config, (6,), 3, seed=0)


def test_stated_flops_replace_the_count(tmp_path):
    (tmp_path / "net.py").write_text(FACTORY)
    config = ModelSection(
        name="custom", factory=f"{tmp_path / 'net.py'}:make", forward_flops_per_sample=12_345.0
    )
    model, _ = build_model(config, (6,), 3, seed=0)
    assert model.forward_flops_per_sample(torch.zeros((1, 6))) == 12_345.0
