"""The scenario schema: every field a scenario file may set, its unit, default and range.

Each section is a pydantic model with extra="forbid", so a misspelt field is an
error. Field descriptions are the documentation: docs/scenario-reference.md is
generated from them (`fedjoule reference`).
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedjoule.algorithms.fedavg import FedAvgConfig
from fedjoule.algorithms.registry import AlgorithmSection


class Section(BaseModel):
    """A scenario section: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class SyntheticData(Section):
    """The FedDyn/FedDC synthetic logistic generator (ALGORITHMS.md §11.2)."""

    dim: int = Field(30, ge=1, description="Feature dimension d.")
    classes: int = Field(5, ge=2, description="Number of classes C.")
    avg_samples: int = Field(200, ge=1, description="Mean training samples per client.")
    alpha: float = Field(1.0, ge=0, description="Spread of the per-client labelling models.")
    beta: float = Field(1.0, ge=0, description="Spread of the per-client feature means.")
    size_sigma: float = Field(
        0.0, ge=0, description="Log-normal sigma of client sizes (0: all equal)."
    )
    iid_sol: bool = Field(False, description="One labelling model shared by all clients.")
    iid_dat: bool = Field(False, description="Zero feature means for every client.")
    test_samples: int = Field(
        100, ge=1, description="Held-out test samples per client, from its own distribution."
    )


class DatasetSection(Section):
    """Which data, and how it is split among the clients."""

    name: Literal[
        "synthetic", "mnist", "fashion-mnist", "kmnist", "emnist", "cifar10", "svhn", "adult"
    ] = Field("synthetic", description="Dataset. Image sets load through torchvision.")
    partition: Literal["iid", "dirichlet", "shards"] = Field(
        "iid",
        description="Label split: iid, dirichlet label skew (§11.3), or shards (2 labels per "
        "client). Ignored for synthetic, whose data is generated per client.",
    )
    dirichlet_alpha: float = Field(
        0.3, gt=0, description="Dirichlet concentration (smaller: more skew)."
    )
    shards_per_client: int = Field(2, ge=1, description="Shards per client for `shards`.")
    sizes: Literal["equal", "lognormal", "zipf"] = Field(
        "equal", description="Client dataset sizes: equal, lognormal (§11.4) or zipf (§8.4)."
    )
    size_sigma: float = Field(0.3, ge=0, description="Log-normal sigma for sizes=lognormal.")
    zipf_s: float = Field(1.2, gt=0, description="Zipf exponent for sizes=zipf.")
    min_client_samples: int = Field(
        10, ge=1, description="Smallest client training set (lognormal, zipf)."
    )
    local_test_samples: int = Field(
        200,
        ge=1,
        description="Test samples per client, drawn from the global test set with the "
        "client's label mix; they give worst-client accuracy.",
    )
    synthetic: SyntheticData = Field(default_factory=SyntheticData)


class ModelSection(Section):
    """The model every client trains."""

    name: Literal["logistic", "mlp", "cnn"] = Field(
        "logistic",
        description="logistic regression; mlp (hidden layers below, ReLU); cnn (MNIST-class: "
        "conv 5x5 32 and 64 with max-pool, FC 512, FC classes).",
    )
    hidden: list[int] = Field([200, 200], description="Hidden layer widths of the mlp.")
    zero_init: bool = Field(
        False,
        description="Start from all-zero parameters (the FedDyn synthetic setting; logistic "
        "only: a zero MLP or CNN is symmetric and never learns).",
    )

    @model_validator(mode="after")
    def _zero_init(self):
        if self.zero_init and self.name != "logistic":
            raise ValueError(
                f"zero_init is only for the logistic model: a zero-initialised {self.name} "
                "has identical hidden units and zero gradients, so it never learns"
            )
        return self


