"""Torchvision datasets: real MNIST / Fashion-MNIST files and the missing-data errors."""

import os
import pathlib

import pytest
import torch

from fedjoule.data.vision import VISION_DATASETS, load_vision, resolve_data_dir
from fedjoule.errors import FedjouleError

DATA_DIR = os.environ.get("FEDJOULE_DATA_DIR")
needs_data = pytest.mark.skipif(not DATA_DIR, reason="FEDJOULE_DATA_DIR is not set")


def test_resolve_data_dir(monkeypatch, tmp_path):
    assert resolve_data_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.setenv("FEDJOULE_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("FEDJOULE_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_data_dir(None) == tmp_path / "cache" / "fedjoule" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert resolve_data_dir(None) == pathlib.Path.home() / ".cache" / "fedjoule" / "datasets"


def check_mnist_like(name: str) -> None:
    x, y, xt, yt = load_vision(name, pathlib.Path(DATA_DIR), download=False)
    assert x.shape == (60000, 1, 28, 28) and xt.shape == (10000, 1, 28, 28)
    assert x.dtype == xt.dtype == torch.float32
    assert y.dtype == yt.dtype == torch.int64
    assert y.shape == (60000,) and yt.shape == (10000,)
    assert abs(x.mean().item()) < 0.01 and abs(x.std().item() - 1.0) < 0.01
    assert abs(xt.mean().item()) < 0.05 and abs(xt.std().item() - 1.0) < 0.05
    assert torch.equal(torch.unique(y), torch.arange(10))
    assert torch.equal(torch.unique(yt), torch.arange(10))
    # both sets are balanced-ish: every class has 5-12 % of the samples
    share = torch.bincount(y, minlength=10) / 60000
    assert share.min() > 0.05 and share.max() < 0.12
    # second load comes from the cache: the same tensors
    assert load_vision(name, pathlib.Path(DATA_DIR), download=False)[0] is x


@needs_data
def test_mnist_loads():
    check_mnist_like("mnist")


@needs_data
def test_fashion_mnist_loads():
    check_mnist_like("fashion-mnist")


def test_missing_cifar10_names_dataset_and_folder(tmp_path):
    with pytest.raises(FedjouleError) as info:
        load_vision("cifar10", tmp_path, download=False)
    message = str(info.value)
    assert "cifar10" in message and str(tmp_path) in message
    assert "FEDJOULE_DATA_DIR" in message


@pytest.mark.parametrize("name", ["kmnist", "emnist", "svhn"])
def test_missing_others_raise(tmp_path, name):
    with pytest.raises(FedjouleError, match=name):
        load_vision(name, tmp_path, download=False)


def test_unknown_name_lists_valid_names(tmp_path):
    with pytest.raises(FedjouleError) as info:
        load_vision("imagenet", tmp_path)
    for name in VISION_DATASETS:
        assert name in str(info.value)
    assert set(VISION_DATASETS) == {
        "mnist", "fashion-mnist", "kmnist", "emnist", "cifar10", "cifar100", "svhn"
    }


def test_decoded_tensors_are_cached_and_read_back_equal(tmp_path, monkeypatch):
    import os

    import torch

    from fedjoule.data import vision

    root = os.environ.get("FEDJOULE_DATA_DIR")
    if not root:
        pytest.skip("FEDJOULE_DATA_DIR not set")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(vision, "_CACHE", {})
    first = vision.load_vision("mnist", pathlib.Path(root))
    path = vision.tensor_cache_path("mnist", pathlib.Path(root))
    assert path is not None and path.exists() and str(tmp_path) in str(path)
    monkeypatch.setattr(vision, "_CACHE", {})
    second = vision.load_vision("mnist", pathlib.Path(root))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    monkeypatch.setenv("FEDJOULE_TENSOR_CACHE", "0")
    assert vision.tensor_cache_path("mnist", pathlib.Path(root)) is None
