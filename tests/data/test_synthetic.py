"""Synthetic softmax-regression generators (docs/datasets.md#synthetic-generated-logistic-data)."""

import numpy as np
import pytest

from fedjoule.data.synthetic import synthetic_fedprox, synthetic_logistic
from fedjoule.errors import FedjouleError


def logistic(seed: int = 0, **overrides):
    args = dict(
        n_clients=20, dim=30, n_classes=5, avg_samples=200, alpha=1.0, beta=1.0,
        size_sigma=0.0, iid_sol=False, iid_dat=False, test_samples=50,
    )
    args.update(overrides)
    return synthetic_logistic(**args, rng=np.random.default_rng(seed), return_params=True)


def test_sizes_and_types_with_size_sigma_zero():
    train, test, _ = logistic()
    assert len(train) == len(test) == 20
    for (x, y), (xt, yt) in zip(train, test, strict=True):
        assert x.shape == (200, 30) and y.shape == (200,)
        assert xt.shape == (50, 30) and yt.shape == (50,)
        assert x.dtype == np.float32 and y.dtype == np.int64
        assert y.min() >= 0 and y.max() < 5


def test_lognormal_sizes_spread_with_floor():
    train, _, _ = logistic(size_sigma=1.0, avg_samples=5, n_clients=200)
    sizes = np.array([len(y) for _, y in train])
    assert sizes.min() >= 1
    assert sizes.std() > 0
    assert 2 < np.median(sizes) < 8  # median of LogNormal(log 5, 1) is 5 (before int)


def test_iid_sol_one_shared_labelling_model():
    train, test, params = logistic(iid_sol=True, alpha=1.0)
    w, b = params[0]["W"], params[0]["b"]
    for p, (x, y), (xt, yt) in zip(params, train, test, strict=True):
        assert np.array_equal(p["W"], w) and np.array_equal(p["b"], b)
        assert np.array_equal(y, np.argmax(x.astype(np.float64) @ w + b, axis=1))
        assert np.array_equal(yt, np.argmax(xt.astype(np.float64) @ w + b, axis=1))


def test_non_iid_sol_models_differ_and_label_their_own_data():
    train, _, params = logistic(iid_sol=False)
    assert not np.allclose(params[0]["W"], params[1]["W"])
    agree = []
    for i, (x, y) in enumerate(train):
        x = x.astype(np.float64)
        for j, p in enumerate(params):
            same = np.mean(np.argmax(x @ p["W"] + p["b"], axis=1) == y)
            if i == j:
                assert same == 1.0  # each client's own model labels its data
            else:
                agree.append(same)
    # other clients' models label a client's data far from its own labels (chance is 0.2)
    assert np.mean(agree) < 0.4


def test_feature_covariance_is_diag_j_pow_minus_1_2():
    train, _, params = logistic(n_clients=1, dim=10, avg_samples=40000, iid_dat=True)
    x = train[0][0].astype(np.float64)
    assert np.allclose(params[0]["mean_x"], 0.0)
    cov = np.cov(x, rowvar=False)
    expected = np.diag(np.arange(1, 11, dtype=np.float64) ** -1.2)
    assert np.allclose(np.diag(cov), np.diag(expected), rtol=0.05)
    assert np.abs(cov - np.diag(np.diag(cov))).max() < 0.02
    assert np.allclose(x.mean(axis=0), 0.0, atol=0.02)


def test_non_iid_dat_shifts_feature_means():
    train, _, params = logistic(beta=0.0, iid_dat=False, avg_samples=20000, n_clients=2)
    for p, (x, _) in zip(params, train, strict=True):
        assert not np.allclose(p["mean_x"], 0.0)
        assert np.allclose(x.mean(axis=0), p["mean_x"], atol=0.03)


def test_seeded():
    a, _, _ = logistic(seed=3)
    b, _, _ = logistic(seed=3)
    assert all(np.array_equal(p[0], q[0]) for p, q in zip(a, b, strict=True))


def test_fedprox_split_and_sizes():
    train, test, params = synthetic_fedprox(
        30, alpha=1.0, beta=1.0, rng=np.random.default_rng(0), return_params=True
    )
    assert len(train) == len(test) == len(params) == 30
    for (x, y), (xt, yt) in zip(train, test, strict=True):
        n = len(y) + len(yt)
        assert n >= 50
        assert len(y) == int(0.9 * n)
        assert x.shape[1] == xt.shape[1] == 60 and x.dtype == np.float32
        assert y.max() < 10


def test_fedprox_iid_shares_model_and_zero_mean():
    train, _, params = synthetic_fedprox(
        10, iid=True, rng=np.random.default_rng(1), return_params=True
    )
    w, b = params[0]["W"], params[0]["b"]
    for p, (x, y) in zip(params, train, strict=True):
        assert np.array_equal(p["W"], w) and np.allclose(p["mean_x"], 0.0)
        assert np.array_equal(y, np.argmax(x.astype(np.float64) @ w + b, axis=1))


def test_bad_arguments():
    with pytest.raises(FedjouleError):
        logistic(alpha=-1.0)
    with pytest.raises(FedjouleError):
        synthetic_fedprox(5, test_fraction=1.0, rng=np.random.default_rng(0))