class TrainingSection(Section):
    """Rounds, local work and evaluation."""

    rounds: int = Field(100, ge=1, description="Number of communication rounds.")
    local_steps: int = Field(10, ge=1, description="Local SGD steps K per round.")
    local_epochs: float | None = Field(
        None,
        gt=0,
        description="Local work as epochs instead of steps: client i runs "
        "ceil(local_epochs * n_i / batch_size) steps (replaces local_steps when set).",
    )
    batch_size: int = Field(32, ge=1, description="Minibatch size B.")
    lr: float = Field(0.1, gt=0, description="Local learning rate at round 0.")
    lr_decay: float = Field(
        1.0, gt=0, le=1, description="Per-round learning-rate factor: lr_t = lr * lr_decay^t."
    )
    weight_decay: float = Field(0.0, ge=0, description="L2 coefficient added to the gradient.")
    clip_grad_norm: float | None = Field(
        None, gt=0, description="Clip each client's step gradient to this norm (none: off)."
    )
    clients_per_round: int = Field(10, ge=1, description="Clients selected per round, m.")
    participation: Literal["fixed", "bernoulli"] = Field(
        "fixed",
        description="fixed: clients_per_round clients a round; bernoulli: every online client "
        "takes part with participation_prob (redrawn if nobody does; FedDyn/FedDC code).",
    )
    participation_prob: float = Field(
        0.1, gt=0, le=1, description="Per-client probability for participation=bernoulli."
    )
    eval_every: int = Field(1, ge=1, description="Evaluate the global model every n rounds.")
    target_metric: Literal["accuracy", "worst_client_accuracy"] = Field(
        "accuracy", description="Metric for rounds/energy/time to target."
    )
    target_value: float | None = Field(
        None, ge=0, le=1, description="Target of target_metric, as a fraction (e.g. 0.9)."
    )
    stop_at_target: bool = Field(
        False, description="End the run at the first evaluation that reaches the target."
    )


class DeviceClass(Section):
    """One kind of edge device and its share of the population (WIRELESS.md, Devices)."""

    name: str = Field("phone", description="Label used in outputs.")
    share: float = Field(1.0, gt=0, le=1, description="Fraction of the population.")
    compute: Literal["cpu", "accelerator"] = Field(
        "cpu", description="cpu: DVFS model; accelerator: FLOP/s model."
    )
    cpu_freq_min_hz: float = Field(1.0e9, gt=0, description="CPU frequency range, low end (Hz).")
    cpu_freq_max_hz: float = Field(2.0e9, gt=0, description="CPU frequency range, high end (Hz).")
    kappa: float = Field(1e-28, gt=0, description="Effective switched capacitance (CPU model).")
    flops_per_cycle: float = Field(
        4.0, gt=0, description="FLOPs per CPU cycle; cycles/sample = 3 x forward FLOPs / this."
    )
    peak_flops: float = Field(1.0e12, gt=0, description="Accelerator peak FLOP/s.")
    efficiency: float = Field(0.3, gt=0, le=1, description="Accelerator achieved fraction.")
    active_power_w: float = Field(7.5, gt=0, description="Accelerator power while training (W).")
    tx_power_dbm: float = Field(23.0, description="Uplink transmit power (dBm).")
    rx_power_w: float = Field(0.1, ge=0, description="Power while receiving (W).")
    battery_j: float = Field(54_000.0, gt=0, description="Battery capacity (J).")
    initial_charge_min: float = Field(0.5, ge=0, le=1, description="Initial charge, low end.")
    initial_charge_max: float = Field(1.0, ge=0, le=1, description="Initial charge, high end.")
    battery_threshold: float = Field(
        0.2, ge=0, lt=1, description="Below this charge fraction the device stops taking part."
    )
    charge_power_w: float = Field(
        10.0, ge=0, description="Charging power while plugged in (W; diurnal availability)."
    )

    @model_validator(mode="after")
    def _ranges(self):
        if self.cpu_freq_min_hz > self.cpu_freq_max_hz:
            raise ValueError("cpu_freq_min_hz must not exceed cpu_freq_max_hz")
        if self.initial_charge_min > self.initial_charge_max:
            raise ValueError("initial_charge_min must not exceed initial_charge_max")
        return self


