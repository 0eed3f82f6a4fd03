"""The network sections: link traces, the channel, availability, rounds and the topology."""

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from fedjoule.channel.trace import load_section, trace_path
from fedjoule.devices.fedscale import check_file, is_fedscale_file
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.schema.base import (
    MAX_CELLS,
    MAX_CLIENTS,
    MAX_DB,
    MAX_TIME_S,
    Int,
    Invalid,
    Section,
)
from fedjoule.scenarios.schema.devices import DB, Bandwidth
from fedjoule.scenarios.schema.learning import _data_file


class LinkTrace(Section):
    """A measured throughput series one link direction follows (docs/models.md#link-traces)."""

    file: str = Field(
        ...,
        min_length=1,
        max_length=4096,
        description="CSV file of the series: a path relative to the scenario file's folder "
        "(then the working folder), or "
        "package:NAME for a trace shipped with fedjoule (package:walking-5gophers.csv: the "
        "5Gophers 1.0 walking trace, CC BY 4.0, Narayanan et al., WWW 2020).",
    )
    _file_found = field_validator("file")(_data_file)
    column: str = Field(..., min_length=1, max_length=200, description="The rate column.")
    time_column: str | None = Field(
        None,
        max_length=200,
        description="Column of sample times (s, increasing); none: one sample per second.",
    )
    unit: Literal["bit/s", "kbit/s", "Mbit/s"] = Field(
        "Mbit/s", description="Unit of the rate column."
    )
    scale: float = Field(
        1.0, gt=0, le=1e6, description="Factor on every rate (e.g. 0.1: a tenth of it)."
    )
    per_client_offset: Literal["random", "zero"] = Field(
        "random",
        description="Where each client starts reading the series: random (uniform over its "
        "duration, from the seed, so clients do not move in lockstep) or zero.",
    )
    loop: bool = Field(
        True, description="Repeat the series (true); false: the last rate holds for ever."
    )


class LinkTraces(Section):
    """Trace-driven links: either direction may follow a measured series (the other the
    channel model)."""

    uplink: LinkTrace | None = Field(
        None,
        description="The uplink's series (5Gophers' are downlink measurements: replaying "
        "them on the uplink is an assumption to state).",
    )
    downlink: LinkTrace | None = Field(None, description="The broadcast's series.")

    @model_validator(mode="after")
    def _readable(self):
        """Read each series now, so that `fedjoule validate` names a bad file's first bad
        row."""
        for side in ("uplink", "downlink"):
            if getattr(self, side) is not None:
                try:
                    load_section(getattr(self, side), f"channel.trace.{side}")
                except FedjouleError as exc:
                    raise ValueError(str(exc)) from None
        return self


def _radius(v) -> Iterator[tuple[str, str]]:
    if v.min_distance_m >= v.cell_radius_m:
        yield (
            "min_distance_m",
            f"min_distance_m must be below cell_radius_m ({v.cell_radius_m:g}), "
            f"got {v.min_distance_m:g}",
        )


def _rate(v) -> Iterator[tuple[str, str]]:
    se = v.spectral_efficiency_bits_per_hz
    if v.rate == "fixed" and se is None:
        yield (
            "spectral_efficiency_bits_per_hz",
            "rate=fixed needs spectral_efficiency_bits_per_hz (the fixed rate r in "
            "bit/s/Hz, e.g. 1.0)",
        )
    if v.rate == "adaptive" and se is not None:
        yield (
            "spectral_efficiency_bits_per_hz",
            f"spectral_efficiency_bits_per_hz={se:g} is only used with rate=fixed (with "
            "rate=adaptive each transmission is sent at its Shannon rate); set rate=fixed "
            "or remove it",
        )
    if v.rate == "fixed" and v.outage != "none":
        yield (
            "outage",
            f"outage={v.outage} with rate=fixed: a fixed-rate attempt already fails exactly "
            "when its fade is too deep (log2(1 + SNR |h|^2) < r), so a second, independent "
            "packet-error draw would count the fading twice; use outage=none with "
            "rate=fixed, or rate=adaptive with an outage model",
        )


