"""A corrupt tensor-cache file of a vision dataset is decoded again, not fatal."""

import os
import pathlib
import warnings

import pytest
import torch

from fedjoule.data import vision

DATA_DIR = os.environ.get("FEDJOULE_DATA_DIR")


def truncate(path: pathlib.Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path: pathlib.Path) -> None:
    path.write_bytes(b"\x00not a tensor file\xff" * 100)


def wrong_content(path: pathlib.Path) -> None:
    torch.save([torch.zeros(3), torch.zeros(3)], path)  # loads fine, but is not the cache


def wrong_labels(path: pathlib.Path) -> None:
    raw = torch.load(path, weights_only=True)
    torch.save([raw[0], raw[1][:10], raw[2], raw[3]], path)


@pytest.mark.skipif(not DATA_DIR, reason="FEDJOULE_DATA_DIR is not set")
def test_corrupt_tensor_caches_are_decoded_again_and_rewritten(tmp_path, monkeypatch):
    root = pathlib.Path(DATA_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the cache folder: tmp_path/fedjoule
    monkeypatch.delenv("FEDJOULE_TENSOR_CACHE", raising=False)
    monkeypatch.setattr(vision, "_CACHE", {})
    first = vision.load_vision("mnist", root, download=False)
    path = vision.tensor_cache_path("mnist", root)
    assert path is not None and path.exists() and str(tmp_path) in str(path)
    good = path.read_bytes()
    for damage in (truncate, garbage, wrong_content, wrong_labels):
        damage(path)
        assert path.read_bytes() != good
        monkeypatch.setattr(vision, "_CACHE", {})
        with pytest.warns(UserWarning, match="tensor cache .* decoding the dataset again"):
            again = vision.load_vision("mnist", root, download=False)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True)), damage
        # rewritten whole (no temporary file left): the next load reads it without a warning
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
        raw = torch.load(path, weights_only=True)
        assert [tuple(t.shape) for t in raw] == [
            (60000, 1, 28, 28), (60000,), (10000, 1, 28, 28), (10000,),
        ]  # fmt: skip
        assert raw[0].dtype == torch.uint8 and raw[1].dtype == torch.int64
        assert raw[1][:5].tolist() == [5, 0, 4, 1, 9]  # MNIST's first labels
        monkeypatch.setattr(vision, "_CACHE", {})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cached = vision.load_vision("mnist", root, download=False)
        assert torch.equal(cached[1], first[1])