class FreeloaderSection(Section):
    """Clients that do not train but upload a fabricated update (WIRELESS.md, Freeloaders)."""

    fraction: float = Field(0.0, ge=0, lt=1, description="Fraction of the N clients.")
    behaviour: Literal["zero", "replay", "noisy"] = Field(
        "replay",
        description="zero: send the global model back; replay: the last global update again; "
        "noisy: replay plus Gaussian noise of the update's per-coordinate scale.",
    )
    noise_scale: float = Field(1.0, ge=0, description="Noise multiplier for `noisy`.")


class PopulationSection(Section):
    """The clients: how many and of which device classes."""

    size: int = Field(100, ge=1, description="Number of clients N.")
    freeloaders: FreeloaderSection = Field(default_factory=FreeloaderSection)
    device_classes: list[DeviceClass] = Field(
        default_factory=lambda: [DeviceClass()],
        min_length=1,
        description="Device classes; their shares must sum to 1.",
    )

    @model_validator(mode="after")
    def _shares(self):
        total = sum(c.share for c in self.device_classes)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"device class shares must sum to 1, they sum to {total:g}")
        names = [c.name for c in self.device_classes]
        if len(set(names)) != len(names):
            raise ValueError(f"device class names must be unique, got {names}")
        return self


class ChannelSection(Section):
    """The wireless links between clients and the base station (WIRELESS.md, Channel)."""

    snr_db: float | None = Field(
        None,
        description="A fixed uplink SNR (dB) for every client, replacing geometry and path "
        "loss; fading still applies. none: from geometry.",
    )
    downlink_snr_db: float | None = Field(
        None, description="Fixed downlink SNR (dB) when snr_db is set (default: snr_db)."
    )
    uplink_bandwidth_hz: float = Field(
        10e6, gt=0, description="Uplink bandwidth shared by the round's clients (Hz)."
    )
    downlink_bandwidth_hz: float = Field(20e6, gt=0, description="Broadcast bandwidth (Hz).")
    bs_tx_power_dbm: float = Field(30.0, description="Base-station transmit power (dBm).")
    access: Literal["fdma", "tdma", "ofdma"] = Field(
        "fdma",
        description="Uplink sharing: fdma (equal split among those sending, processor "
        "sharing), tdma (one at a time), ofdma (resource_blocks blocks).",
    )
    resource_blocks: int = Field(10, ge=1, description="OFDMA resource blocks R.")
    path_loss: Literal["macro-3gpp", "free-space", "log-distance"] = Field(
        "macro-3gpp",
        description="macro-3gpp: 128.1 + 37.6 log10(d_km) (TR 36.814); free-space; "
        "log-distance: pl0_db + 10 n log10(d/1 m).",
    )
    carrier_hz: float = Field(2.0e9, gt=0, description="Carrier frequency for free-space (Hz).")
    pl0_db: float = Field(40.0, description="Log-distance loss at 1 m (dB).")
    pl_exponent: float = Field(3.5, gt=0, description="Log-distance exponent n.")
    cell_radius_m: float = Field(500.0, gt=0, description="Clients uniform in a disc (m).")
    min_distance_m: float = Field(10.0, gt=0, description="Closest client distance (m).")
    shadowing_sigma_db: float = Field(
        8.0, ge=0, description="Log-normal shadowing sigma (dB), drawn once per client."
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
        description="Packet error per upload attempt, independent per attempt, from the "
        "fading-free SNR on the client's nominal bandwidth (B/m fdma, B tdma, B/R ofdma): "
        "rayleigh: q = 1 - exp(-(2^R - 1)/SNR) at the target spectral efficiency R; "
        "waterfall: q = 1 - exp(-m/SNR) = 1 - exp(-m N0 b/(p gain)) (Chen et al., TWC 2021).",
    )
    outage_target_se_bps_per_hz: float = Field(
        1.0, gt=0, description="Target spectral efficiency R of the rayleigh outage (bit/s/Hz)."
    )
    waterfall_m: float = Field(
        0.023, gt=0, description="Waterfall threshold m (linear; Chen et al. use 0.023)."
    )
    max_retx: int = Field(
        0,
        ge=0,
        description="Retransmissions after a failed upload attempt (each costs airtime and "
        "energy); after 1 + max_retx failures the update is dropped (dropped_outage).",
    )
    rician_k: float = Field(3.0, ge=0, description="Rician K-factor (linear).")
    noise_dbm_per_hz: float = Field(-174.0, description="Thermal noise PSD (dBm/Hz).")
    noise_figure_db: float = Field(7.0, ge=0, description="Receiver noise figure (dB).")
    bits_per_param: int = Field(32, ge=1, description="Bits per transmitted parameter.")
    header_bits: int = Field(1_000, ge=0, description="Per-message header (bits).")

    @model_validator(mode="after")
    def _radius(self):
        if self.min_distance_m >= self.cell_radius_m:
            raise ValueError("min_distance_m must be below cell_radius_m")
        return self