def _float_width(v) -> Iterator[tuple[str, str]]:
    if v.bits_per_param not in (16, 32, 64):
        yield (
            "bits_per_param",
            f"bits_per_param={v.bits_per_param}: the float width of an uncompressed value "
            "must be 16, 32 or 64; to send fewer bits per parameter use the `compression` "
            "section (compression.uplink: {kind: qsgd, levels: 8}, topk or sign; "
            "docs/compression.md)",
        )


class ChannelSection(Section):
    """The wireless links between clients and the base station (docs/models.md#channel)."""

    snr_db: DB | None = Field(
        None,
        description="A fixed uplink SNR (dB) for every client, replacing geometry and path "
        "loss; fading still applies. none: from geometry.",
    )
    downlink_snr_db: DB | None = Field(
        None, description="Fixed downlink SNR (dB) when snr_db is set (default: snr_db)."
    )
    uplink_bandwidth_hz: Bandwidth = Field(
        10e6,
        description="Uplink bandwidth shared by the round's clients (Hz; at least 1 Hz, so "
        "that no transfer takes forever).",
    )
    downlink_bandwidth_hz: Bandwidth = Field(
        20e6, description="Broadcast bandwidth (Hz; at least 1 Hz)."
    )
    bs_tx_power_dbm: DB = Field(
        30.0, description="Base-station transmit power (dBm; macro sites use 43-46 dBm)."
    )
    access: Literal["fdma", "tdma", "ofdma"] = Field(
        "fdma",
        description="Uplink sharing: fdma (equal split among those sending, processor "
        "sharing), tdma (one at a time), ofdma (resource_blocks blocks). clients.csv's "
        "mean_uplink_snr_db, p G/(N0 b), is on the band b a client gets in its own cell (each "
        "cell has its own band B): fdma B/(s N_c/N), with s = ceil(round.overcommit x "
        "training.clients_per_round) clients selected (at most the population) of whom "
        "the share N_c/N of the client's cell is in it (one cell: B/s), tdma B (the whole "
        "band in its own slot), ofdma B/R (one resource block); with a fixed snr_db it is "
        "snr_db.",
    )
    resource_blocks: Int = Field(
        10, ge=1, le=10_000, description="OFDMA resource blocks R (LTE: up to 100)."
    )
    path_loss: Literal["macro-3gpp", "free-space", "log-distance"] = Field(
        "macro-3gpp",
        description="macro-3gpp: 128.1 + 37.6 log10(d_km) (TR 36.814); free-space; "
        "log-distance: pl0_db + 10 n log10(d/1 m).",
    )
    carrier_hz: float = Field(
        2.0e9, gt=0, le=1e13, description="Carrier frequency for free-space (Hz)."
    )
    pl0_db: DB = Field(40.0, description="Log-distance loss at 1 m (dB).")
    pl_exponent: float = Field(3.5, gt=0, le=10, description="Log-distance exponent n.")
    cell_radius_m: float = Field(500.0, gt=0, le=1e6, description="Clients uniform in a disc (m).")
    min_distance_m: float = Field(10.0, gt=0, le=1e6, description="Closest client distance (m).")
    shadowing_sigma_db: float = Field(
        8.0,
        ge=0,
        le=100,
        description="Log-normal shadowing sigma (dB), drawn once per client.",
    )
    fading: Literal["none", "rayleigh", "rician"] = Field(
        "rayleigh", description="Block fading, redrawn every round (see fading_per)."
    )
    fading_per: Literal["round", "transmission"] = Field(
        "round",
        description="round: one fading draw per client and round for every attempt; "
        "transmission: each uplink retransmission sees a fresh draw.",
    )
    outage: Literal["none", "rayleigh", "waterfall"] = Field(
        "none",
        description="Packet error per upload attempt with rate=adaptive, drawn independently "
        "per attempt (and independently of the fade that sets the attempt's airtime), from "
        "the fading-free SNR on the client's nominal bandwidth (B/m fdma, B tdma, B/R ofdma): "
        "rayleigh: q = 1 - exp(-(2^R - 1)/SNR), the Rayleigh outage probability at the "
        "target spectral efficiency R, as an abstract error rate; "
        "waterfall: q = 1 - exp(-m/SNR) = 1 - exp(-m N0 b/(p gain)), Chen et al.'s "
        "packet-error model (IEEE TWC 2021, eq. 4, without interference). With rate=fixed "
        "the fade itself decides each failure, so outage must be none.",
    )
    outage_target_se_bps_per_hz: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Target spectral efficiency R of the rayleigh outage (bit/s/Hz).",
    )
    waterfall_m: float = Field(
        0.023,
        gt=0,
        le=1e6,
        description="Waterfall threshold m (linear; Chen et al. use 0.023).",
    )
    rate: Literal["adaptive", "fixed"] = Field(
        "adaptive",
        description="Uplink rate of each transmission (upload attempt). adaptive: the rate "
        "follows the attempt's fade, b log2(1 + SNR |h|^2) on its band b (Shannon; the "
        "transmitter knows the channel, Goldsmith, Wireless Communications, 2005, ch. 4.2.4), "
        "so fading alone never makes an attempt fail; packet errors come only from the "
        "`outage` model. fixed: every attempt is sent at spectral_efficiency_bits_per_hz r, "
        "rate b r, airtime S/(b r), and fails exactly when log2(1 + SNR |h|^2) < r for its "
        "own fade |h|^2 (outage of a slow-fading channel, Tse and Viswanath, Fundamentals of "
        "Wireless Communication, 2005, ch. 5.4.1; under Rayleigh fading the failure "
        "probability is 1 - exp(-(2^r - 1)/SNR)), SNR being the fading-free mean SNR on the "
        "client's nominal band (B/m fdma, B tdma, B/R ofdma); a failed attempt is "
        "retransmitted (max_retx; fading_per=transmission: a fresh fade each, round: the "
        "same fade, so the retransmissions fail too). fixed needs outage=none. The "
        "broadcast (downlink) always runs at its Shannon rate.",
    )
    spectral_efficiency_bits_per_hz: float | None = Field(
        None,
        gt=0,
        le=100,
        description="rate=fixed: the spectral efficiency r every upload attempt is sent at "
        "(bit/s/Hz, e.g. 1.0; LTE's modulation and coding schemes span about 0.15 to 5.5, "
        "3GPP TS 36.213 Table 7.2.3-1); required with rate=fixed, unset with rate=adaptive.",
    )
    max_retx: Int = Field(
        0,
        ge=0,
        le=100,
        description="Retransmissions after a failed upload attempt (each costs airtime and "
        "energy); after 1 + max_retx failures the update is dropped (dropped_outage). "
        "At most 100 (LTE HARQ allows 4 to 8).",
    )
    rician_k: float = Field(3.0, ge=0, le=1e6, description="Rician K-factor (linear).")
    noise_dbm_per_hz: DB = Field(-174.0, description="Thermal noise PSD (dBm/Hz).")
    noise_figure_db: float = Field(7.0, ge=0, le=MAX_DB, description="Receiver noise figure (dB).")
    bits_per_param: Int = Field(
        32,
        ge=1,
        le=64,
        description="Float width of an uncompressed value (bits): 16 (IEEE half), 32 or 64. "
        "The learning rounds what it sends to that width (16: cast to float16 and back); "
        "fewer bits per parameter come from the `compression` section "
        "(docs/compression.md).",
    )
    header_bits: Int = Field(
        1_000, ge=0, le=1_000_000_000, description="Per-message header (bits)."
    )
    trace: LinkTraces | None = Field(
        None,
        description="Trace-driven links (docs/models.md#link-traces): a client's rate follows "
        "a measured throughput series over simulated time instead of Shannon (piecewise "
        "constant; each client from its own offset); airtime: when the rate's integral "
        "reaches the bits; the radio's power models apply as always. A traced uplink is the "
        "client's own measured throughput (the cell's sharing, access, is already in it); "
        "it needs rate=adaptive and interference=none.",
    )
    interference: Literal["none", "cochannel"] = Field(
        "none",
        description="Inter-cell interference (docs/models.md#interference). none: every cell "
        "is alone (SNR). cochannel: each transmission's rate follows its SINR, p g / (N0 b + "
        "(b/B) sum p_j G_j) over the transmissions active at that instant in the other cells "
        "of its frequency group (topology.reuse_factor), each with its own path loss, "
        "shadowing and fading to this base station, recomputed whenever one starts or ends; "
        "the broadcast likewise sees the co-channel base stations broadcasting. rate=fixed: "
        "an attempt fails when its SINR falls below 2^r - 1 at any instant of it (the "
        "minimum over the attempt). Needs geometry (snr_db unset).",
    )

    cross_checks = (_radius, _rate, _float_width)


