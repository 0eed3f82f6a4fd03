"""Inter-cell co-channel interference: frequency-reuse groups and SimPy media whose rates
follow each transmission's SINR, recomputed whenever a co-channel transmission starts or ends.

Uplink: a transmission of client i on band b_i in cell c has

    SINR_i = p_i g_i / (N0 b_i + (b_i / B) sum_j p_j G_{j,c})

over the transmissions j active at that instant in the other cells of c's frequency group
(G_{j,c}: client j's path loss, shadowing and fading to c's base station). Each
interferer's power is spread over the whole band B of its cell (the mean over random
sub-band allocations), so a receiver on b_i of it sees the fraction b_i / B; with one
transmitter per cell (b = B) this is p g / (N0 B + sum_j p_j G_j).

Downlink: a broadcast from base station c to client i on the downlink band B_d has

    SINR_i = P g_i / (N0 B_d + sum_c' P G_{i,c'})

over the co-channel base stations c' broadcasting at that instant (a station broadcasts
while any of its clients is still receiving).
"""

import math
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from fedjoule.channel.link import Link
from fedjoule.channel.medium import RateSharing, TransmissionAborted, _check_bits
from fedjoule.errors import FedjouleError

REUSE_FACTORS = (1, 3, 4, 7)
INTERFERENCE_KINDS = ("none", "cochannel")


def hexagonal_axial(n: int) -> np.ndarray:
    """Axial coordinates (q, r) of the first `n` hexagonal sites (topology.hexagonal_sites'
    order: the centre, then ring 1, ring 2, ...)."""
    directions = [(1, 0), (0, 1), (-1, 1), (-1, 0), (0, -1), (1, -1)]
    sites = [(0, 0)]
    ring = 1
    while len(sites) < n:
        q, r = ring * directions[4][0], ring * directions[4][1]
        for dq, dr in directions:
            for _ in range(ring):
                sites.append((q, r))
                q, r = q + dq, r + dr
        ring += 1
    return np.array(sites[:n], dtype=int)


def reuse_groups(n_cells: int, reuse_factor: int, layout: str = "hexagonal") -> np.ndarray:
    """Frequency group (0 .. N-1) of each cell for cluster size N = reuse_factor.

    The hexagonal pattern of cluster size N = i^2 + i j + j^2 (1: (1, 0), 3: (1, 1),
    4: (2, 0), 7: (2, 1)); co-channel cells are sqrt(3 N) cell radii apart (Rappaport,
    Wireless Communications, 2nd ed., 2002, sec. 3.2). On axial coordinates (q, r):
    N=3: (q - r) mod 3; N=4: (q mod 2) + 2 (r mod 2); N=7: (q + 3 r) mod 7. Every
    cell's six neighbours then use other groups. N=1: every cell in one group."""
    if reuse_factor not in REUSE_FACTORS:
        raise FedjouleError(
            f"topology.reuse_factor: {reuse_factor!r} is not allowed; allowed: "
            f"{', '.join(map(str, REUSE_FACTORS))}"
        )
    if reuse_factor == 1:
        return np.zeros(n_cells, dtype=int)
    if layout != "hexagonal":
        raise FedjouleError(
            f"topology.reuse_factor={reuse_factor} needs layout hexagonal, got {layout!r}"
        )
    q, r = hexagonal_axial(n_cells).T
    if reuse_factor == 3:
        return (q - r) % 3
    if reuse_factor == 4:
        return (q % 2) + 2 * (r % 2)
    return (q + 3 * r) % 7


def cochannel_matrix(groups: np.ndarray) -> np.ndarray:
    """(C, C) bool: cells c and c' share frequencies (same group), c != c'."""
    groups = np.asarray(groups)
    same = groups[:, None] == groups[None, :]
    np.fill_diagonal(same, False)
    return same


