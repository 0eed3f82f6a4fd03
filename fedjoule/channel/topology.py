"""Network topology (networkx): server - backhaul - base stations - clients, and association."""

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from fedjoule import rng
from fedjoule.channel.fading import shadowing_linear
from fedjoule.channel.geometry import uniform_disc_positions
from fedjoule.devices.population import class_counts
from fedjoule.errors import FedjouleError

SERVER = "server"


def bs_node(cell: int) -> tuple[str, int]:
    return ("bs", int(cell))


def client_node(client: int) -> tuple[str, int]:
    return ("client", int(client))


def hexagonal_sites(n: int, spacing_m: float) -> np.ndarray:
    """The first `n` sites of a hexagonal grid: the centre, then ring 1 (6), ring 2 (12)..."""
    # Axial hex coordinates (q, r) -> x = d (q + r/2), y = d r sqrt(3)/2; ring k has 6k sites
    directions = [(1, 0), (0, 1), (-1, 1), (-1, 0), (0, -1), (1, -1)]
    sites = [(0, 0)]
    ring = 1
    while len(sites) < n:
        q, r = ring * directions[4][0], ring * directions[4][1]  # start of ring k
        for dq, dr in directions:
            for _ in range(ring):
                sites.append((q, r))
                q, r = q + dq, r + dr
        ring += 1
    axial = np.array(sites[:n], dtype=float)
    x = spacing_m * (axial[:, 0] + axial[:, 1] / 2.0)
    y = spacing_m * axial[:, 1] * math.sqrt(3.0) / 2.0
    return np.column_stack([x, y])


def grid_sites(n: int, spacing_m: float) -> np.ndarray:
    """`n` sites row by row on a square grid of ceil(sqrt(n)) columns, centred on the origin."""
    cols = math.ceil(math.sqrt(n))
    index = np.arange(n)
    xy = np.column_stack([index % cols, index // cols]).astype(float) * spacing_m
    return xy - xy.mean(axis=0)


def bs_positions_m(section) -> np.ndarray:
    """Base-station positions (C, 2) of a topology section."""
    if section.layout == "single":
        return np.zeros((1, 2))
    if section.layout == "hexagonal":
        return hexagonal_sites(section.cells, section.inter_site_distance_m)
    if section.layout == "grid":
        return grid_sites(section.cells, section.inter_site_distance_m)
    if section.layout == "positions":
        return np.asarray(section.bs_positions_m, dtype=float)
    raise FedjouleError(
        f"topology.layout: unknown layout {section.layout!r}; allowed: single, hexagonal, grid, "
        "positions"
    )


def _per_cell(value, n_cells: int, default: float) -> np.ndarray:
    if value is None:
        return np.full(n_cells, default)
    if isinstance(value, list):
        return np.array([default if v is None else v for v in value], dtype=float)
    return np.full(n_cells, float(value))


@dataclass
class Topology:
    """Cells, each client's serving cell and client positions, and the backhaul graph."""

    bs_positions_m: np.ndarray  # (C, 2)
    serving_cell: np.ndarray  # (N,) index of each client's base station
    positions_m: np.ndarray | None  # (N, 2); None when the SNR is given directly
    graph: nx.Graph  # server - bs - client; backhaul edges carry capacity_bps, latency_s

    @property
    def n_cells(self) -> int:
        return len(self.bs_positions_m)

    def backhaul_delay_s(self, client: int, bits: float) -> float:
        """Time the backhaul adds to a transfer of `bits` between the server and `client`:
        the sum over the wired edges on the path of latency + bits / capacity."""
        # Store-and-forward on each wired link: t = latency + bits / capacity (per flow)
        path = nx.shortest_path(self.graph, SERVER, client_node(client))
        total_s = 0.0
        for a, b in zip(path[:-1], path[1:], strict=True):
            edge = self.graph.edges[a, b]
            if edge["kind"] == "backhaul":
                total_s += edge["latency_s"] + bits / edge["capacity_bps"]
        return total_s

    def cell_load(self, clients) -> np.ndarray:
        """How many of `clients` each cell serves."""
        return np.bincount(
            self.serving_cell[np.asarray(clients, dtype=int)], minlength=self.n_cells
        )


def build_graph(
    n_clients: int, serving_cell: np.ndarray, capacity_bps: np.ndarray, latency_s: np.ndarray
) -> nx.Graph:
    graph = nx.Graph()
    graph.add_node(SERVER)
    for c in range(len(capacity_bps)):
        graph.add_edge(
            SERVER,
            bs_node(c),
            kind="backhaul",
            capacity_bps=float(capacity_bps[c]),
            latency_s=float(latency_s[c]),
        )
    for k in range(n_clients):
        graph.add_edge(bs_node(serving_cell[k]), client_node(k), kind="wireless")
    return graph


def place_clients(section, channel, n_clients: int, seed: int):
    """Home cells (exact shares, random order), positions around them and, for several
    cells, the client-to-station large-scale gains and the strongest-station association.

    Returns (positions (N, 2) or None, distances (N, C) or None, shadowing (N, C) or None,
    home cells (N,)). One cell draws exactly what the single-cell model always drew."""
    sites = bs_positions_m(section)
    n_cells = len(sites)
    if n_cells == 1:
        home = np.zeros(n_clients, dtype=int)
    else:
        share = section.client_share_per_cell or [1.0 / n_cells] * n_cells
        counts = class_counts(share, n_clients)
        home = rng.stream(seed, "topology").permutation(np.repeat(np.arange(n_cells), counts))
    if channel.snr_db is not None:
        return None, None, None, home
    offsets = uniform_disc_positions(
        rng.stream(seed, "geometry"), n_clients, channel.cell_radius_m, channel.min_distance_m
    )
    positions = sites[home] + offsets
    distances = np.linalg.norm(positions[:, None, :] - sites[None, :, :], axis=-1)
    if n_cells == 1:
        shadow = shadowing_linear(
            rng.stream(seed, "shadowing"), channel.shadowing_sigma_db, n_clients
        )[:, None]
    else:  # one slow shadowing value per client-station link
        shadow = shadowing_linear(
            rng.stream(seed, "shadowing"), channel.shadowing_sigma_db, (n_clients, n_cells)
        )
    return positions, distances, shadow, home


def build_topology(section, serving_cell: np.ndarray, positions_m) -> Topology:
    n_cells = section.n_cells
    capacity = _per_cell(section.backhaul_capacity_bps, n_cells, math.inf)
    latency = _per_cell(section.backhaul_latency_s, n_cells, 0.0)
    graph = build_graph(len(serving_cell), serving_cell, capacity, latency)
    return Topology(bs_positions_m(section), serving_cell, positions_m, graph)