def _trace(v) -> Iterator[tuple[str, str]]:
    if v.kind == "trace" and not v.trace_file:
        yield "trace_file", "availability.kind=trace needs availability.trace_file"
    if v.kind == "trace" and v.trace_file:
        try:
            path = trace_path(v.trace_file)
            fedscale = is_fedscale_file(path)
        except (FedjouleError, OSError, ValueError):
            fedscale = False
        if fedscale:  # FedScale's behaviour trace: read it now
            try:
                check_file(path, "behaviour")
            except FedjouleError as exc:
                yield "trace_file", f"availability.trace_file {exc}"


TIME_BOUND = (
    "at most 1e9 s (about 32 years), which keeps every simulated time finite and "
    "far from float64 rounding"
)


class AvailabilitySection(Section):
    """When clients are online (docs/models.md#availability)."""

    kind: Literal["always", "bernoulli", "markov", "diurnal", "trace"] = Field(
        "always",
        description="always; bernoulli (each round offline with p_drop); markov (on/off "
        "periods with exponential durations, in simulated time); diurnal (each round online "
        "with probability clip(p + A sin(2 pi (t - phi_k)/24 h), 0, 1), charging in a daily "
        "window); trace (online intervals replayed from trace_file).",
    )
    p_drop: float = Field(0.1, ge=0, lt=1, description="Per-round offline probability.")
    mean_on_s: float = Field(
        1800.0,
        ge=1e-3,
        le=MAX_TIME_S,
        description="Markov mean online period (s), at least 1 ms (each client stores every "
        f"state change up to the current time), {TIME_BOUND}.",
    )
    mean_off_s: float = Field(
        600.0,
        ge=1e-3,
        le=MAX_TIME_S,
        description="Markov mean offline period (s), at least 1 ms, at most 1e9 s.",
    )
    diurnal_mean: float = Field(
        0.5, ge=0, le=1, description="Diurnal mean online probability p (fraction)."
    )
    diurnal_amplitude: float = Field(
        0.4, ge=0, le=1, description="Diurnal amplitude A of the online probability (fraction)."
    )
    diurnal_phase_h: float = Field(
        0.0,
        ge=-8_760,
        le=8_760,
        description="Diurnal phase phi of every client (h, within a year either way); the "
        "probability peaks at t = phi + 6 h.",
    )
    diurnal_phase_spread_h: float = Field(
        0.0,
        ge=0,
        le=24,
        description="Per-client phase (time zone): phi_k = diurnal_phase_h + U(0, spread) (h).",
    )
    charging_from_h: float = Field(
        0.0, ge=0, lt=24, description="Diurnal: daily charging window start, (t - phi_k) mod 24 h."
    )
    charging_to_h: float = Field(
        8.0, ge=0, le=24, description="Diurnal: daily charging window end (h); may wrap midnight."
    )
    trace_file: str | None = Field(
        None,
        max_length=4096,
        description="Trace: CSV with columns client, start_s, end_s (online intervals, "
        "simulated s); a path relative to the scenario file's folder (then the working "
        "folder). Unlisted clients stay "
        "offline. Or a FedScale behaviour trace (pickle, read without running code, JSON, or "
        "CSV with an `active` column; package:NAME for one shipped with fedjoule): client k "
        "takes its k-th client (by id, cycling), online from active[i] to inactive[i], "
        "repeating every finish_time (docs/models.md#fedscale-traces).",
    )
    trace_period_s: float | None = Field(
        None,
        ge=1e-3,
        le=MAX_TIME_S,
        description="Trace: replay the trace every this many seconds (none: once); at least "
        "1 ms, at most 1e9 s.",
    )

    @field_validator("trace_file")
    @classmethod
    def _trace_file_found(cls, value, info):
        return _data_file(value) if info.data.get("kind") == "trace" else value

    cross_checks = (_trace,)


