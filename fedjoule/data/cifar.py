"""CIFAR-10 and CIFAR-100 ("python version" files) read without letting the files run code.

The files are Python 2 cPickle dumps (protocol 2) of dicts: b"data" a uint8 numpy array
(n, 3072), b"labels" (CIFAR-10) or b"fine_labels" and b"coarse_labels" (CIFAR-100) lists
of ints, b"filenames" and b"batch_label"; the meta files hold lists of class names.
torchvision reads them with pickle.load, which calls whatever global a file names. Here
they are read by an unpickler that knows only what a numpy array of bytes needs:

- numpy.core.multiarray._reconstruct (numpy._core.multiarray._reconstruct when written
  by numpy 2), numpy.ndarray and numpy.dtype, which the real files name;
- _codecs.encode, which Python 3 writes for bytes at protocol 2 (a file re-pickled so),
  allowed for latin-1 text only.

Each of them is a stand-in that builds only an empty ndarray, a dtype without Python
objects, or latin-1 bytes; any other global is refused with a FedjouleError naming the file
and the global, before anything is called.

CIFAR10 and CIFAR100 here are torchvision's classes with their reading replaced (same
constructor, same `data`, `targets`, `classes`, same samples); files are looked for where
torchvision looks, without checksums, and download=True downloads as torchvision does.
"""

import functools
import pathlib
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fedjoule.data.torchvision_import import torchvision
from fedjoule.errors import FedjouleError

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct as _numpy_reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct as _numpy_reconstruct

PIXELS = 3 * 32 * 32  # one image's bytes in a batch row: 1024 red, 1024 green, 1024 blue

# torchvision's messages (CIFAR10.__init__, CIFAR10._load_meta), kept for open_or_fail.
NOT_FOUND = "Dataset not found or corrupted. You can use download=True to download it"
META_NOT_FOUND = (
    "Dataset metadata file not found or corrupted. You can use download=True to download it"
)


class _NotCifar(Exception):
    """A file asks for something a CIFAR batch never does (the reason completes
    "it asks ..."): turned into a FedjouleError naming the file."""


class _NdarrayClass:
    """What numpy.ndarray resolves to: only _reconstruct below accepts it (the real class
    would let a file call ndarray(shape) directly)."""

    def __repr__(self) -> str:
        return "numpy.ndarray"

    def __call__(self, *args, **kwargs):
        raise _NotCifar("to call numpy.ndarray itself")


_NDARRAY = _NdarrayClass()


def _reconstruct(subtype, shape, typecode):
    """numpy's _reconstruct(ndarray, (0,), b"b"): the empty array that BUILD then fills."""
    if subtype is not _NDARRAY or tuple(shape) != (0,):
        raise _NotCifar(f"to build a numpy array as {subtype!r:.60} {shape!r:.60}")
    return _numpy_reconstruct(np.ndarray, (0,), _dtype(typecode))


def _dtype(spec, align=False, copy=False):
    """numpy.dtype("u1", 0, 1) as pickled; never a dtype holding Python objects."""
    if not isinstance(spec, str | bytes):
        raise _NotCifar(f"for a numpy dtype from {type(spec).__name__} {spec!r:.60}")
    dtype = np.dtype(spec, bool(align), bool(copy))
    if dtype.hasobject:
        raise _NotCifar("for an array of Python objects")
    return dtype


def _latin1(text, encoding="utf-8", errors="strict"):
    """_codecs.encode(text, "latin1"): how Python 3 pickles bytes at protocol 2."""
    if not (isinstance(text, str) and str(encoding).lower().replace("_", "-") in _LATIN1):
        raise _NotCifar(f"to encode {type(text).__name__} as {encoding!r:.40}")
    return text.encode("latin-1")


_LATIN1 = ("latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1")

ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _dtype,
    ("_codecs", "encode"): _latin1,
}


class _BatchUnpickler(pickle.Unpickler):
    """pickle.Unpickler that resolves only ALLOWED_GLOBALS (encoding latin1 as torchvision:
    Python 2 strings become str, the array bytes are given back to numpy as latin-1)."""

    def __init__(self, file, path: pathlib.Path):
        super().__init__(file, encoding="latin1")
        self._path = path

    def find_class(self, module: str, name: str):
        allowed = ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise FedjouleError(
                f"refusing to load {self._path}: it asks to run {module}.{name}, which a "
                "CIFAR batch never does"
            )
        return allowed

    def persistent_load(self, pid):
        raise _NotCifar("for a persistent object")


def read_pickle(path: str | pathlib.Path) -> dict:
    """The dict in one CIFAR python-version file (data batch or meta), keys as str.
    FedjouleError, naming the file, for anything that is not such a dict."""
    path = pathlib.Path(path)
    try:
        with open(path, "rb") as f:
            content = _BatchUnpickler(f, path).load()
    except (FedjouleError, OSError):
        raise
    except _NotCifar as refused:
        raise FedjouleError(
            f"refusing to load {path}: it asks {refused}, which a CIFAR batch never does"
        ) from None
    except Exception as error:  # truncated, not a pickle, a malformed array, ...
        detail = " ".join(str(error).split())[:160] or type(error).__name__
        raise FedjouleError(
            f"cannot read {path}: not a CIFAR python-version file ({detail}); replace it "
            "with the file from the CIFAR archive"
        ) from None
    if not isinstance(content, dict):
        raise FedjouleError(
            f"cannot read {path}: it holds a {type(content).__name__}, not the dict of a "
            "CIFAR python-version file"
        )
    return {_text(k): v for k, v in content.items()}


