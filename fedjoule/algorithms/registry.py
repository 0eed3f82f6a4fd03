"""The algorithms a scenario can name, with their option models."""

from typing import Annotated, Union

from pydantic import Field

from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.drdm import Drdm, DrdmConfig
from fedjoule.algorithms.drfa import Drfa, DrfaConfig
from fedjoule.algorithms.fedacg import FedACG, FedACGConfig
from fedjoule.algorithms.fedavg import FedAvg, FedAvgConfig
from fedjoule.algorithms.feddc import FedDC, FedDCConfig
from fedjoule.algorithms.feddyn import FedDyn, FedDynConfig
from fedjoule.algorithms.fedprox import FedProx, FedProxConfig
from fedjoule.algorithms.foolsgold import FoolsGold, FoolsGoldConfig
from fedjoule.algorithms.scaffold import Scaffold, ScaffoldConfig
from fedjoule.algorithms.stem import Stem, StemConfig
from fedjoule.algorithms.taco import Taco, TacoConfig

ALGORITHMS: dict[str, tuple[type[Algorithm], type]] = {
    "fedavg": (FedAvg, FedAvgConfig),
    "fedprox": (FedProx, FedProxConfig),
    "scaffold": (Scaffold, ScaffoldConfig),
    "feddyn": (FedDyn, FedDynConfig),
    "feddc": (FedDC, FedDCConfig),
    "taco": (Taco, TacoConfig),
    "drfa": (Drfa, DrfaConfig),
    "drdm": (Drdm, DrdmConfig),
    "foolsgold": (FoolsGold, FoolsGoldConfig),
    "stem": (Stem, StemConfig),
    "fedacg": (FedACG, FedACGConfig),
}

# The scenario's `algorithm:` section: one option model per algorithm, chosen by `name`.
AlgorithmSection = Annotated[
    Union[tuple(config for _, config in ALGORITHMS.values())],  # noqa: UP007
    Field(discriminator="name"),
]


def build_algorithm(
    config,
    n_clients: int,
    client_samples,
    nominal_steps: int = 1,
    base_lr: float = 0.1,
    seed: int = 0,
) -> Algorithm:
    """The algorithm object a scenario's `algorithm:` section describes."""
    cls, _ = ALGORITHMS[config.name]
    return cls(config, n_clients, client_samples, nominal_steps, base_lr, seed)