class _Flow:
    """One transmission on the co-channel network."""

    __slots__ = (
        "bits",
        "link",
        "cell",
        "client",
        "band_hz",
        "remaining_bits",
        "rate_bps",
        "sinr",
        "done",
        "on_rate",
        "sinr_time",
        "sinr_min",
        "started_s",
        "nominal_band_hz",
        "nominal_min",
    )

    def __init__(self, bits, link, cell, client, band_hz, done, on_rate, now_s) -> None:
        self.bits = bits
        self.link = link
        self.cell = cell
        self.client = client
        self.band_hz = band_hz  # None: the FDMA share, B / active in the cell
        self.remaining_bits = bits
        self.rate_bps = 0.0
        self.sinr = math.nan
        self.done = done
        self.on_rate = on_rate
        self.sinr_time = 0.0  # integral of SINR dt so far
        self.sinr_min = math.inf
        self.started_s = now_s
        self.nominal_band_hz = None  # the band of the fixed-rate failure rule, if any
        self.nominal_min = math.inf  # the minimum SINR on that band


class CochannelNetwork(RateSharing):
    """Every cell's transmissions of one direction in one round, with their SINRs.

    `cross_gain(client, cell)`: uplink, the client's gain to `cell`'s base station;
    downlink, the gain from `cell`'s base station to the client (large-scale x fading).
    `access`: how a cell splits its band B among its transmissions (fdma: B / n active;
    tdma: B, one at a time; ofdma: B / R, at most R at a time; broadcast: B each, no
    queue, interference from the other stations that broadcast).
    """

    def __init__(
        self,
        env: simpy.Environment,
        bandwidth_hz: float,
        cochannel: np.ndarray,
        cross_gain: Callable[[int, int], float],
        access: str = "fdma",
        resource_blocks: int = 10,
        bs_power_w: float = 0.0,
    ) -> None:
        if not bandwidth_hz > 0:
            raise FedjouleError(f"the bandwidth must be > 0 Hz, got {bandwidth_hz}")
        super().__init__(env)
        self.bandwidth_hz = float(bandwidth_hz)
        self.cochannel = np.asarray(cochannel, dtype=bool)
        self.cross_gain = cross_gain
        self.access = access
        self.bs_power_w = float(bs_power_w)
        self.channels = {"tdma": 1, "ofdma": int(resource_blocks)}.get(access)
        self._resources: dict[int, simpy.Resource] = {}
        self._gain_cache: dict[tuple[int, int], float] = {}

    def medium(self, cell: int) -> "CochannelMedium":
        """The medium of one cell (what client processes call `transmit` on)."""
        return CochannelMedium(self, int(cell))

    # --------------------------------------------------------------------- the physics
    def _gain(self, client: int, cell: int) -> float:
        key = (client, cell)
        if key not in self._gain_cache:
            self._gain_cache[key] = float(self.cross_gain(client, cell))
        return self._gain_cache[key]

    def _bands(self) -> list[float]:
        if self.access == "fdma":
            count: dict[int, int] = {}
            for flow in self._transfers:
                count[flow.cell] = count.get(flow.cell, 0) + 1
            return [self.bandwidth_hz / count[f.cell] for f in self._transfers]
        if self.access == "broadcast":
            return [self.bandwidth_hz] * len(self._transfers)
        return [f.band_hz for f in self._transfers]

    def _interference_w(self, flow: _Flow, band_hz: float) -> float:
        """Interference power in `flow`'s band from the co-channel transmissions now."""
        row = self.cochannel[flow.cell]
        if self.access == "broadcast":  # the other stations broadcasting now, full band
            stations = {f.cell for f in self._transfers if row[f.cell]}
            return sum(self.bs_power_w * self._gain(flow.client, c) for c in stations)
        total_w = 0.0
        for other in self._transfers:
            if row[other.cell]:
                total_w += other.link.tx_power_w * self._gain(other.client, flow.cell)
        return total_w * band_hz / self.bandwidth_hz

    def sinr(self, flow: _Flow, band_hz: float) -> float:
        link = flow.link
        signal_w = link.tx_power_w * link.gain
        noise_w = link.noise_psd_w_per_hz * band_hz
        return signal_w / (noise_w + self._interference_w(flow, band_hz))

    # --------------------------------------------------------------------- the events
    def _sent_for(self, elapsed_s: float) -> None:
        for flow in self._transfers:
            flow.sinr_time += flow.sinr * elapsed_s

    def _rates(self) -> list[float]:
        rates = []
        for flow, band_hz in zip(self._transfers, self._bands(), strict=True):
            flow.sinr = self.sinr(flow, band_hz)
            flow.sinr_min = min(flow.sinr_min, flow.sinr)
            if flow.nominal_band_hz is not None:
                flow.nominal_min = min(flow.nominal_min, self.sinr(flow, flow.nominal_band_hz))
            link = flow.link
            if link.fixed_se_bps_per_hz is not None:
                rates.append(band_hz * link.fixed_se_bps_per_hz)
            else:  # Shannon on the SINR
                rates.append(band_hz * math.log2(1.0 + flow.sinr))
        return rates

    def resource(self, cell: int) -> simpy.Resource:
        if cell not in self._resources:
            self._resources[cell] = simpy.Resource(self.env, capacity=self.channels)
        return self._resources[cell]


