"""Known shapes of the datasets, so that a system-only run needs no data: input shape,
classes, training-set size, and client sample counts drawn exactly as the loaders draw them."""

import numpy as np

from fedjoule import rng
from fedjoule.data.partition import client_sizes
from fedjoule.errors import FedjouleError

# name: (input shape, classes, training samples); the loaders' tensors have these shapes
# (vision.py VISION_DATASETS; tabular.py: Adult one-hot over train+test categories, rows with
# missing values dropped).
DATASET_SHAPES: dict[str, tuple[tuple[int, ...], int, int]] = {
    "mnist": ((1, 28, 28), 10, 60_000),
    "fashion-mnist": ((1, 28, 28), 10, 60_000),
    "kmnist": ((1, 28, 28), 10, 60_000),
    "emnist": ((1, 28, 28), 47, 112_800),
    "cifar10": ((3, 32, 32), 10, 50_000),
    "svhn": ((3, 32, 32), 10, 73_257),
    "adult": ((104,), 2, 30_162),
}


def dataset_shape(section) -> tuple[tuple[int, ...], int]:
    """(input shape, classes) of a scenario's `dataset:` section, without loading it."""
    if section.name == "synthetic":
        return (section.synthetic.dim,), section.synthetic.classes
    if section.name not in DATASET_SHAPES:
        allowed = ", ".join(["synthetic", *DATASET_SHAPES])
        raise FedjouleError(
            f"dataset.name: {section.name!r} has no known shape; allowed: {allowed}"
        )
    shape, classes, _ = DATASET_SHAPES[section.name]
    return shape, classes


def client_sample_counts(section, n_clients: int, seed: int) -> np.ndarray:
    """Each client's training-set size, as build_federated_data would give it (same streams,
    same first draws), without the data: synthetic log-normal sizes; shards; or
    equal/lognormal/zipf sizes of the pooled training set (dirichlet keeps those sizes)."""
    if section.name == "synthetic":
        config = section.synthetic
        # synthetic.py: the generator's first draw is the size vector
        sizes = rng.stream(seed, "synthetic").lognormal(
            np.log(config.avg_samples + 1e-3), config.size_sigma, n_clients
        )
        return np.maximum(sizes.astype(np.int64), 1)
    _, _, n_train = DATASET_SHAPES[section.name]
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