class RoundSection(Section):
    """The protocol of one round."""

    deadline_s: float | None = Field(
        None,
        gt=0,
        le=MAX_TIME_S,
        description="Uploads not in by this time after the round starts are "
        f"dropped (none: wait for all); {TIME_BOUND}.",
    )
    min_clients: Int = Field(
        1,
        ge=1,
        le=MAX_CLIENTS,
        description="Fewer arrivals than this: the round fails, the model stays (at most "
        "training.clients_per_round).",
    )
    server_time_s: float = Field(
        0.0, ge=0, le=MAX_TIME_S, description="Server aggregation time (s), at most 1e9 s."
    )
    server_flops_per_s: float = Field(
        1e10,
        gt=0,
        description="Server speed on the aggregation's vector arithmetic (FLOP/s), for "
        "rounds.csv server_compute_time_s (reported, not added to the clock; server_time_s "
        "is the clock's wait). Default 1e10: streaming float32 work is memory-bound, 2 FLOPs "
        "per 12 bytes moved (STREAM Triad, McCalpin 1995) at 60 GB/s sustained, under half "
        "of a six-channel DDR4-2933 server socket's 141 GB/s peak.",
    )
    interval_s: float | None = Field(
        None,
        gt=0,
        le=MAX_TIME_S,
        description="Round r starts no earlier than r x interval_s of simulated time (s), so "
        f"runs can span a day (none: back to back); {TIME_BOUND}, and bounds the days a "
        "diurnal run steps through.",
    )
    overcommit: float = Field(
        1.0,
        ge=1,
        le=10,
        description="Over-commit factor f: select ceil(f m) clients, keep the first m arrivals "
        "and discard the rest (Bonawitz et al., MLSys 2019, use 1.3); at most 10.",
    )
    idle_wait_s: float = Field(
        60.0,
        gt=0,
        le=MAX_TIME_S,
        description="When no client is online, the server waits this long (s) and "
        "counts a failed round; at most 1e9 s.",
    )