def _stats(flow: _Flow, airtime_s: float) -> dict:
    mean = flow.sinr_time / airtime_s if airtime_s > 0 else flow.sinr
    return {"sinr_mean": mean, "sinr_min": flow.sinr_min, "sinr_min_nominal": flow.nominal_min}


class CochannelMedium:
    """One cell's view of a `CochannelNetwork`, with the media's `transmit` interface
    (channel/medium.py) and, in `stats`, the transmission's time-mean and minimum SINR
    (and with stats["nominal_band_hz"] given, the minimum SINR on that band: the
    fixed-rate failure rule's, p g / (N0 b + (b/B) I) at the nominal band b)."""

    reports_sinr = True

    def __init__(self, network: CochannelNetwork, cell: int) -> None:
        self.network = network
        self.env = network.env
        self.cell = cell

    def transmit(
        self,
        bits: float,
        link: Link,
        on_start: Callable[[], None] | None = None,
        on_rate: Callable[[float], None] | None = None,
        client: int = -1,
        stats: dict | None = None,
    ) -> Generator[simpy.Event, Any, float]:
        """Send `bits`; returns the airtime (queueing excluded), raises TransmissionAborted.
        `client`: whose transmission (for its gains to the other cells)."""
        bits = _check_bits(bits)
        if bits == 0:
            return 0.0
        if link.gain is None:
            raise FedjouleError("co-channel interference needs links with a channel gain")
        network = self.network
        if network.channels is None:  # fdma, broadcast: no queue
            return (yield from self._send(bits, link, on_start, on_rate, client, stats, None))
        with network.resource(self.cell).request() as request:
            try:
                yield request
            except simpy.Interrupt as interrupt:
                raise TransmissionAborted(0.0, interrupt.cause, 0.0) from interrupt
            band_hz = network.bandwidth_hz / network.channels
            return (yield from self._send(bits, link, on_start, on_rate, client, stats, band_hz))

    def _send(self, bits, link, on_start, on_rate, client, stats, band_hz):
        network, env = self.network, self.env
        if on_start is not None:
            on_start()
        flow = _Flow(bits, link, self.cell, client, band_hz, env.event(), on_rate, env.now)
        if stats is not None and stats.get("nominal_band_hz"):
            flow.nominal_band_hz = float(stats["nominal_band_hz"])
        network._join(flow)
        try:
            yield flow.done
        except simpy.Interrupt as interrupt:
            network._leave(flow)
            airtime_s = env.now - flow.started_s
            if stats is not None:
                stats.update(_stats(flow, airtime_s))
            raise TransmissionAborted(
                airtime_s, interrupt.cause, bits - flow.remaining_bits
            ) from interrupt
        airtime_s = env.now - flow.started_s
        if stats is not None:
            stats.update(_stats(flow, airtime_s))
        return airtime_s


def sinr_columns(sinr_db: list[float]) -> dict:
    """clients.csv's SINR over a client's transmissions (channel.interference=cochannel):
    the mean and the 5th percentile of their time-mean SINRs in dB; empty when none."""
    if not sinr_db:
        return {"mean_uplink_sinr_db": None, "p5_uplink_sinr_db": None}
    values = np.asarray(sinr_db, dtype=float)
    return {
        "mean_uplink_sinr_db": float(values.mean()),
        "p5_uplink_sinr_db": float(np.percentile(values, 5)),
    }
