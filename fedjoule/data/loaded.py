"""A dataset as its loader gives it, before it is split among clients; and the check of
what a user's dataset factory returns (the `custom` contract)."""

from dataclasses import dataclass

import numpy as np
import torch

from fedjoule.errors import FedjouleError


@dataclass
class LoadedData:
    """Whole training and test tensors, and the natural client of each sample if any.

    x: float32 (features, images) or int64 (token ids), (n, ...). y: int64 class ids,
    (n,) or (n, T) for sequence labels (one class per position). client_ids: one group
    id per training sample (partition natural); client_ids_test: per test sample."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int | None = None  # None: the largest label + 1
    client_ids: np.ndarray | None = None
    client_ids_test: np.ndarray | None = None
    vocabulary: str | None = None  # text: the character of each id
    group_names: list[str] | None = None  # name of each natural client id 0, 1, ...

    @property
    def classes(self) -> int:
        if self.n_classes is not None:
            return self.n_classes
        return int(max(int(self.y_train.max()), int(self.y_test.max()))) + 1

    @property
    def sequence(self) -> bool:
        """Labels per position (n, T), not one per sample."""
        return self.y_train.dim() > 1


FACTORY_KEYS = ("x_train", "y_train", "x_test", "y_test")
OPTIONAL_KEYS = ("client_ids", "client_ids_test", "n_classes")


def from_factory(result, spec: str) -> LoadedData:
    """Check and convert what a dataset factory returned: a tuple (x_train, y_train,
    x_test, y_test[, client_ids]) or a dict with those keys and optionally client_ids,
    client_ids_test and n_classes. Problems are FedjouleErrors naming `spec` and the key."""
    where = f"dataset factory {spec!r}"
    if isinstance(result, dict):
        unknown = sorted(map(str, set(result) - set(FACTORY_KEYS) - set(OPTIONAL_KEYS)))
        missing = [k for k in FACTORY_KEYS if k not in result]
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"misses {', '.join(missing)}")
            if unknown:
                problems.append(f"has unknown keys {', '.join(unknown)}")
            raise FedjouleError(
                f"{where} returned a dict that {' and '.join(problems)}; keys are "
                f"{', '.join(FACTORY_KEYS)} and optionally {', '.join(OPTIONAL_KEYS)}"
            )
        parts = dict(result)
    elif isinstance(result, tuple | list) and len(result) in (4, 5):
        parts = dict(zip((*FACTORY_KEYS, "client_ids"), result, strict=False))
    else:
        kind = (
            f"a {len(result)}-tuple" if isinstance(result, tuple | list) else type(result).__name__
        )
        raise FedjouleError(
            f"{where} returned {kind}; it must return (x_train, y_train, x_test, y_test), "
            "(x_train, y_train, x_test, y_test, client_ids) or a dict with those keys"
        )

    x_train = _features(parts["x_train"], where, "x_train")
    x_test = _features(parts["x_test"], where, "x_test")
    y_train = _labels(parts["y_train"], where, "y_train", len(x_train), "x_train")
    y_test = _labels(parts["y_test"], where, "y_test", len(x_test), "x_test")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise FedjouleError(
            f"{where}: x_train samples have shape {tuple(x_train.shape[1:])} but x_test "
            f"samples {tuple(x_test.shape[1:])}; they must agree"
        )
    if x_train.dtype != x_test.dtype:
        raise FedjouleError(
            f"{where}: x_train is {_kind(x_train)} but x_test {_kind(x_test)}; they must agree"
        )
    if y_train.shape[1:] != y_test.shape[1:]:
        raise FedjouleError(
            f"{where}: y_train labels have shape {tuple(y_train.shape[1:])} per sample but "
            f"y_test {tuple(y_test.shape[1:])}; they must agree"
        )
    largest = int(max(int(y_train.max()), int(y_test.max())))
    n_classes = parts.get("n_classes")
    if n_classes is not None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer):
            raise FedjouleError(f"{where}: n_classes must be an integer, got {n_classes!r:.60}")
        n_classes = int(n_classes)
        if n_classes <= largest:
            raise FedjouleError(
                f"{where}: n_classes is {n_classes} but the labels go up to {largest}; "
                f"labels must be class ids 0 to n_classes - 1"
            )
    ids = parts.get("client_ids")
    ids_test = parts.get("client_ids_test")
    ids = None if ids is None else _ids(ids, where, "client_ids", len(x_train))
    ids_test = None if ids_test is None else _ids(ids_test, where, "client_ids_test", len(x_test))
    if ids_test is not None and ids is None:
        raise FedjouleError(f"{where}: client_ids_test needs client_ids (of the training set)")
    if ids is not None and ids_test is not None and _text(ids) != _text(ids_test):
        raise FedjouleError(
            f"{where}: client_ids are {ids.dtype} but client_ids_test {ids_test.dtype}; give "
            "both as integers or both as strings"
        )
    return LoadedData(
        x_train,
        y_train,
        x_test,
        y_test,
        n_classes=n_classes,
        client_ids=ids,
        client_ids_test=ids_test,
    )


def _text(ids: np.ndarray) -> bool:
    return ids.dtype.kind in "US"


def _kind(x: torch.Tensor) -> str:
    return "floating point" if x.is_floating_point() else "integer"


def _tensor(value, where: str, key: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise FedjouleError(
                f"{where}: {key} is a numpy array of dtype {value.dtype}, not numbers"
            )
        return torch.from_numpy(np.ascontiguousarray(value))
    if torch.is_tensor(value):
        if value.is_complex():
            raise FedjouleError(f"{where}: {key} is a complex tensor, not real numbers")
        return value.detach().cpu()
    raise FedjouleError(
        f"{where}: {key} is a {type(value).__name__}; give a numpy array or a torch tensor"
    )


def _features(value, where: str, key: str) -> torch.Tensor:
    """float32 (floating or boolean input) or int64 (integer input: token ids)."""
    x = _tensor(value, where, key)
    if x.dim() < 1 or len(x) == 0:
        raise FedjouleError(f"{where}: {key} has no samples (shape {tuple(x.shape)})")
    if x.dim() < 2:
        raise FedjouleError(
            f"{where}: {key} has shape {tuple(x.shape)}; give one row per sample, "
            f"(n, features) or (n, C, H, W) (a single feature is (n, 1))"
        )
    if x.is_floating_point() or x.dtype == torch.bool:
        x = x.to(torch.float32)
        bad = ~torch.isfinite(x)
        if bad.any():
            first = int(bad.reshape(len(x), -1).any(1).nonzero()[0, 0])
            raise FedjouleError(
                f"{where}: {key} has {int(bad.sum())} values that are NaN or infinite "
                f"(first in sample {first}), or too large for float32"
            )
        return x.contiguous()
    return x.to(torch.int64).contiguous()


def _labels(value, where: str, key: str, n: int, x_key: str) -> torch.Tensor:
    """int64 class ids >= 0, (n,) or (n, T)."""
    y = _tensor(value, where, key)
    if y.is_floating_point() or y.dtype == torch.bool:
        raise FedjouleError(
            f"{where}: {key} is {str(y.dtype).replace('torch.', '')}; labels must be integer "
            "class ids (e.g. y.astype('int64'))"
        )
    if y.dim() not in (1, 2):
        raise FedjouleError(
            f"{where}: {key} has shape {tuple(y.shape)}; labels are (n,) class ids or "
            "(n, T) class ids per position"
        )
    if len(y) != n:
        raise FedjouleError(f"{where}: {key} has {len(y)} labels but {x_key} has {n} samples")
    if int(y.min()) < 0:
        raise FedjouleError(
            f"{where}: {key} has negative labels (smallest {int(y.min())}); class ids are 0, "
            "1, 2, ..."
        )
    return y.to(torch.int64).contiguous()


def _ids(value, where: str, key: str, n: int) -> np.ndarray:
    """One client id per sample: integers or strings, as a 1-d numpy array."""
    if torch.is_tensor(value):
        value = value.detach().cpu().numpy()
    elif isinstance(value, list | tuple):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise FedjouleError(
            f"{where}: {key} is a {type(value).__name__}; give a 1-d array (or list) of "
            "integer or string client ids, one per sample"
        )
    if value.dtype.kind not in "iuUS" or value.ndim != 1:
        raise FedjouleError(
            f"{where}: {key} is a {value.ndim}-d array of {value.dtype}; give one integer or "
            "string client id per sample (1-d)"
        )
    if len(value) != n:
        raise FedjouleError(f"{where}: {key} has {len(value)} ids for {n} samples")
    return value
