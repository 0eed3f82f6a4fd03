"""Torchvision image datasets loaded as whole, normalised tensors."""

import hashlib
import os
import pathlib
import shutil
import warnings

import numpy as np
import torch

from fedjoule.data.cifar import safe_class
from fedjoule.data.torchvision_import import torchvision
from fedjoule.errors import FedjouleError

VISION_DATASETS: dict[str, str] = {
    "mnist": "MNIST handwritten digits, 1x28x28, 10 classes, 60k/10k",
    "fashion-mnist": "Fashion-MNIST clothing images, 1x28x28, 10 classes, 60k/10k",
    "kmnist": "Kuzushiji-MNIST cursive Japanese, 1x28x28, 10 classes, 60k/10k",
    "emnist": "EMNIST balanced split letters+digits, 1x28x28, 47 classes, 112.8k/18.8k",
    "cifar10": "CIFAR-10 natural images, 3x32x32, 10 classes, 50k/10k",
    "cifar100": "CIFAR-100 natural images, 3x32x32, 100 classes, 50k/10k",
    "svhn": "SVHN street-view house numbers, 3x32x32, 10 classes, 73k/26k",
}

# Standard per-channel mean and std of the training images (pixel values in [0, 1]).
_NORMALISATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "kmnist": ((0.1918,), (0.3483,)),
    "emnist": ((0.1751,), (0.3332,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
}

# The folder torchvision reads under the root, for the error message.
_LAYOUT: dict[str, str] = {
    "mnist": "MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte",
    "fashion-mnist": "FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte",
    "kmnist": "KMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte",
    "emnist": "EMNIST/raw/emnist-balanced-{train,test}-{images-idx3,labels-idx1}-ubyte",
    "cifar10": "cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}",
    "cifar100": "cifar-100-python/{train,test,meta}",
    "svhn": "{train,test}_32x32.mat",
}

Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

# Loaded datasets keyed by (name, resolved root); callers must treat them as read-only.
_CACHE: dict[tuple[str, str], Tensors] = {}


def resolve_data_dir(explicit: str | os.PathLike | None) -> pathlib.Path:
    """The dataset root: `explicit`, else $FEDJOULE_DATA_DIR, else the user cache folder."""
    if explicit is not None and str(explicit) != "":
        return pathlib.Path(explicit).expanduser()
    env = os.environ.get("FEDJOULE_DATA_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    return _user_cache() / "datasets"


def _user_cache() -> pathlib.Path:
    cache = os.environ.get("XDG_CACHE_HOME")
    return (
        pathlib.Path(cache).expanduser() if cache else pathlib.Path.home() / ".cache"
    ) / "fedjoule"


def tensor_cache_path(name: str, root: pathlib.Path) -> pathlib.Path | None:
    """Where the decoded tensors of `name` under `root` are cached, keyed by the dataset's
    files (names, sizes, modification times); None when the files are not there or the
    cache is off (FEDJOULE_TENSOR_CACHE=0)."""
    if os.environ.get("FEDJOULE_TENSOR_CACHE", "1") == "0":
        return None
    top = root / _LAYOUT[name].split("/")[0]
    if not top.exists():
        return None
    files = [p for p in sorted(top.rglob("*")) if p.is_file()] if top.is_dir() else [top]
    stamp = [(str(p.relative_to(root)), p.stat().st_size, int(p.stat().st_mtime)) for p in files]
    key = hashlib.sha256(repr((name, str(root.resolve()), stamp)).encode()).hexdigest()[:16]
    return _user_cache() / "tensors" / f"{name}-{key}-uint8.pt"


def _open(name: str, root: pathlib.Path, train: bool, download: bool):
    """The torchvision dataset object for one split."""
    datasets = torchvision().datasets
    if name == "mnist":
        return datasets.MNIST(root, train=train, download=download)
    if name == "fashion-mnist":
        return datasets.FashionMNIST(root, train=train, download=download)
    if name == "kmnist":
        return datasets.KMNIST(root, train=train, download=download)
    if name == "emnist":
        return datasets.EMNIST(root, split="balanced", train=train, download=download)
    if name in ("cifar10", "cifar100"):  # torchvision's classes, reading without unpickling
        cls = safe_class(datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100)
        return cls(root, train=train, download=download)
    if name == "svhn":
        return datasets.SVHN(root, split="train" if train else "test", download=download)
    raise AssertionError(name)


def _images_and_labels(name: str, ds) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw uint8 images (n, C, H, W) and int64 labels, read from the dataset's arrays."""
    if name in ("cifar10", "cifar100"):  # numpy (n, H, W, C)
        images = torch.from_numpy(np.ascontiguousarray(ds.data)).permute(0, 3, 1, 2)
        labels = torch.as_tensor(np.asarray(ds.targets), dtype=torch.int64)
    elif name == "svhn":  # numpy (n, C, H, W), labels in .labels
        images = torch.from_numpy(np.ascontiguousarray(ds.data))
        labels = torch.as_tensor(np.asarray(ds.labels), dtype=torch.int64)
    else:  # MNIST family: uint8 tensor (n, H, W)
        images = ds.data
        if name == "emnist":  # EMNIST images are stored transposed; make them upright
            images = images.transpose(1, 2)
        images = images.unsqueeze(1)
        labels = torch.as_tensor(ds.targets, dtype=torch.int64)
    return images, labels


def _normalise(name: str, images: torch.Tensor) -> torch.Tensor:
    """float32 images with the dataset's standard per-channel mean/std removed."""
    mean, std = _NORMALISATION[name]
    x = images.to(torch.float32).contiguous()
    x.div_(255.0)
    x.sub_(torch.tensor(mean).view(1, -1, 1, 1)).div_(torch.tensor(std).view(1, -1, 1, 1))
    return x


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def _open_or_fail(name: str, root: pathlib.Path, train: bool, download: bool):
    """Open one split from disk, downloading if allowed; FedjouleError if impossible."""
    return open_or_fail(
        f"dataset {name!r}",
        root,
        _LAYOUT[name],
        lambda download: _open(name, root, train, download=download),
        download,
    )


def open_or_fail(
    what: str,
    root: pathlib.Path,
    layout: str,
    opener,
    download: bool | None,
    folder: pathlib.Path | None = None,
):
    """`opener(download=False)`, else (when `download` is true) `opener(download=True)`;
    a FedjouleError naming `what`, the folder and the remedies if neither works. `layout`
    is the path torchvision reads under `root`; `folder` (default: root/<its first
    component>) is what a download creates, removed again after a failed one when it did
    not exist before. `download` None: the dataset cannot download (opener then takes
    download=None and must not pass it on). A module the class imports that is not
    installed (LSUN's lmdb, SVHN's scipy) is a FedjouleError naming it."""
    try:
        return _needing_modules(what, opener, False if download is not None else None)
    except (RuntimeError, OSError) as missing:
        reason = f"not found ({_one_line(missing)})"
    if download:
        created = _first_missing(folder or root / layout.split("/")[0])
        try:
            return _needing_modules(what, opener, True)
        except (RuntimeError, OSError) as failed:  # URLError is an OSError
            reason = f"not found and the download failed ({_one_line(failed)})"
            if created is not None:  # leave no empty folders behind a failed download
                shutil.rmtree(created, ignore_errors=True)
    if download is None:  # the class has no download: the files must be put there
        fix = f"copy the torchvision layout {root}/{layout} into that folder (this class "
        fix += "cannot download it)"
    else:
        hint = "allow downloading (download=True), or " if download is False else ""
        fix = (
            f"{hint}run once on a machine with internet so torchvision downloads it there, "
            f"or copy the torchvision layout {root}/{layout} into that folder"
        )
    raise FedjouleError(
        f"{what} is {reason} under the data folder {root}. To fix: {fix}, or point "
        f"FEDJOULE_DATA_DIR / --data-dir at a folder that already holds it."
    )


def _needing_modules(what: str, opener, download):
    try:
        return opener(download=download)
    except ImportError as exc:  # ModuleNotFoundError too: an optional module of the class
        module = exc.name or _one_line(exc)
        raise FedjouleError(
            f"{what} needs the Python module {module!r}, which is not installed here "
            f"({_one_line(exc)[:120]}); install the package that provides it, or "
            "choose another dataset"
        ) from None


def _first_missing(path: pathlib.Path) -> pathlib.Path | None:
    """The outermost folder of `path` that does not exist yet (None: it exists)."""
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


def load_vision(name: str, root: pathlib.Path, download: bool = True) -> Tensors:
    """(x_train, y_train, x_test, y_test) of a torchvision dataset as whole tensors.

    Images are float32 (n, C, H, W), normalised with the dataset's standard mean/std;
    labels are int64. Results are cached per (name, root) in memory (treat them as
    read-only), and the decoded uint8 images as a tensor file in the user cache folder,
    so that later runs skip torchvision's import and decoding; the first load always
    goes through torchvision.
    """
    if name not in VISION_DATASETS:
        raise FedjouleError(
            f"unknown vision dataset {name!r}; valid names: {', '.join(VISION_DATASETS)}"
        )
    root = pathlib.Path(root).expanduser()
    key = (name, str(root.resolve()))
    if key in _CACHE:
        return _CACHE[key]
    cached = tensor_cache_path(name, root)
    raw = None
    if cached is not None and cached.exists():  # raw uint8 images: 4x less to read
        raw = _read_tensor_cache(cached, name)
    if raw is None:
        raw = []
        for train in (True, False):
            raw += _images_and_labels(name, _open_or_fail(name, root, train, download))
        cached = tensor_cache_path(name, root)  # after a download the files exist now
        if cached is not None:
            try:  # best effort: a read-only home only costs the next run the decoding
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(f".{os.getpid()}.tmp")
                torch.save([t.contiguous() for t in raw], tmp)
                os.replace(tmp, cached)  # atomic: readers see the old file or the new one
            except OSError:
                pass
    result: Tensors = (_normalise(name, raw[0]), raw[1], _normalise(name, raw[2]), raw[3])
    _CACHE[key] = result
    return result


def _read_tensor_cache(path: pathlib.Path, name: str) -> list[torch.Tensor] | None:
    """The cached [images, labels, test images, test labels], or None (with a warning)
    when the file is truncated, garbage or not what load_vision writes: the caller then
    decodes the dataset again and rewrites the file."""
    try:
        raw = torch.load(path, weights_only=True)
        problem = _cache_problem(raw)
    except Exception as error:  # whatever makes the file unreadable: decode again
        problem = f"unreadable ({type(error).__name__}: {_one_line(error)[:200]})"
    if problem is None:
        return raw
    warnings.warn(
        f"the tensor cache {path} of dataset {name!r} is {problem}; decoding the dataset "
        "again and rewriting the cache",
        stacklevel=3,
    )
    return None


def _cache_problem(raw) -> str | None:
    """What is wrong with a loaded tensor-cache object (None: nothing)."""
    if not (isinstance(raw, list | tuple) and len(raw) == 4):
        return "not a list of four tensors"
    if not all(torch.is_tensor(t) for t in raw):
        return "not a list of four tensors"
    for images, labels in (raw[:2], raw[2:]):
        if images.dtype != torch.uint8 or images.dim() != 4:
            return "holding images that are not uint8 (n, C, H, W)"
        if labels.dtype != torch.int64 or labels.shape != images.shape[:1]:
            return "holding labels that do not match its images"
    return None
