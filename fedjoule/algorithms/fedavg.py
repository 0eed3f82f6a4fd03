"""FedAvg (McMahan et al., AISTATS 2017): local SGD, sample-weighted mean.

The update rules: docs/algorithms.md#fedavg.
"""

from typing import Literal

from fedjoule.algorithms.base import Algorithm, AlgorithmConfig


class FedAvgConfig(AlgorithmConfig):
    """FedAvg has no options of its own."""

    name: Literal["fedavg"] = "fedavg"


class FedAvg(Algorithm):
    """Clients run plain local SGD from the global model; the server takes the n_i-weighted mean."""

    name = "fedavg"
    downlink_compressible = True
