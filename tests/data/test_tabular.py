"""UCI Adult loader against the real files."""

import os
import pathlib

import pytest
import torch

from fedjoule.data.tabular import load_adult
from fedjoule.errors import FedjouleError

DATA_DIR = os.environ.get("FEDJOULE_DATA_DIR")


@pytest.mark.skipif(not DATA_DIR, reason="FEDJOULE_DATA_DIR is not set")
def test_adult_loads():
    x, y, xt, yt = load_adult(pathlib.Path(DATA_DIR))
    # rows without '?': 30162 train, 15060 test (adult.names)
    assert x.shape[0] == 30162 and xt.shape[0] == 15060
    assert x.shape[1] == xt.shape[1]
    # 6 numeric + one-hot of 8 categorical columns (train and test categories)
    assert x.shape[1] == 104
    assert x.dtype == xt.dtype == torch.float32 and y.dtype == yt.dtype == torch.int64
    assert 0.24 <= y.float().mean().item() <= 0.255
    assert 0.24 <= yt.float().mean().item() <= 0.255
    numeric = x[:, :6]
    assert torch.allclose(numeric.mean(0), torch.zeros(6), atol=1e-4)
    assert torch.allclose(numeric.std(0), torch.ones(6), atol=1e-3)
    # each categorical block is one-hot: 8 ones per row
    assert torch.equal(x[:, 6:].sum(1), torch.full((30162,), 8.0))
    assert torch.equal(xt[:, 6:].sum(1), torch.full((15060,), 8.0))


def test_missing_adult_names_path_and_source(tmp_path):
    with pytest.raises(FedjouleError) as info:
        load_adult(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "adult" / "adult.data") in message
    assert "archive.ics.uci.edu" in message
