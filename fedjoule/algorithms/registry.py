"""The algorithms a scenario can name, with their option models."""

from typing import Annotated, Union

from pydantic import Field

from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.fedavg import FedAvg, FedAvgConfig
from fedjoule.algorithms.fedprox import FedProx, FedProxConfig

ALGORITHMS: dict[str, tuple[type[Algorithm], type]] = {
    "fedavg": (FedAvg, FedAvgConfig),
    "fedprox": (FedProx, FedProxConfig),
}

# The scenario's `algorithm:` section: one option model per algorithm, chosen by `name`.
AlgorithmSection = Annotated[
    Union[tuple(config for _, config in ALGORITHMS.values())],  # noqa: UP007
    Field(discriminator="name"),
]


def build_algorithm(config, n_clients: int, client_samples) -> Algorithm:
    """The algorithm object a scenario's `algorithm:` section describes."""
    cls, _ = ALGORITHMS[config.name]
    return cls(config, n_clients, client_samples)
