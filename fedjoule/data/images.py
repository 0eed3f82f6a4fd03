"""Image datasets a user brings: any torchvision classification dataset by class name, and
a folder of class folders (torchvision ImageFolder), as whole standardised tensors.

Both give float32 images (n, C, H, W): pixel values scaled to [0, 1], then per channel
the training set's mean subtracted and divided by its standard deviation (computed here,
over every pixel of the training images); labels are int64 class ids.
"""

import inspect
import pathlib
from collections import OrderedDict

import numpy as np
import torch
from PIL import Image

from fedjoule.data.cifar import safe_class
from fedjoule.data.loaded import LoadedData
from fedjoule.data.torchvision_import import torchvision
from fedjoule.data.vision import open_or_fail
from fedjoule.errors import FedjouleError

TEST_FRACTION = 0.2  # of each class, when a dataset comes without a test split
SPLIT_SEED = 0  # the held-out split is the same for every scenario seed

# Suggested when a class name is unknown: torchvision's single-label image classifiers.
CLASSIFICATION_EXAMPLES = (
    "MNIST",
    "FashionMNIST",
    "KMNIST",
    "QMNIST",
    "EMNIST",
    "USPS",
    "CIFAR10",
    "CIFAR100",
    "SVHN",
    "STL10",
    "GTSRB",
    "Flowers102",
    "Food101",
    "EuroSAT",
    "FakeData",
)

_CACHE: "OrderedDict[tuple, LoadedData]" = OrderedDict()
_CACHE_SIZE = 4  # loaded datasets kept in memory (read-only): shape look-ups reuse them


def _remember(key: tuple, data: LoadedData) -> LoadedData:
    _CACHE[key] = data
    _CACHE.move_to_end(key)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return data


def per_class_split(
    labels: np.ndarray, fraction: float = TEST_FRACTION, seed: int = SPLIT_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices), sorted: of each class's n samples, round(fraction n)
    chosen at random (a generator seeded with `seed`, classes in increasing order) go to
    the test set, the rest to the training set."""
    labels = np.asarray(labels, dtype=np.int64)
    gen = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        k = int(np.floor(fraction * len(members) + 0.5))
        test.append(gen.permutation(members)[:k])
    test_idx = np.sort(np.concatenate(test)) if test else np.zeros(0, dtype=np.int64)
    train_mask = np.ones(len(labels), dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def standardise(
    train: torch.Tensor, test: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train, test, mean, std): uint8 or [0, 1] images as float32, standardised per
    channel with the training images' mean and (population) standard deviation; a channel
    with no spread is only centred."""
    mean, std = channel_statistics(train)
    train, test = _unit(train), _unit(test)
    mean32, std32 = mean.to(torch.float32), std.to(torch.float32)
    view = (1, -1, 1, 1)
    for x in (train, test):
        x.sub_(mean32.view(view)).div_(std32.view(view))
    return train, test, mean32, std32