def _positions(v) -> Iterator[tuple[str, str]]:
    if v.layout == "single" and v.cells != 1:  # (else the cells asked for silently vanish)
        yield (
            "cells",
            (
                f"layout=single has one base station, so cells={v.cells} would be ignored; "
                "set topology.layout to hexagonal or grid for several cells"
            ),
        )
    if v.layout == "positions":
        positions = v.bs_positions_m
        if not positions or any(len(p) != 2 for p in positions):
            yield "bs_positions_m", "layout=positions needs bs_positions_m: a list of [x, y] (m)"


def _n_cells(v) -> int:
    if v.layout == "single":
        return 1
    if v.layout == "positions":
        return len(v.bs_positions_m or [])
    return v.cells


def _per_cell_lengths(v) -> Iterator[tuple[str, str]]:
    n = _n_cells(v)
    for name in ("client_share_per_cell", "backhaul_capacity_bps", "backhaul_latency_s"):
        try:
            value = getattr(v, name)
        except Invalid:
            continue
        if isinstance(value, list) and len(value) != n:
            yield name, f"{name} has {len(value)} values for {n} cells"


def _share_sum(v) -> Iterator[tuple[str, str]]:
    share = v.client_share_per_cell
    if share is not None and abs(sum(share) - 1) > 1e-6:
        yield (
            "client_share_per_cell",
            f"client_share_per_cell must be >= 0 and sum to 1, they sum to {sum(share):g}",
        )


