"""What the server knows of each client, kept round by round for a policy (docs/policies.md):
its reported battery and training loss, last measured upload rate, round and communication
time, its participation, age and staleness, and the channel state the scenario's policy.csi
allows.

Built only for a scenario with a policy (policy.is_default false); both engines update it
when they close a round's row (RoundKernel.close_row, system.SystemEngine.close_row), the
async and buffered server as each update ends, an edge server after each edge round."""

from dataclasses import fields
from functools import cached_property

import numpy as np

from fedjoule.channel.cell import mean_uplink_snr_db, uplink_fading
from fedjoule.channel.link import airtime_s, shannon_rate_bps
from fedjoule.channel.units import db_to_linear, dbm_to_w
from fedjoule.policies.observation import Observation
from fedjoule.policies.select import spectral_efficiency
from fedjoule.simulator.checkpoint import as_numpy
from fedjoule.simulator.transfers import typical_bandwidth_hz

# the per-client arrays of a checkpoint (state_dict), in this order
KEPT = ("battery_fraction", "upload_rate_bps", "round_time_s", "comm_time_s", "loss",
        "participations", "last_selected", "staleness_rounds", "last_sinr_db",
        "sent_loss", "loss_rms", "sent_loss_rms")  # fmt: skip


def battery_fraction(battery_j: np.ndarray, capacity_j: np.ndarray) -> np.ndarray:
    """State of charge 0..1; 1 for a client on mains (infinite capacity)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(capacity_j), battery_j / capacity_j, 1.0)


class Observer:
    """Per client (arrays over the N clients) what a real server knows: reported with each
    update or measured by the server when it arrives. The training loss is recorded by the
    learning engine for a loss-driven selector (PolicyStep.reads_loss), else it stays nan."""

    def __init__(self, world) -> None:
        self.world = world
        n = world.population.size
        pop = world.population
        self.csi = world.scenario.policy.csi
        self.battery_fraction = battery_fraction(pop.battery_initial_j, pop.battery_capacity_j)
        self.upload_rate_bps = np.full(n, np.nan)  # bits / airtime of its last upload
        self.round_time_s = np.full(n, np.nan)  # round start to its last arrival
        self.comm_time_s = np.full(n, np.nan)  # that round time less its computation
        self.loss = np.full(n, np.nan)  # mean training loss its last arrived update carried
        self.sent_loss = np.full(n, np.nan)  # that of the update under way (train_loss.py)
        self.loss_rms = np.full(n, np.nan)  # root mean square of its per-sample losses
        self.sent_loss_rms = np.full(n, np.nan)
        self.participations = np.zeros(n, dtype=int)  # updates delivered
        self.last_selected = np.full(n, -1, dtype=int)
        self.staleness_rounds = np.zeros(n, dtype=int)  # async, buffered (else 0)
        self.last_sinr_db = np.full(n, np.nan)  # policy.csi=last: at its last upload
        self.mean_sinr_db = self.whole_band_snr_db()
        self._fading = (None, None)  # (round, its uplink fading of every client)
        self.download_s, self.upload_s = self.nominal_comm_s()
        self.nominal_s = self.download_s + self.upload_s

    # ------------------------------------------------------------------ the channel
    def whole_band_snr_db(self) -> np.ndarray:
        """Every client's mean uplink SNR over the whole band W (dB), without fading:
        p G / (N0 W), or the scenario's snr_db."""
        world, channel = self.world, self.world.scenario.channel
        band_hz = np.full(world.population.size, channel.uplink_bandwidth_hz)
        return mean_uplink_snr_db(channel, world.cell, world.population.tx_power_w, band_hz)

    def round_snr_db(self, r: int, clients: np.ndarray) -> np.ndarray:
        """Round r's uplink SNR of the clients (their block fading, cell.uplink_fading: the
        draw both engines make, shared with them): the mean SNR plus 10 log10 |h|^2. The
        fading of every client is drawn once a round (select, allocate and record ask
        again), the SNR only for the clients asked."""
        if self._fading[0] != r:
            scenario = self.world.scenario
            n = self.world.population.size
            self._fading = (r, uplink_fading(scenario.channel, n, scenario.seed, r))
        with np.errstate(divide="ignore"):
            return self.mean_sinr_db[clients] + 10 * np.log10(self._fading[1][clients])

    @cached_property
    def mean_spectral_efficiency(self) -> np.ndarray:
        """log2(1 + mean SNR) of every client (proportional fair's average rate over 1 Hz)."""
        return spectral_efficiency(self.mean_sinr_db)

    def known_snr_db(self, r: int, clients: np.ndarray) -> np.ndarray:
        """The clients' whole-band SNR as the server knows it in round r: this round's
        (csi oracle), the last measured where there is one (last), else the mean."""
        if self.csi == "oracle":
            return self.round_snr_db(r, clients)
        mean_db = self.mean_sinr_db[clients]
        if self.csi == "last":
            last_db = self.last_sinr_db[clients]
            return np.where(np.isfinite(last_db), last_db, mean_db)
        return mean_db

    def nominal_comm_s(self) -> tuple[np.ndarray, np.ndarray]:
        """Each client's expected download and upload time without fading: the model over
        the downlink band at its mean SNR, the update over its typical uplink band
        (transfers.typical_bandwidth_hz: B / the clients a round selects in its cell)."""
        world, scenario = self.world, self.world.scenario
        channel, cell, n = scenario.channel, world.cell, world.population.size
        up_band_hz = typical_bandwidth_hz(scenario, n, cell.serving_cell)
        up_snr = db_to_linear(
            mean_uplink_snr_db(channel, cell, world.population.tx_power_w, up_band_hz)
        )
        if cell.large_scale_gain is None:
            down_db = channel.snr_db if channel.downlink_snr_db is None else channel.downlink_snr_db
            down_snr = np.full(n, db_to_linear(down_db))
        else:
            down_snr = (dbm_to_w(channel.bs_tx_power_dbm) * cell.large_scale_gain) / (
                cell.noise_psd_w_per_hz * channel.downlink_bandwidth_hz
            )
        if channel.rate == "fixed":
            up_rate = up_band_hz * channel.spectral_efficiency_bits_per_hz
        else:
            up_rate = shannon_rate_bps(up_band_hz, up_snr)
        down_rate = shannon_rate_bps(channel.downlink_bandwidth_hz, down_snr)
        return airtime_s(world.downlink_bits, down_rate), airtime_s(world.uplink_bits, up_rate)

    def expected_comm_s(self, clients: np.ndarray) -> np.ndarray:
        """The clients' expected time outside their computation: measured in their last
        round (round time less computation), else the nominal download plus upload."""
        measured = self.comm_time_s[clients]
        return np.where(np.isfinite(measured), measured, self.nominal_s[clients])

    # ------------------------------------------------------------------ the observation
    def observation(self, r: int, candidates: np.ndarray, n_samples: np.ndarray) -> Observation:
        """What a policy sees in round r about the candidates (policies.observation)."""
        return self.lazy_observation(r, candidates, n_samples).plain()

    def lazy_observation(self, r: int, candidates: np.ndarray, n_samples: np.ndarray,
                         client_id=None, n_clients=None) -> "LazyObservation":  # fmt: skip
        """The observation whose arrays are taken on first read (a built-in selector's);
        `client_id`, `n_clients`: the numbering it shows (an edge server's own)."""
        n = self.world.population.size if n_clients is None else n_clients
        ids = candidates if client_id is None else client_id
        return LazyObservation(r, n, ids, (self, candidates, n_samples))

    def record(self, row: dict, clients, battery_j: np.ndarray, measure: bool = True) -> None:
        """After a round's row is closed: what its clients (round_row.ClientsOfRound)
        reported (their battery) and, with `measure` (sync rounds; a protocol measures its
        clients itself, `measure`), what the server measured of their updates."""
        k = clients.client
        if len(k) == 0:
            return
        if measure:
            self.measure(row["round"], row["sim_time_start_s"], clients)
        pop = self.world.population
        self.battery_fraction[k] = battery_fraction(battery_j[k], pop.battery_capacity_j[k])

    def measure(self, r: int, start_s: float, clients, staleness=None) -> None:
        """What the server measured of the clients (round_row.ClientsOfRound) it selected
        in round, dispatch or edge round r at start_s: their age, arrivals, round and
        communication time, upload rate, (csi last) SNR; `staleness`, per client, the
        server versions an arrived update lagged by (async, buffered; else 0)."""
        k = clients.client
        if len(k) == 0:
            return
        self.last_selected[k] = r
        arrived = clients.outcome == "arrived"
        a = k[arrived]
        self.participations[a] += 1
        for kept, sent in ((self.loss, self.sent_loss), (self.loss_rms, self.sent_loss_rms)):
            reported = sent[a]  # a lost update's loss never reaches the server
            known = ~np.isnan(reported)
            kept[a[known]] = reported[known]
            sent[k] = np.nan
        round_s = clients.end_s[arrived] - start_s
        self.round_time_s[a] = round_s
        self.comm_time_s[a] = round_s - clients.compute_time_s[arrived]
        if staleness is not None:
            self.staleness_rounds[a] = np.asarray(staleness)[arrived]
        sent = clients.uplink_airtime_s > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = clients.uplink_bits[sent] / clients.uplink_airtime_s[sent]
        self.upload_rate_bps[k[sent]] = rate
        if self.csi == "last":
            self.last_sinr_db[k[sent]] = self.round_snr_db(r, k[sent])

    def state_dict(self) -> dict:
        """The kept arrays (a checkpoint's, simulator/checkpoint.py)."""
        return {name: getattr(self, name).copy() for name in KEPT}

    def load_state_dict(self, saved: dict) -> None:
        """The kept arrays back; one a checkpoint predates keeps its value at time 0."""
        for name in KEPT:
            if name not in saved:
                continue
            setattr(self, name, np.array(as_numpy(saved[name])))


