"""One cell: clients' large-scale gains (geometry, path loss, shadowing) and each round's links."""

import threading
from dataclasses import dataclass

import numpy as np

from fedjoule import rng
from fedjoule.channel.fading import fading_power
from fedjoule.channel.link import Link, noise_psd_w_per_hz
from fedjoule.channel.pathloss import free_space_db, log_distance_db, macro_3gpp_db
from fedjoule.channel.topology import build_topology, place_clients
from fedjoule.channel.units import db_to_linear, dbm_to_w
from fedjoule.scenarios.schema import TopologySection


@dataclass
class Cell:
    """Static large-scale channel state of the N clients (drawn once: it changes slowly)."""

    distance_m: np.ndarray | None  # to the serving base station; None when SNR is given
    large_scale_gain: np.ndarray | None  # path loss x shadowing to the serving station, linear
    noise_psd_w_per_hz: float
    serving_cell: np.ndarray | None = None  # (N,) base station of each client; None: all 0
    # (N, C) path loss x shadowing to every base station (channel.interference=cochannel)
    gains_all: np.ndarray | None = None


def path_loss_db(section, distance_m: np.ndarray) -> np.ndarray:
    if section.path_loss == "macro-3gpp":
        return macro_3gpp_db(distance_m)
    if section.path_loss == "free-space":
        return free_space_db(distance_m, section.carrier_hz)
    return log_distance_db(distance_m, section.pl0_db, section.pl_exponent)


def build_cell(section, n_clients: int, seed: int, topology_section=None) -> Cell:
    """Clients' large-scale gains to their strongest base station (one cell by default)."""
    cell, _ = build_network(section, n_clients, seed, topology_section)
    return cell


def build_network(section, n_clients: int, seed: int, topology_section=None):
    """The clients' `Cell` (gains to their serving station) and the network `Topology`."""
    topology_section = topology_section or TopologySection()
    cell, positions = place_cell(section, n_clients, seed, topology_section)
    return cell, build_topology(topology_section, cell.serving_cell, positions)


def place_cell(section, n_clients: int, seed: int, topology_section) -> tuple[Cell, object]:
    """The clients' `Cell` and positions (None when the SNR is given), without the graph."""
    noise = noise_psd_w_per_hz(section.noise_dbm_per_hz, section.noise_figure_db)
    positions, distances, shadow, home = place_clients(topology_section, section, n_clients, seed)
    if distances is None:  # SNR given directly: each client belongs to its home cell
        return Cell(None, None, noise, home), positions
    gains = db_to_linear(-path_loss_db(section, distances)) * shadow  # (N, C)
    serving = np.argmax(gains, axis=1)  # association to the strongest base station
    rows = np.arange(n_clients)
    every = gains if getattr(section, "interference", "none") == "cochannel" else None
    return Cell(distances[rows, serving], gains[rows, serving], noise, serving, every), positions


def round_fading(section, n_clients: int, seed: int, round_index: int) -> tuple:
    """Uplink and downlink block-fading power gains of every client in one round (read
    only: the last round's draws are kept for this thread, uplink_fading)."""
    drawn = _drawn_uplink(section, n_clients, seed, round_index)
    if drawn[3] is None:  # the downlink half: the stream's next n_clients draws
        drawn[3] = fading_power(drawn[1], section.fading, n_clients, k_factor=section.rician_k)
        drawn[3].flags.writeable = False
    return drawn[2], drawn[3]


def uplink_fading(section, n_clients: int, seed: int, round_index: int) -> np.ndarray:
    """round_fading's uplink half alone (read only), drawn once a round: a policy's
    channel state (simulator/observe.py) and the engine's round share the draw."""
    return _drawn_uplink(section, n_clients, seed, round_index)[2]


_last_round = threading.local()  # .drawn: [key, its stream, uplink, downlink or None]


def _drawn_uplink(section, n_clients: int, seed: int, round_index: int) -> list:
    key = (section.fading, section.rician_k, n_clients, seed, round_index)
    drawn = getattr(_last_round, "drawn", None)
    if drawn is None or drawn[0] != key:
        gen = rng.stream(seed, "fading", round_index)
        up = fading_power(gen, section.fading, n_clients, k_factor=section.rician_k)
        up.flags.writeable = False
        drawn = _last_round.drawn = [key, gen, up, None]
    return drawn


def round_links(section, cell: Cell, tx_power_w: np.ndarray, clients, fading) -> tuple[list, list]:
    """Uplink and downlink `Link`s of the given clients for one round."""
    up_fading, down_fading = fading
    bs_power_w = dbm_to_w(section.bs_tx_power_dbm)
    uplinks, downlinks = [], []
    for k in clients:
        if cell.large_scale_gain is None:  # SNR given directly: fading scales it
            down_db = section.snr_db if section.downlink_snr_db is None else section.downlink_snr_db
            uplinks.append(
                Link(tx_power_w[k], snr_fixed=db_to_linear(section.snr_db) * up_fading[k])
            )
            downlinks.append(Link(bs_power_w, snr_fixed=db_to_linear(down_db) * down_fading[k]))
        else:
            gain = cell.large_scale_gain[k]
            uplinks.append(Link(tx_power_w[k], gain * up_fading[k], cell.noise_psd_w_per_hz))
            downlinks.append(Link(bs_power_w, gain * down_fading[k], cell.noise_psd_w_per_hz))
    return uplinks, downlinks


def mean_uplink_snr_db(section, cell: Cell, tx_power_w: np.ndarray, bandwidth_hz):
    """Each client's fading-free uplink SNR p G/(N0 b) in dB on `bandwidth_hz` (one band,
    or one per client; clients.csv: the band a client gets in its own cell,
    transfers.typical_bandwidth_hz: B/(s N_c/N) fdma, B tdma, B/R ofdma)."""
    if cell.large_scale_gain is None:
        return np.full(len(tx_power_w), float(section.snr_db))
    snr = tx_power_w * cell.large_scale_gain / (cell.noise_psd_w_per_hz * bandwidth_hz)
    return 10 * np.log10(snr)