CELL_BOUND = f"at most {MAX_CELLS:,} (each client's strongest station is found among all)"
Capacity = Annotated[float, Field(ge=1, le=1e15)]
Latency = Annotated[float, Field(ge=0, le=MAX_TIME_S)]
Coordinate = Annotated[float, Field(ge=-1e7, le=1e7)]
Position = Annotated[list[Coordinate], Field(min_length=2, max_length=2)]


class TopologySection(Section):
    """Base stations, association and backhaul (docs/models.md#topology); default one cell."""

    layout: Literal["single", "hexagonal", "grid", "positions"] = Field(
        "single",
        description="single: one base station at the origin; hexagonal: `cells` sites on a "
        "hexagonal grid (centre, then rings); grid: `cells` sites on a square grid; "
        "positions: the sites in bs_positions_m.",
    )
    cells: Int = Field(
        1,
        ge=1,
        le=MAX_CELLS,
        description=f"Number of base stations (hexagonal, grid), {CELL_BOUND}.",
    )
    inter_site_distance_m: float = Field(
        500.0, gt=0, le=1e6, description="Distance between neighbouring base stations (m)."
    )
    bs_positions_m: list[Position] | None = Field(
        None,
        max_length=MAX_CELLS,
        description="Base-station (x, y) positions (m, within 10,000 km of the origin) for "
        f"layout=positions, {CELL_BOUND}.",
    )
    client_share_per_cell: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None,
        max_length=MAX_CELLS,
        description="Fraction of clients placed around each base station (fractions summing "
        "to 1; none: equal). Each client is then served by its strongest station.",
    )
    backhaul_capacity_bps: (
        Capacity | Annotated[list[Capacity], Field(max_length=MAX_CELLS)] | None
    ) = Field(
        None,
        description="Capacity of each base station's link to the server (bit/s, at least 1; one "
        "value or one per cell; none: unlimited). Adds bits/capacity to every transfer "
        "crossing it.",
    )
    backhaul_latency_s: Latency | Annotated[list[Latency], Field(max_length=MAX_CELLS)] = Field(
        0.0,
        description="Latency of each backhaul link (s, 0 to 1e9; one value or one per cell).",
    )
    reuse_factor: Literal[1, 3, 4, 7] = Field(
        1,
        description="Frequency reuse (cluster size N: 1, 3, 4 or 7): the cells get N "
        "frequency groups in the hexagonal layout's usual pattern (docs/models.md#"
        "interference); only cells of one group interfere (channel.interference=cochannel). "
        "Above 1 it needs layout hexagonal.",
    )

    cross_checks = (_positions, _per_cell_lengths, _share_sum)

    @property
    def n_cells(self) -> int:
        return _n_cells(self)


class EnergySection(Section):
    """How the ledger treats energy at the run's edges (docs/models.md#radio-tails)."""

    end_of_run_tail: Literal["charge", "drop", "separate"] = Field(
        "separate",
        description="The radio tails still running when the run ends (an LTE tail is about "
        "12 J after every client's last upload): separate: reported on their own "
        "(energy_end_of_run_tail_j in summary.json, clients.csv, events.jsonl and the last "
        "row of rounds.csv), outside energy_total_j, so per-round rows and curves never "
        "jump at the end; charge: added to the last row's energy_radio_tail_j; drop: not "
        "charged. summary.json's end_of_run_tail_energy_j always says how much it is.",
    )