class LazyObservation(Observation):
    """An Observation whose per-candidate arrays are taken from the Observer when first
    read (a built-in selector reads one to three of them, not all twelve over every
    candidate): the same values as the plain one, read in the same round (plain())."""

    def __init__(self, round_index: int, n_clients: int, client_id, source) -> None:
        for name, value in (("round_index", round_index), ("n_clients", n_clients),
                            ("client_id", client_id), ("_source", source)):  # fmt: skip
            object.__setattr__(self, name, value)

    def plain(self) -> Observation:
        """The Observation with every field (a plug-in's)."""
        return Observation(**{f.name: getattr(self, f.name) for f in fields(Observation)})

    def _taken(self, name: str) -> np.ndarray:
        observer, candidates, _ = self._source
        return getattr(observer, name)[candidates]

    @cached_property
    def n_samples(self) -> np.ndarray:
        return self._source[2][self._source[1]]

    @cached_property
    def battery_fraction(self) -> np.ndarray:
        return self._taken("battery_fraction")

    @cached_property
    def upload_rate_bps(self) -> np.ndarray:
        return self._taken("upload_rate_bps")

    @cached_property
    def round_time_s(self) -> np.ndarray:
        return self._taken("round_time_s")

    @cached_property
    def loss(self) -> np.ndarray:
        return self._taken("loss")

    @cached_property
    def loss_rms(self) -> np.ndarray:
        return self._taken("loss_rms")

    @cached_property
    def participations(self) -> np.ndarray:
        return self._taken("participations")

    @cached_property
    def age_rounds(self) -> np.ndarray:
        return self.round_index - self._taken("last_selected")

    @cached_property
    def staleness_rounds(self) -> np.ndarray:
        return self._taken("staleness_rounds")

    @cached_property
    def sinr_db(self) -> np.ndarray | None:
        observer, candidates, _ = self._source
        if observer.csi == "oracle":
            return observer.round_snr_db(self.round_index, candidates)
        return self._taken("last_sinr_db") if observer.csi == "last" else None

    @cached_property
    def mean_sinr_db(self) -> np.ndarray | None:
        return self._taken("mean_sinr_db") if self._source[0].csi in ("last", "oracle") else None

    @cached_property
    def mean_spectral_efficiency(self) -> np.ndarray:
        """log2(1 + mean_sinr_db), kept by the observer (select.mean_spectral_efficiency)."""
        return self._taken("mean_spectral_efficiency")