def channel_statistics(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 per-channel mean and population standard deviation of the images scaled to
    [0, 1] (a zero deviation made 1). uint8 images: from exact per-channel histograms."""
    if images.dtype == torch.uint8:
        values = torch.arange(256, dtype=torch.float64) / 255.0
        means, stds = [], []
        for c in range(images.shape[1]):
            counts = torch.bincount(images[:, c].reshape(-1), minlength=256).to(torch.float64)
            p = counts / counts.sum()
            mean = (p * values).sum()
            means.append(mean)
            stds.append(((p * (values - mean) ** 2).sum()).sqrt())
        mean, std = torch.stack(means), torch.stack(stds)
    else:
        std, mean = torch.std_mean(_unit(images).to(torch.float64), dim=(0, 2, 3), correction=0)
    std[std == 0] = 1.0
    return mean, std


def _unit(images: torch.Tensor) -> torch.Tensor:
    """float32 copy in [0, 1]: uint8 divided by 255, other integers by their maximum
    (16-bit images), floats as they are."""
    if images.dtype == torch.uint8:
        return images.to(torch.float32).div_(255.0)
    if not images.is_floating_point():
        top = float(torch.iinfo(images.dtype).max)
        return images.to(torch.float32).div_(top)
    return images.to(torch.float32).clone()


def to_chw(image, image_size: int | None, where: str) -> torch.Tensor:
    """One image (PIL, tensor or numpy array) as a (C, H, W) tensor, resized to
    image_size x image_size if given; grey, RGB or RGBA kept, other PIL modes made RGB."""
    functional = torchvision().transforms.functional
    if isinstance(image, Image.Image):
        if image.mode not in ("L", "RGB", "RGBA"):
            image = image.convert("L" if image.mode in ("1", "I", "I;16", "F") else "RGB")
        if image_size is not None:
            image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
        return functional.pil_to_tensor(image)
    if isinstance(image, np.ndarray):
        image = torch.from_numpy(np.ascontiguousarray(image))
        if image.dim() == 3 and image.shape[-1] in (1, 3, 4) and image.shape[0] not in (1, 3, 4):
            image = image.permute(2, 0, 1)  # numpy images are (H, W, C)
    if not torch.is_tensor(image):
        raise FedjouleError(f"{where} is a {type(image).__name__}, not an image")
    if image.dim() == 2:
        image = image.unsqueeze(0)
    if image.dim() != 3:
        raise FedjouleError(f"{where} has shape {tuple(image.shape)}, not (C, H, W) or (H, W)")
    if image_size is not None:
        image = functional.resize(image, [image_size, image_size], antialias=True)
    return image


def stack_images(images: list[torch.Tensor], names, what: str) -> torch.Tensor:
    """One (n, C, H, W) tensor; grey images are repeated to three channels when others are
    in colour; differing sizes are an error naming two of them."""
    channels = {x.shape[0] for x in images}
    if len(channels) > 1:  # e.g. a few grey pictures among colour ones
        wide = max(channels)
        images = [x.expand(wide, -1, -1) if x.shape[0] == 1 else x for x in images]
        if {x.shape[0] for x in images} != {wide}:
            raise FedjouleError(
                f"{what}: images have {sorted(channels)} channels; cannot make them agree"
            )
    first = images[0].shape
    for i, x in enumerate(images):
        if x.shape != first:
            raise FedjouleError(
                f"{what}: images differ in size: {names(0)} is {_size(first)}, {names(i)} is "
                f"{_size(x.shape)}; set dataset.image_size to resize every image to one "
                "square size"
            )
    return torch.stack(images)


def _size(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


# --- any torchvision classification dataset -------------------------------------------


def torchvision_class(name: str):
    """The torchvision.datasets class called `name` (for CIFAR10 and CIFAR100 the one of
    fedjoule.data.cifar, which never unpickles); FedjouleError for any other name."""
    cls = getattr(torchvision().datasets, name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.utils.data.Dataset)):
        raise FedjouleError(
            f"dataset.class: {name!r} is not a dataset class of torchvision.datasets "
            f"(torchvision {torchvision().__version__}); classification datasets include "
            f"{', '.join(CLASSIFICATION_EXAMPLES)}"
        )
    return safe_class(cls)  # CIFAR10/CIFAR100: the same class, reading without unpickling


def _parameters(cls) -> set[str]:
    """Keyword parameters of the class's constructor, following **kwargs up the bases
    (EMNIST(root, split, **kwargs) passes train= on to MNIST)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        names.update(p.name for p in parameters if p.kind is not p.VAR_KEYWORD)
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


def _convention(cls) -> str:
    """How the class picks its split: `train` (train=True/False), `split` ("train"/"test")
    or `none` (one set, split here per class)."""
    parameters = _parameters(cls)
    if "train" in parameters:
        return "train"
    if "split" in parameters:
        return "split"
    return "none"


def load_torchvision_class(
    class_name: str,
    root: pathlib.Path,
    options: dict | None = None,
    image_size: int | None = None,
    download: bool = True,
) -> LoadedData:
    """torchvision.datasets.<class_name> under `root` as standardised tensors.

    The class is built as cls(root, train=..., download=..., **options) or
    cls(root, split="train"/"test", ...) (split "val", then "valid", when it has no
    "test"); a class with neither (FakeData) is built once, cls(**options), and split
    per class as per_class_split does. Loaded without downloading first, then with
    download=True when the class can download.
    """
    options = dict(options or {})
    cls = torchvision_class(class_name)
    root = pathlib.Path(root).expanduser()
    key = (
        "torchvision",
        class_name,
        str(root.resolve()),
        repr(sorted(options.items())),
        image_size,
    )
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    what = f"torchvision dataset {class_name!r}"
    convention = _convention(cls)
    for reserved in ("root", "train", "split", "download", "transform", "target_transform"):
        if reserved in options and not (reserved == "split" and convention == "train"):
            raise FedjouleError(
                f"dataset.options: {reserved!r} is set by fedjoule for {what}; remove it"
            )
    can_download = "download" in _parameters(cls)
    if convention == "none":
        dataset = _construct(cls, what, options, root, can_download, download)
        images, labels = decode(dataset, image_size, what)
        train_idx, test_idx = per_class_split(labels.numpy())
        if len(test_idx) == 0:
            raise FedjouleError(
                f"{what}: {len(labels)} samples leave no test set after the per-class "
                f"{TEST_FRACTION:.0%} split; use a larger dataset"
            )
        parts = (images[train_idx], labels[train_idx], images[test_idx], labels[test_idx])
    else:
        parts = ()
        for train in (True, False):
            dataset = _split(cls, what, options, root, convention, train, can_download, download)
            parts += decode(dataset, image_size, f"{what} ({'train' if train else 'test'})")
    if parts[2].shape[1:] != parts[0].shape[1:]:
        raise FedjouleError(
            f"{what}: train images are {_size(parts[0].shape[1:])} but test images "
            f"{_size(parts[2].shape[1:])}; set dataset.image_size"
        )
    x_train, x_test, _, _ = standardise(parts[0], parts[2])
    n_classes = _class_count(dataset, parts[1], parts[3])
    data = LoadedData(x_train, parts[1], x_test, parts[3], n_classes=n_classes)
    return _remember(key, data)


def _class_count(dataset, y_train: torch.Tensor, y_test: torch.Tensor) -> int:
    """The dataset's own class list when it has one (classes absent from both splits still
    count), else the largest label + 1."""
    seen = int(max(int(y_train.max()), int(y_test.max()))) + 1
    classes = getattr(dataset, "classes", None)
    if isinstance(classes, list | tuple) and len(classes) >= seen:
        return len(classes)
    return seen


def _construct(cls, what, kwargs, root, can_download, download):
    takes_root = "root" in _parameters(cls)

    def opener(download):
        arguments = dict(kwargs)
        if download is not None:
            arguments["download"] = download
        try:
            return cls(root, **arguments) if takes_root else cls(**arguments)
        except TypeError as exc:  # options the class does not take, or of the wrong type
            raise FedjouleError(
                f"dataset.options do not fit {what}: {' '.join(str(exc).split())}"
            ) from None

    layout = f"<the files torchvision.datasets.{cls.__name__} reads>"
    allowed = download if can_download else None
    return open_or_fail(what, root, layout, opener, allowed, folder=root)


def _split(cls, what, options, root, convention, train, can_download, download):
    if convention == "train":
        return _construct(cls, what, {**options, "train": train}, root, can_download, download)
    names = ("train",) if train else ("test", "val", "valid")
    for i, split in enumerate(names):
        try:
            return _construct(cls, what, {**options, "split": split}, root, can_download, download)
        except ValueError:  # torchvision's verify_str: this class has no such split
            if i == len(names) - 1:
                role = "training" if train else "test"
                raise FedjouleError(
                    f"{what} has none of the splits {', '.join(names)}: no {role} set"
                ) from None
    raise AssertionError


def decode(dataset, image_size: int | None, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All images (n, C, H, W, as stored: uint8 for PIL images) and int64 labels of a
    map-style dataset. Arrays the dataset holds (`data` and `targets`/`labels`) are used
    directly when they agree exactly with what indexing gives for the first and last
    sample; otherwise every sample is decoded."""
    n = len(dataset)
    if n == 0:
        raise FedjouleError(f"{what} is empty")
    first = _item(dataset, 0, image_size, what)
    last = _item(dataset, n - 1, image_size, what)
    if image_size is None:
        fast = _held_arrays(dataset, n, (first, last))
        if fast is not None:
            return fast
    images, labels = [first[0]], [first[1]]
    for i in range(1, n):
        image, label = _item(dataset, i, image_size, what) if i < n - 1 else last
        images.append(image)
        labels.append(label)
    stacked = stack_images(images, lambda i: f"sample {i}", what)
    return stacked, torch.tensor(labels, dtype=torch.int64)


def _item(dataset, i: int, image_size, what) -> tuple[torch.Tensor, int]:
    sample = dataset[i]
    if not (isinstance(sample, tuple | list) and len(sample) == 2):
        raise FedjouleError(f"{what}: sample {i} is not an (image, label) pair")
    image, label = sample
    if (torch.is_tensor(label) and label.numel() == 1) or (
        isinstance(label, np.ndarray) and label.size == 1
    ):
        label = label.item()
    if isinstance(label, bool) or not isinstance(label, int | np.integer):
        raise FedjouleError(
            f"{what}: the label of sample {i} is {type(label).__name__} {label!r:.60}, not a "
            "class id: only single-label classification datasets can be used"
        )
    if label < 0:
        raise FedjouleError(f"{what}: sample {i} has the negative label {label}")
    return to_chw(image, image_size, f"{what}: sample {i}"), int(label)


def _held_arrays(dataset, n: int, probes) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(images, labels) from the dataset's own arrays, if they reproduce the probes."""
    data = getattr(dataset, "data", None)
    labels = getattr(dataset, "targets", None)
    if labels is None:
        labels = getattr(dataset, "labels", None)
    if data is None or labels is None:
        return None
    try:
        data = torch.as_tensor(np.asarray(data)) if not torch.is_tensor(data) else data
        labels = torch.as_tensor(np.asarray(labels)).to(torch.int64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        return None
    if len(data) != n or len(labels) != n or data.dtype != torch.uint8:
        return None
    shape = probes[0][0].shape
    candidates = []
    if data.dim() == 3:
        candidates.append(data.unsqueeze(1))
    elif data.dim() == 4:
        candidates += [data, data.permute(0, 3, 1, 2)]
    for images in candidates:
        if images.shape[1:] != shape:
            continue
        ends = (images[0], images[n - 1])
        if all(torch.equal(a, p[0]) for a, p in zip(ends, probes, strict=True)) and (
            int(labels[0]) == probes[0][1] and int(labels[n - 1]) == probes[1][1]
        ):
            return images.contiguous(), labels.clone()
    return None


# --- a folder of class folders ---------------------------------------------------------


def load_image_folder(root: str | pathlib.Path, image_size: int | None = None) -> LoadedData:
    """torchvision ImageFolder at `root` (one sub-folder per class; its images are read as
    RGB). With `train/` and `test/` sub-folders, those are the two sets (the classes are
    train's; a test class must also be a train class); otherwise one set split per class
    by per_class_split (20 % test)."""
    root = pathlib.Path(root).expanduser()
    if not root.is_dir():
        raise FedjouleError(f"dataset.root: {root} is not a folder of class folders")
    key = ("image-folder", str(root.resolve()), image_size, _stamp(root))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    split = (root / "train").is_dir() and (root / "test").is_dir()
    folders = (root / "train", root / "test") if split else (root,)
    sets = []
    for folder in folders:
        try:
            sets.append(torchvision().datasets.ImageFolder(folder))
        except (FileNotFoundError, OSError) as exc:
            raise FedjouleError(
                f"dataset.root: {folder} holds no images in class folders "
                f"({' '.join(str(exc).split())}); expected {folder}/<class>/<image file>"
            ) from None
    what = f"image folder {root}"
    decoded = [_folder_images(ds, image_size, what) for ds in sets]
    if split:
        train, test = sets
        missing = sorted(set(test.classes) - set(train.classes))
        if missing:
            raise FedjouleError(
                f"{what}: test classes {', '.join(missing)} have no folder under {root / 'train'}"
            )
        remap = torch.tensor([train.class_to_idx[c] for c in test.classes], dtype=torch.int64)
        x_train, y_train = decoded[0]
        x_test, y_test = decoded[1][0], remap[decoded[1][1]]
        if x_test.shape[1:] != x_train.shape[1:]:
            raise FedjouleError(
                f"{what}: train images are {_size(x_train.shape[1:])}, test images "
                f"{_size(x_test.shape[1:])}; set dataset.image_size"
            )
        classes = len(train.classes)
    else:
        images, labels = decoded[0]
        train_idx, test_idx = per_class_split(labels.numpy())
        if len(test_idx) == 0:
            raise FedjouleError(
                f"{what}: {len(labels)} images leave no test set after the per-class "
                f"{TEST_FRACTION:.0%} split (a class needs 3 images to give one); add "
                "images, or give train/ and test/ folders"
            )
        x_train, y_train = images[train_idx], labels[train_idx]
        x_test, y_test = images[test_idx], labels[test_idx]
        classes = len(sets[0].classes)
    x_train, x_test, _, _ = standardise(x_train, x_test)
    return _remember(key, LoadedData(x_train, y_train, x_test, y_test, n_classes=classes))


def _folder_images(dataset, image_size, what) -> tuple[torch.Tensor, torch.Tensor]:
    images = [
        to_chw(dataset.loader(path), image_size, f"{what}: {path}") for path, _ in dataset.samples
    ]
    labels = torch.tensor([label for _, label in dataset.samples], dtype=torch.int64)
    return stack_images(images, lambda i: dataset.samples[i][0], what), labels


def _stamp(root: pathlib.Path) -> tuple:
    """Names, sizes and modification times of the folder's files (a cache key)."""
    stamp = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            info = path.stat()
            stamp.append((str(path.relative_to(root)), info.st_size, info.st_mtime_ns))
    return tuple(stamp)
