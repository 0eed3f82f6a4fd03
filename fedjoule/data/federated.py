"""A scenario's data as the simulator uses it: whole tensors plus per-client index lists."""

from dataclasses import dataclass

import numpy as np
import torch

from fedjoule import rng
from fedjoule.data.partition import (
    client_sizes,
    dirichlet_partition,
    iid_partition,
    local_test_indices,
    shards_partition,
)
from fedjoule.data.synthetic import synthetic_logistic
from fedjoule.data.tabular import load_adult
from fedjoule.data.vision import load_vision, resolve_data_dir


@dataclass
class FederatedData:
    """Training and test tensors, and which rows belong to which client."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    client_train: list[np.ndarray]  # indices into the training tensors, one array per client
    client_test: list[np.ndarray]  # indices into the test tensors, one array per client
    n_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def client_samples(self) -> np.ndarray:
        return np.array([len(i) for i in self.client_train])


def build_federated_data(section, n_clients: int, seed: int, data_dir=None) -> FederatedData:
    """Load or generate the dataset of a scenario's `dataset:` section and split it."""
    if section.name == "synthetic":
        return _synthetic(section.synthetic, n_clients, seed)
    if section.name == "adult":
        x_train, y_train, x_test, y_test = load_adult(resolve_data_dir(data_dir))
    else:
        x_train, y_train, x_test, y_test = load_vision(section.name, resolve_data_dir(data_dir))
    labels = y_train.numpy()
    n_classes = int(max(labels.max(), y_test.max()) + 1)
    gen = rng.stream(seed, "partition")
    if section.partition == "shards":
        client_train = shards_partition(labels, n_clients, section.shards_per_client, gen)
    else:
        sizes = client_sizes(
            len(labels),
            n_clients,
            section.sizes,
            gen,
            sigma=section.size_sigma,
            zipf_s=section.zipf_s,
            min_size=section.min_client_samples if section.sizes != "equal" else 1,
        )
        if section.partition == "iid":
            client_train = iid_partition(len(labels), sizes, gen)
        else:
            client_train = dirichlet_partition(labels, sizes, section.dirichlet_alpha, gen)
    client_test = local_test_indices(
        [labels[i] for i in client_train],
        y_test.numpy(),
        section.local_test_samples,
        n_classes,
        rng.stream(seed, "local_test"),
    )
    return FederatedData(x_train, y_train, x_test, y_test, client_train, client_test, n_classes)


def _synthetic(config, n_clients: int, seed: int) -> FederatedData:
    """Per-client generated data; the global test set is all clients' held-out samples."""
    train, test = synthetic_logistic(
        n_clients,
        config.dim,
        config.classes,
        config.avg_samples,
        config.alpha,
        config.beta,
        config.size_sigma,
        config.iid_sol,
        config.iid_dat,
        config.test_samples,
        rng.stream(seed, "synthetic"),
    )

    def stack(parts):
        x = torch.from_numpy(np.concatenate([p[0] for p in parts])).float()
        y = torch.from_numpy(np.concatenate([p[1] for p in parts])).long()
        ends = np.cumsum([len(p[1]) for p in parts])
        return x, y, [np.arange(e - len(p[1]), e) for e, p in zip(ends, parts, strict=True)]

    x_train, y_train, client_train = stack(train)
    x_test, y_test, client_test = stack(test)
    return FederatedData(
        x_train, y_train, x_test, y_test, client_train, client_test, config.classes
    )
