"""FedAvg (McMahan et al., AISTATS 2017): local SGD, sample-weighted mean.

The update rules: docs/algorithms.md#fedavg.
"""

from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.options import FedAvgConfig


class FedAvg(Algorithm):
    """Clients run plain local SGD from the global model; the server takes the n_i-weighted mean."""

    declaration = DECLARATIONS["fedavg"]
    config_class = FedAvgConfig
