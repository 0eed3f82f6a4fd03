"""A scenario's data as the simulator uses it: whole tensors plus per-client index lists.

Every dataset name resolves through the plug-in registry (fedjoule.plugins.REGISTRY,
kind "dataset"), where the loaders register here. A loader is called as
loader(section, n_clients=..., seed=..., data_dir=...) and returns a LoadedData (split
here among the clients) or, for data generated per client (synthetic), a FederatedData;
`custom` calls the scenario's factory (fedjoule.data.loaded.from_factory).
"""

import functools
import pathlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from fedjoule import rng
from fedjoule.data.images import load_image_folder, load_torchvision_class
from fedjoule.data.loaded import LoadedData, from_factory
from fedjoule.data.partition import (
    client_sizes,
    dirichlet_partition,
    iid_partition,
    local_test_indices,
    natural_groups,
    natural_partition,
    own_test_indices,
    random_test_indices,
    shards_partition,
)
from fedjoule.data.synthetic import synthetic_logistic
from fedjoule.data.tabular import load_adult
from fedjoule.data.text import load_text
from fedjoule.data.vision import VISION_DATASETS, load_vision, resolve_data_dir
from fedjoule.errors import FedjouleError
from fedjoule.plugins import REGISTRY, call_plugin, load_spec


@dataclass
class FederatedData:
    """Training and test tensors, and which rows belong to which client.

    y tensors are int64 class ids, (n,), or (n, T) for sequence data (a class per
    position, e.g. the next character of each of T positions)."""

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
    loaded = load_dataset(section, n_clients, seed, data_dir)
    if isinstance(loaded, FederatedData):  # generated per client
        return loaded
    return federate(loaded, section, n_clients, seed)


def load_dataset(section, n_clients: int, seed: int = 0, data_dir=None):
    """The dataset a `dataset:` section names, through the registry, before any split
    (a FederatedData for data generated per client)."""
    entry = REGISTRY.get("dataset", section.name)
    if entry is None:
        names = ", ".join(REGISTRY.entries("dataset"))
        raise FedjouleError(f"dataset.name: unknown dataset {section.name!r}; available: {names}")
    return entry.target(section, n_clients=n_clients, seed=seed, data_dir=data_dir)


def federate(data: LoadedData, section, n_clients: int, seed: int) -> FederatedData:
    """Split a loaded dataset among n_clients as the section says: client training
    indices by its partition and sizes, local test indices by the label-mix rule (or the
    client's own test samples, or a random draw, see local_tests)."""
    if section.partition == "natural":
        groups = natural_groups(natural_ids(data, section), n_clients, _what(section))
        client_train = natural_partition(data.client_ids, groups)
    else:
        groups = None
        client_train = split_training_set(data, section, n_clients, seed)
    client_test = local_tests(data, section, client_train, groups, seed)
    return FederatedData(
        data.x_train,
        data.y_train,
        data.x_test,
        data.y_test,
        client_train,
        client_test,
        data.classes,
    )


def split_training_set(data: LoadedData, section, n_clients: int, seed: int):
    """Client training indices for partition iid, dirichlet or shards."""
    check_label_skew(data, section)
    labels = data.y_train.numpy()
    gen = rng.stream(seed, "partition")
    if section.partition == "shards":
        return shards_partition(labels, n_clients, section.shards_per_client, gen)
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
        return iid_partition(len(labels), sizes, gen)
    return dirichlet_partition(labels, sizes, section.dirichlet_alpha, gen)


def check_label_skew(data: LoadedData, section) -> None:
    """Label-skew partitions need one label per sample."""
    if data.sequence and section.partition in ("dirichlet", "shards"):
        raise FedjouleError(
            f"dataset.partition: {section.partition} skews the labels of each client, but "
            f"{_what(section)} has a label per position (y of shape "
            f"{tuple(data.y_train.shape)}), not one per sample; use partition iid or natural"
        )


