"""Synthetic softmax-regression federated datasets (FedProx and FedDyn/FedDC generators)."""

import numpy as np

from fedjoule.errors import FedjouleError

ClientData = list[tuple[np.ndarray, np.ndarray]]


def _feature_std(dim: int) -> np.ndarray:
    """Per-feature standard deviation for Sigma = diag(j^-1.2), j = 1..dim."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -0.6


def _sample(
    mean_x: np.ndarray, w: np.ndarray, b: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """n samples x ~ N(mean_x, diag(j^-1.2)) as float32 and y = argmax(x W + b) as int64.

    Labels are computed from the float32 x, so they are exactly reproducible from the output.
    """
    x = mean_x + _feature_std(len(mean_x)) * rng.standard_normal((n, len(mean_x)))
    x = x.astype(np.float32)
    y = np.argmax(x.astype(np.float64) @ w + b, axis=1).astype(np.int64)
    return x, y


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise FedjouleError(message)


def synthetic_logistic(
    n_clients: int,
    dim: int,
    n_classes: int,
    avg_samples: int,
    alpha: float,
    beta: float,
    size_sigma: float,
    iid_sol: bool,
    iid_dat: bool,
    test_samples: int,
    rng: np.random.Generator,
    *,
    return_params: bool = False,
):
    """FedDyn/FedDC generate_syn_logistic (docs/datasets.md#synthetic-generated-logistic-data).

    Client i has n_i = max(1, int(LogNormal(log(avg_samples + 1e-3), size_sigma))) training
    samples x ~ N(mean_x_i, diag(j^-1.2)), y = argmax(x W_i + b_i). alpha and beta are standard
    deviations (mean_W_i ~ N(0, alpha), B_i ~ N(0, beta)), as np.random.normal in the reference.
    iid_dat: mean_x_i = 0, else entries ~ N(B_i, 1); iid_sol: one shared W, b with N(0, 1)
    entries, else W_i, b_i entries ~ N(mean_W_i, 1).

    Unlike the reference code, which tests on the union of the training data, each client also
    gets `test_samples` fresh held-out samples from its own distribution (same W_i, b_i, mean_x_i),
    so measured accuracy is honest.

    Returns (train, test): per-client lists of (x float32 (n, dim), y int64 (n,)); with
    return_params=True also a per-client list of dicts {"W", "b", "mean_x"}.
    """
    _check(n_clients >= 1 and dim >= 1 and n_classes >= 2, "synthetic_logistic needs "
           f"n_clients >= 1, dim >= 1, n_classes >= 2; got {n_clients}, {dim}, {n_classes}")
    _check(avg_samples >= 1 and test_samples >= 0, "synthetic_logistic needs avg_samples >= 1 "
           f"and test_samples >= 0; got {avg_samples}, {test_samples}")
    _check(min(alpha, beta, size_sigma) >= 0, "synthetic_logistic alpha, beta, size_sigma are "
           f"standard deviations and must be >= 0; got {alpha}, {beta}, {size_sigma}")
    sizes = rng.lognormal(np.log(avg_samples + 1e-3), size_sigma, n_clients).astype(np.int64)
    sizes = np.maximum(sizes, 1)
    mean_w = rng.normal(0.0, alpha, n_clients)
    shift = rng.normal(0.0, beta, n_clients)
    if iid_dat:
        mean_x = np.zeros((n_clients, dim))
    else:
        mean_x = rng.normal(shift[:, None], 1.0, (n_clients, dim))
    if iid_sol:
        w_shared = rng.normal(0.0, 1.0, (dim, n_classes))
        b_shared = rng.normal(0.0, 1.0, n_classes)

    train: ClientData = []
    test: ClientData = []
    params = []
    for i in range(n_clients):
        if iid_sol:
            w, b = w_shared, b_shared
        else:
            w = rng.normal(mean_w[i], 1.0, (dim, n_classes))
            b = rng.normal(mean_w[i], 1.0, n_classes)
        x, y = _sample(mean_x[i], w, b, int(sizes[i]) + test_samples, rng)
        train.append((x[: sizes[i]], y[: sizes[i]]))
        test.append((x[sizes[i]:], y[sizes[i]:]))
        params.append({"W": w, "b": b, "mean_x": mean_x[i]})
    if return_params:
        return train, test, params
    return train, test


def synthetic_fedprox(
    n_clients: int,
    dim: int = 60,
    n_classes: int = 10,
    alpha: float = 0.0,
    beta: float = 0.0,
    iid: bool = False,
    test_fraction: float = 0.1,
    *,
    rng: np.random.Generator,
    return_params: bool = False,
):
    """FedProx Synthetic(alpha, beta) (Li et al., MLSys 2020; code litian96/FedProx).

    Device k has floor(LogNormal(4, 2)) + 50 samples; u_k ~ N(0, alpha), B_k ~ N(0, beta)
    (standard deviations); v_k entries ~ N(B_k, 1); W_k, b_k entries ~ N(u_k, 1);
    x ~ N(v_k, diag(j^-1.2)); y = argmax(W_k^T x + b_k). iid: v_k = 0 and one shared W, b with
    N(0, 1) entries. Each device's samples are shuffled and split int((1 - test_fraction) n)
    train / rest test (90/10 by default).

    Returns (train, test) per-client lists of (x float32, y int64); with return_params=True
    also a per-client list of dicts {"W", "b", "mean_x"}.
    """
    _check(n_clients >= 1 and dim >= 1 and n_classes >= 2, "synthetic_fedprox needs "
           f"n_clients >= 1, dim >= 1, n_classes >= 2; got {n_clients}, {dim}, {n_classes}")
    _check(min(alpha, beta) >= 0, "synthetic_fedprox alpha and beta are standard deviations "
           f"and must be >= 0; got {alpha}, {beta}")
    _check(0 <= test_fraction < 1, f"synthetic_fedprox test_fraction must be in [0, 1); "
           f"got {test_fraction}")
    sizes = rng.lognormal(4.0, 2.0, n_clients).astype(np.int64) + 50
    u = rng.normal(0.0, alpha, n_clients)
    shift = rng.normal(0.0, beta, n_clients)
    if iid:
        mean_x = np.zeros((n_clients, dim))
        w_shared = rng.normal(0.0, 1.0, (dim, n_classes))
        b_shared = rng.normal(0.0, 1.0, n_classes)
    else:
        mean_x = rng.normal(shift[:, None], 1.0, (n_clients, dim))

    train: ClientData = []
    test: ClientData = []
    params = []
    for k in range(n_clients):
        if iid:
            w, b = w_shared, b_shared
        else:
            w = rng.normal(u[k], 1.0, (dim, n_classes))
            b = rng.normal(u[k], 1.0, n_classes)
        n = int(sizes[k])
        x, y = _sample(mean_x[k], w, b, n, rng)  # i.i.d. draws: already in random order
        n_train = int((1.0 - test_fraction) * n)
        train.append((x[:n_train], y[:n_train]))
        test.append((x[n_train:], y[n_train:]))
        params.append({"W": w, "b": b, "mean_x": mean_x[k]})
    if return_params:
        return train, test, params
    return train, test
