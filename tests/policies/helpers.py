"""An Observation over n candidates with every field at a plain value, for the tests."""

import numpy as np

from fedjoule.policies.observation import Observation


def observation(n: int, round_index: int = 0, n_clients: int | None = None, **fields):
    values = {
        "client_id": np.arange(n),
        "n_samples": np.full(n, 100),
        "battery_fraction": np.ones(n),
        "upload_rate_bps": np.full(n, np.nan),
        "round_time_s": np.full(n, np.nan),
        "loss": np.full(n, np.nan),
        "participations": np.zeros(n, dtype=int),
        "age_rounds": np.full(n, round_index + 1),
        "staleness_rounds": np.zeros(n, dtype=int),
    }
    values.update(fields)
    return Observation(round_index, n if n_clients is None else n_clients, **values)