def local_tests(data: LoadedData, section, client_train, groups, seed: int):
    """Each client's local test indices (local_test_samples of them, at most): under
    partition natural with test ids, the client's own test samples (a draw of
    local_test_samples when it has more); otherwise, and for a natural client without test
    samples, test samples with the client's training label mix, or for sequence labels a
    random draw from the whole test set."""
    gen = rng.stream(seed, "local_test")
    n = section.local_test_samples
    own: list[np.ndarray | None] = [None] * len(client_train)
    if groups is not None and data.client_ids_test is not None:
        own = own_test_indices(data.client_ids_test, groups, n, gen)
    rest = [k for k, rows in enumerate(own) if rows is None]
    if not rest:
        return own
    if data.sequence:
        drawn = random_test_indices(len(data.y_test), n, len(rest), gen)
    else:
        labels = data.y_train.numpy()
        drawn = local_test_indices(
            [labels[client_train[k]] for k in rest], data.y_test.numpy(), n, data.classes, gen
        )
    for k, rows in zip(rest, drawn, strict=True):
        own[k] = rows
    return own


def _what(section) -> str:
    return f"dataset {section.name!r}"


def natural_ids(data: LoadedData, section) -> np.ndarray:
    """The client id of each training sample, for partition natural."""
    if data.client_ids is None:
        raise FedjouleError(
            f"dataset.partition: natural needs a client id per training sample, and "
            f"{_what(section)} has none (a custom factory gives them as client_ids; text "
            "has speakers or chunks); use partition iid, dirichlet or shards"
        )
    return data.client_ids


# --- the built-in loaders ---------------------------------------------------------------


def _vision(section, *, n_clients, seed, data_dir) -> LoadedData:
    x_train, y_train, x_test, y_test = load_vision(section.name, resolve_data_dir(data_dir))
    return LoadedData(x_train, y_train, x_test, y_test)


def _adult(section, *, n_clients, seed, data_dir) -> LoadedData:
    return LoadedData(*load_adult(resolve_data_dir(data_dir)))


def _torchvision(section, *, n_clients, seed, data_dir) -> LoadedData:
    return load_torchvision_class(
        section.class_, resolve_data_dir(data_dir), section.options, section.image_size
    )


def _image_folder(section, *, n_clients, seed, data_dir) -> LoadedData:
    return load_image_folder(pathlib.Path(section.root), section.image_size)


def _text(section, *, n_clients, seed, data_dir) -> LoadedData:
    return load_text(
        pathlib.Path(section.root), section.sequence_length, section.text_clients, n_clients
    )


_FACTORY_RESULTS: "OrderedDict[tuple, LoadedData]" = OrderedDict()


def _custom(section, *, n_clients, seed, data_dir) -> LoadedData:
    """factory(**options), checked (fedjoule.data.loaded.from_factory); kept in memory per
    (spec, file content, options), so that shape look-ups and the run call it once."""
    recorded = section.source.model_dump() if section.source else None
    factory, source = load_spec(section.factory, (), recorded)
    key = (section.factory, source.get("file"), source.get("sha256"), repr(section.options))
    if key in _FACTORY_RESULTS:
        _FACTORY_RESULTS.move_to_end(key)
        return _FACTORY_RESULTS[key]
    what = f"dataset factory {section.factory!r}"
    result = call_plugin(what, functools.partial(factory, **section.options))
    _FACTORY_RESULTS[key] = data = from_factory(result, section.factory)
    while len(_FACTORY_RESULTS) > 4:
        _FACTORY_RESULTS.popitem(last=False)
    return data


def _synthetic(section, *, n_clients, seed, data_dir) -> FederatedData:
    """Per-client generated data; the global test set is all clients' held-out samples."""
    config = section.synthetic
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


REGISTRY.register("dataset", "synthetic", _synthetic)
for _name in VISION_DATASETS:
    REGISTRY.register("dataset", _name, _vision)
REGISTRY.register("dataset", "adult", _adult)
REGISTRY.register("dataset", "torchvision", _torchvision)
REGISTRY.register("dataset", "image-folder", _image_folder)
REGISTRY.register("dataset", "text", _text)
REGISTRY.register("dataset", "custom", _custom)
