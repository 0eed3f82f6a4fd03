"""fedjoule: an energy-aware wireless federated-learning network simulator."""

__version__ = "0.1.0"
