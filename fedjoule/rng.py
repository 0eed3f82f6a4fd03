"""Independent, named random streams spawned from the one scenario seed.

Every stochastic part draws from its own stream, keyed by a fixed stream id and
optional integer keys (round, client), so that changing how one part uses its
randomness never shifts another part's draws, and a resumed run draws exactly
what an uninterrupted one would.
"""

from typing import TYPE_CHECKING

import numpy as np

from fedjoule.torch_import import load_torch

if TYPE_CHECKING:
    import torch

# Fixed ids: never renumber, only append (renumbering changes every seeded result).
STREAM_IDS = {
    "partition": 0,
    "model": 1,
    "population": 2,
    "geometry": 3,
    "shadowing": 4,
    "fading": 5,
    "availability": 6,
    "selection": 7,
    "minibatch": 8,
    "freeloader": 9,
    "synthetic": 10,
    "local_test": 11,
    "algorithm": 12,
    "outage": 13,
    "topology": 14,
    "diurnal": 15,
    "participation": 16,
    "probe": 17,
    "snapshot": 18,
    "overcommit": 19,
    "battery": 20,
    "compute_spread": 21,
    "compression": 22,
    "interference": 23,
    "link_trace": 24,
    # (40 on: clear of the ids that other streams are taking from 22 up)
    "random_layers": 40,
    "random_layers_batched": 41,
}


def seed_sequence(seed: int, name: str, *keys: int) -> np.random.SeedSequence:
    """The SeedSequence of stream `name` under `keys` (e.g. round, client)."""
    if name not in STREAM_IDS:
        raise KeyError(f"unknown random stream {name!r}; known: {sorted(STREAM_IDS)}")
    return np.random.SeedSequence(seed, spawn_key=(STREAM_IDS[name], *map(int, keys)))


def stream(seed: int, name: str, *keys: int) -> np.random.Generator:
    """A numpy Generator for stream `name` under `keys`."""
    return np.random.default_rng(seed_sequence(seed, name, *keys))


def seed_int(seed: int, name: str, *keys: int) -> int:
    """A 63-bit integer seed for stream `name` under `keys` (for torch generators)."""
    return int(seed_sequence(seed, name, *keys).generate_state(1, np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int, name: str, *keys: int) -> "torch.Generator":
    """A CPU torch.Generator for stream `name` under `keys`."""
    return load_torch().Generator().manual_seed(seed_int(seed, name, *keys))
