"""Topology: base-station layouts, strongest-station association, backhaul delays."""

import math

import numpy as np
import pytest

from fedjoule.channel.cell import build_network, path_loss_db
from fedjoule.channel.topology import grid_sites, hexagonal_sites
from fedjoule.channel.units import db_to_linear
from fedjoule.scenarios.schema import ChannelSection, TopologySection


def test_hexagonal_sites_centre_then_ring():
    sites = hexagonal_sites(19, 200.0)
    d = np.linalg.norm(sites, axis=1)
    assert d[0] == 0
    np.testing.assert_allclose(d[1:7], 200.0)  # ring 1: six neighbours at the ISD
    np.testing.assert_allclose(np.sort(d[7:19])[:6], 200.0 * math.sqrt(3))  # ring 2 corners...
    np.testing.assert_allclose(np.sort(d[7:19])[6:], 400.0)  # ... and the far ones at 2 ISD
    pair = np.linalg.norm(sites[:, None] - sites[None], axis=-1)
    assert pair[pair > 0].min() == pytest.approx(200.0)  # no two sites closer than the ISD


def test_grid_sites_spacing():
    sites = grid_sites(4, 100.0)
    np.testing.assert_allclose(sites, [[-50, -50], [50, -50], [-50, 50], [50, 50]])


def test_association_is_to_the_strongest_station():
    channel = ChannelSection(cell_radius_m=150, min_distance_m=5)
    topology = TopologySection(layout="hexagonal", cells=7, inter_site_distance_m=200)
    cell, topo = build_network(channel, 300, 3, topology)
    distances = np.linalg.norm(topo.positions_m[:, None] - topo.bs_positions_m[None], axis=-1)
    np.testing.assert_allclose(cell.distance_m, distances[np.arange(300), cell.serving_cell])
    path_gain = db_to_linear(-path_loss_db(channel, distances))
    shadow = cell.large_scale_gain / path_gain[np.arange(300), cell.serving_cell]
    assert np.all(cell.large_scale_gain > 0)
    # with shadowing some clients are served by a station that is not the nearest
    assert np.mean(cell.serving_cell != distances.argmin(axis=1)) > 0.05
    assert len(set(np.round(shadow, 12))) == 300
    assert topo.graph.number_of_nodes() == 1 + 7 + 300


def test_one_cell_network_is_the_old_single_cell():
    channel = ChannelSection()
    cell, topo = build_network(channel, 50, 0, None)
    assert topo.n_cells == 1 and np.all(cell.serving_cell == 0)
    assert topo.backhaul_delay_s(7, 1e6) == 0.0


def test_backhaul_delay_is_latency_plus_bits_over_capacity():
    topology = TopologySection(
        layout="positions",
        bs_positions_m=[[0, 0], [1000, 0]],
        backhaul_capacity_bps=[1e8, 1e6],
        backhaul_latency_s=[0.01, 0.002],
    )
    cell, topo = build_network(ChannelSection(snr_db=5.0), 10, 0, topology)
    for k in range(10):
        c = cell.serving_cell[k]
        expected = [0.01 + 2e6 / 1e8, 0.002 + 2e6 / 1e6][c]
        assert topo.backhaul_delay_s(k, 2e6) == pytest.approx(expected, rel=1e-12)
    assert set(cell.serving_cell) == {0, 1}