class AvailabilitySection(Section):
    """When clients are online (WIRELESS.md, Availability)."""

    kind: Literal["always", "bernoulli", "markov", "diurnal", "trace"] = Field(
        "always",
        description="always; bernoulli (each round offline with p_drop); markov (on/off "
        "periods with exponential durations, in simulated time); diurnal (each round online "
        "with probability clip(p + A sin(2 pi (t - phi_k)/24 h), 0, 1), charging in a daily "
        "window); trace (online intervals replayed from trace_file).",
    )
    p_drop: float = Field(0.1, ge=0, lt=1, description="Per-round offline probability.")
    mean_on_s: float = Field(1800.0, gt=0, description="Markov mean online period (s).")
    mean_off_s: float = Field(600.0, gt=0, description="Markov mean offline period (s).")
    diurnal_mean: float = Field(
        0.5, ge=0, le=1, description="Diurnal mean online probability p (fraction)."
    )
    diurnal_amplitude: float = Field(
        0.4, ge=0, le=1, description="Diurnal amplitude A of the online probability (fraction)."
    )
    diurnal_phase_h: float = Field(
        0.0,
        description="Diurnal phase phi of every client (h); the probability peaks at "
        "t = phi + 6 h.",
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
        description="Trace: CSV with columns client, start_s, end_s (online intervals, "
        "simulated s); a path relative to the working directory. Unlisted clients stay offline.",
    )
    trace_period_s: float | None = Field(
        None, gt=0, description="Trace: replay the trace every this many seconds (none: once)."
    )

    @model_validator(mode="after")
    def _trace(self):
        if self.kind == "trace" and not self.trace_file:
            raise ValueError("availability.kind=trace needs availability.trace_file")
        return self


class RoundSection(Section):
    """The protocol of one round."""

    deadline_s: float | None = Field(
        None,
        gt=0,
        description="Uploads not in by this time after the round starts are "
        "dropped (none: wait for all).",
    )
    min_clients: int = Field(
        1, ge=1, description="Fewer arrivals than this: the round fails, the model stays."
    )
    server_time_s: float = Field(0.0, ge=0, description="Server aggregation time (s).")
    interval_s: float | None = Field(
        None,
        gt=0,
        description="Round r starts no earlier than r x interval_s of simulated time (s), so "
        "runs can span a day (none: back to back).",
    )
    overcommit: float = Field(
        1.0,
        ge=1,
        description="Over-commit factor f: select ceil(f m) clients, keep the first m arrivals "
        "and discard the rest (Bonawitz et al., MLSys 2019).",
    )
    idle_wait_s: float = Field(
        60.0,
        gt=0,
        description="When no client is online, the server waits this long (s) and "
        "counts a failed round.",
    )