def _text(value):
    return value.decode("latin-1") if isinstance(value, bytes) else value


def read_batch(path: str | pathlib.Path) -> tuple[np.ndarray, list[int]]:
    """(data uint8 (n, 3072), labels) of one data batch; labels are b"labels" (CIFAR-10),
    else b"fine_labels" (CIFAR-100), as torchvision takes them."""
    path = pathlib.Path(path)
    entry = read_pickle(path)
    key = "labels" if "labels" in entry else "fine_labels"
    data, labels = entry.get("data"), entry.get(key)
    if data is None or labels is None:
        raise FedjouleError(
            f"cannot read {path}: a CIFAR batch holds 'data' and 'labels' or 'fine_labels'; "
            f"it has {', '.join(map(str, entry)) or 'nothing'}"
        )
    labels = np.asarray(labels)
    if labels.ndim != 1 or not (labels.size == 0 or np.issubdtype(labels.dtype, np.integer)):
        raise FedjouleError(f"cannot read {path}: its {key!r} are not a list of integers")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8:
        what = data.dtype if isinstance(data, np.ndarray) else type(data).__name__
        raise FedjouleError(f"cannot read {path}: its 'data' is {what}, not a uint8 array")
    if data.size != len(labels) * PIXELS:
        raise FedjouleError(
            f"cannot read {path}: its 'data' holds {data.size} bytes, not {len(labels)} "
            f"images of 3x32x32 for its {len(labels)} labels"
        )
    return data.reshape(len(labels), PIXELS), [int(v) for v in labels.tolist()]


def read_split(folder: str | pathlib.Path, files) -> tuple[np.ndarray, list[int]]:
    """(data, targets) of the batch files `files` in `folder`, as torchvision's CIFAR10
    holds them: uint8 (n, 32, 32, 3) (a transposed view) and a list of ints."""
    folder = pathlib.Path(folder)
    parts, targets = [], []
    for name in files:
        data, labels = read_batch(folder / name)
        parts.append(data)
        targets.extend(labels)
    data = np.vstack(parts).reshape(-1, 3, 32, 32)
    return data.transpose((0, 2, 3, 1)), targets


def read_classes(path: str | pathlib.Path, key: str) -> list[str]:
    """The class names under `key` of a meta file (label_names, fine_label_names)."""
    path = pathlib.Path(path)
    names = read_pickle(path).get(key)
    if not isinstance(names, list | tuple) or not all(isinstance(n, str | bytes) for n in names):
        raise FedjouleError(f"cannot read {path}: its {key!r} is not a list of class names")
    return [_text(n) for n in names]


def read_cifar(
    root: str | pathlib.Path, name: str, train: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (n, 3, 32, 32) and int64 labels of one split of `name` ("cifar10" or
    "cifar100", fine labels) under the dataset root, equal to torchvision's."""
    cls: Any = _safe_classes()[{"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]]
    folder = pathlib.Path(root).expanduser() / cls.base_folder
    files = [f for f, _ in (cls.train_list if train else cls.test_list)]
    if not all((folder / f).is_file() for f in files):
        raise RuntimeError(NOT_FOUND)
    data, targets = read_split(folder, files)
    images = torch.from_numpy(np.ascontiguousarray(data)).permute(0, 3, 1, 2).contiguous()
    return images, torch.tensor(targets, dtype=torch.int64)


class _SafeReading:
    """torchvision's CIFAR10 constructor, reading the files with read_split."""

    # torchvision's CIFAR10 / CIFAR100 (the other base) define these
    root: str | pathlib.Path
    base_folder: str
    train_list: list[list[str]]
    test_list: list[list[str]]
    meta: dict[str, str]
    download: Callable[[], None]

    def __init__(
        self,
        root,
        train: bool = True,
        transform=None,
        target_transform=None,
        download: bool = False,
    ) -> None:
        vision_dataset = torchvision().datasets.VisionDataset
        vision_dataset.__init__(self, root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()  # torchvision's: fetches the archive unless the files are there
        if not self._check_integrity():
            raise RuntimeError(NOT_FOUND)
        files = self.train_list if train else self.test_list
        self.data, self.targets = read_split(self._folder(), [f for f, _ in files])
        self._load_meta()

    def _folder(self) -> pathlib.Path:
        return pathlib.Path(self.root) / self.base_folder

    def _check_integrity(self) -> bool:
        """Whether every batch file is there (their checksums are not compared)."""
        return all((self._folder() / f).is_file() for f, _ in self.train_list + self.test_list)

    def _load_meta(self) -> None:
        path = self._folder() / self.meta["filename"]
        if not path.is_file():
            raise RuntimeError(META_NOT_FOUND)
        self.classes = read_classes(path, self.meta["key"])
        self.class_to_idx = {_class: i for i, _class in enumerate(self.classes)}


@functools.cache
def _safe_classes() -> dict[str, type]:
    classes = {}
    for name in ("CIFAR10", "CIFAR100"):
        base = getattr(torchvision().datasets, name)
        cls = type(name, (_SafeReading, base), {"__module__": __name__, "__doc__": base.__doc__})
        classes[name] = cls
    return classes


def safe_class(cls: type) -> type:
    """`cls`, or for torchvision.datasets.CIFAR10 / CIFAR100 the class of the same name
    here, which reads the files without unpickling them."""
    for name in ("CIFAR10", "CIFAR100"):
        if cls is getattr(torchvision().datasets, name):
            return _safe_classes()[name]
    return cls


def __getattr__(name: str):  # CIFAR10 and CIFAR100 are made when first asked for
    if name in ("CIFAR10", "CIFAR100"):
        return _safe_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
