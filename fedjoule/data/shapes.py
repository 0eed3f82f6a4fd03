"""Known shapes of the datasets, so that a system-only run needs no data: input shape,
classes, training-set size, and client sample counts drawn exactly as the loaders draw them.

Datasets whose shape is only known from their files or code (torchvision by class name,
image-folder, text, custom) are loaded, through the same loader as a run (and kept in
memory, so that the run does not load them again)."""

from typing import TYPE_CHECKING

import numpy as np

from fedjoule import rng
from fedjoule.data.partition import client_sizes, natural_groups, natural_partition
from fedjoule.errors import FedjouleError
from fedjoule.torch_import import load_torch

if TYPE_CHECKING:
    import torch

# name: (input shape, classes, training samples); the loaders' tensors have these shapes
# (vision.py VISION_DATASETS; tabular.py: Adult one-hot over train+test categories, rows with
# missing values dropped).
DATASET_SHAPES: dict[str, tuple[tuple[int, ...], int, int]] = {
    "mnist": ((1, 28, 28), 10, 60_000),
    "fashion-mnist": ((1, 28, 28), 10, 60_000),
    "kmnist": ((1, 28, 28), 10, 60_000),
    "emnist": ((1, 28, 28), 47, 112_800),
    "cifar10": ((3, 32, 32), 10, 50_000),
    "cifar100": ((3, 32, 32), 100, 50_000),
    "svhn": ((3, 32, 32), 10, 73_257),
    "adult": ((104,), 2, 30_162),
}


def dataset_shape(section, data_dir=None) -> tuple[tuple[int, ...], int]:
    """(input shape, classes) of a scenario's `dataset:` section: from the table for the
    built-in datasets, else from the loaded data (text: (sequence_length,) and the file's
    vocabulary size)."""
    if section.name == "synthetic":
        return (section.synthetic.dim,), section.synthetic.classes
    if section.name in DATASET_SHAPES:
        shape, classes, _ = DATASET_SHAPES[section.name]
        return shape, classes
    data = _loaded(section, data_dir)
    return tuple(data.x_train.shape[1:]), data.classes


def input_dtype(section, data_dir=None) -> "torch.dtype":
    """The dtype of the model's input: int64 (character or token ids) for text or a custom
    factory's integer x; float32 for every other dataset."""
    torch = load_torch()  # its dtypes; the counts and the shapes of the table need none
    if section.name == "text":
        return torch.int64
    if section.name == "synthetic" or section.name in DATASET_SHAPES:
        return torch.float32
    if section.name in ("torchvision", "image-folder"):
        return torch.float32
    return _loaded(section, data_dir).x_train.dtype


def _loaded(section, data_dir, n_clients: int = 1):
    """The section's dataset through its loader (n_clients matters only to text chunks)."""
    # deferred: torch (a dataset known only from its files or code is loaded)
    from fedjoule.data.federated import LoadedData, load_dataset

    data = load_dataset(section, n_clients, 0, data_dir)
    if not isinstance(data, LoadedData):  # generated per client
        raise FedjouleError(f"dataset.name: {section.name!r} has no shape before generation")
    return data


def client_sample_counts(section, n_clients: int, seed: int, data_dir=None) -> np.ndarray:
    """Each client's training-set size, as build_federated_data would give it (same streams,
    same first draws), without the data: synthetic log-normal sizes; shards; or
    equal/lognormal/zipf sizes of the pooled training set (dirichlet keeps those sizes);
    natural: each natural client's size. Datasets whose size is not in the table are
    loaded (not split) for their training-set size or client ids."""
    if section.name == "synthetic":
        config = section.synthetic
        # synthetic.py: the generator's first draw is the size vector
        sizes = rng.stream(seed, "synthetic").lognormal(
            np.log(config.avg_samples + 1e-3), config.size_sigma, n_clients
        )
        return np.maximum(sizes.astype(np.int64), 1)
    if section.name in DATASET_SHAPES and section.partition != "natural":
        _, _, n_train = DATASET_SHAPES[section.name]
    else:
        data = _loaded(section, data_dir, n_clients)
        # deferred: torch (the loaded data's natural ids and labels)
        from fedjoule.data.federated import check_label_skew, natural_ids

        if section.partition == "natural":
            ids = natural_ids(data, section)
            groups = natural_groups(ids, n_clients, f"dataset {section.name!r}")
            parts = natural_partition(ids, groups)
            return np.array([len(p) for p in parts], dtype=np.int64)
        check_label_skew(data, section)
        n_train = len(data.y_train)
    if section.partition == "shards":
        shard_size = n_train // max(n_clients * section.shards_per_client, 1)
        if shard_size < 1:
            raise FedjouleError(
                f"dataset.shards_per_client: cannot cut {n_train} samples into {n_clients} x "
                f"{section.shards_per_client} shards; use fewer clients or shards"
            )
        return np.full(n_clients, shard_size * section.shards_per_client, dtype=np.int64)
    return client_sizes(
        n_train,
        n_clients,
        section.sizes,
        rng.stream(seed, "partition"),
        sigma=section.size_sigma,
        zipf_s=section.zipf_s,
        min_size=section.min_client_samples if section.sizes != "equal" else 1,
    )