class TopologySection(Section):
    """Base stations, association and backhaul (WIRELESS.md, Topology); default one cell."""

    layout: Literal["single", "hexagonal", "grid", "positions"] = Field(
        "single",
        description="single: one base station at the origin; hexagonal: `cells` sites on a "
        "hexagonal grid (centre, then rings); grid: `cells` sites on a square grid; "
        "positions: the sites in bs_positions_m.",
    )
    cells: int = Field(1, ge=1, description="Number of base stations (hexagonal, grid).")
    inter_site_distance_m: float = Field(
        500.0, gt=0, description="Distance between neighbouring base stations (m)."
    )
    bs_positions_m: list[list[float]] | None = Field(
        None, description="Base-station (x, y) positions (m) for layout=positions."
    )
    client_share_per_cell: list[float] | None = Field(
        None,
        description="Fraction of clients placed around each base station (fractions summing "
        "to 1; none: equal). Each client is then served by its strongest station.",
    )
    backhaul_capacity_bps: float | list[float] | None = Field(
        None,
        description="Capacity of each base station's link to the server (bit/s; one value or "
        "one per cell; none: unlimited). Adds bits/capacity to every transfer crossing it.",
    )
    backhaul_latency_s: float | list[float] = Field(
        0.0, description="Latency of each backhaul link (s; one value or one per cell)."
    )

    @model_validator(mode="after")
    def _cells(self):
        n = self.n_cells
        if self.layout == "positions":
            if not self.bs_positions_m or any(len(p) != 2 for p in self.bs_positions_m):
                raise ValueError("layout=positions needs bs_positions_m: a list of [x, y] (m)")
        for name in ("client_share_per_cell", "backhaul_capacity_bps", "backhaul_latency_s"):
            value = getattr(self, name)
            if isinstance(value, list) and len(value) != n:
                raise ValueError(f"{name} has {len(value)} values for {n} cells")
            values = value if isinstance(value, list) else [value]
            if name == "backhaul_capacity_bps" and any(v is not None and v <= 0 for v in values):
                raise ValueError(f"{name} must be > 0 bit/s, got {value}")
            if name == "backhaul_latency_s" and any(v < 0 for v in values):
                raise ValueError(f"{name} must be >= 0 s, got {value}")
        share = self.client_share_per_cell
        if share is not None and (min(share) < 0 or abs(sum(share) - 1) > 1e-6):
            raise ValueError(f"client_share_per_cell must be >= 0 and sum to 1, got {share}")
        return self

    @property
    def n_cells(self) -> int:
        if self.layout == "single":
            return 1
        if self.layout == "positions":
            return len(self.bs_positions_m or [])
        return self.cells


class OutputSection(Section):
    """Optional outputs of a run."""

    events: bool = Field(
        False,
        description="Write events.jsonl: every transfer and computation (round, client, "
        "kind, start and end in simulated s, energy in J, bits).",
    )
    timeline_rounds: list[int] = Field(
        [],
        description="Rounds (0-based) to draw as timeline_round_<r>.png: per client, "
        "download, compute, upload and waiting against simulated time (s).",
    )


class Scenario(Section):
    """A whole scenario: what is simulated and learnt, from one seed."""

    name: str = Field("custom", description="Scenario name, used in output folder names.")
    description: str = Field("", description="One line shown by `fedjoule scenarios`.")
    seed: int = Field(0, ge=0, description="The one seed every random stream derives from.")
    dataset: DatasetSection = Field(default_factory=DatasetSection)
    model: ModelSection = Field(default_factory=ModelSection)
    algorithm: AlgorithmSection = Field(default_factory=FedAvgConfig)
    training: TrainingSection = Field(default_factory=TrainingSection)
    population: PopulationSection = Field(default_factory=PopulationSection)
    channel: ChannelSection = Field(default_factory=ChannelSection)
    availability: AvailabilitySection = Field(default_factory=AvailabilitySection)
    round: RoundSection = Field(default_factory=RoundSection)
    topology: TopologySection = Field(default_factory=TopologySection)
    output: OutputSection = Field(default_factory=OutputSection)

    @model_validator(mode="after")
    def _consistent(self):
        if self.training.clients_per_round > self.population.size:
            raise ValueError(
                f"training.clients_per_round ({self.training.clients_per_round}) exceeds "
                f"population.size ({self.population.size})"
            )
        if self.round.min_clients > self.training.clients_per_round:
            raise ValueError(
                f"round.min_clients ({self.round.min_clients}) exceeds "
                f"training.clients_per_round ({self.training.clients_per_round})"
            )
        return self
