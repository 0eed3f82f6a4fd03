"""The run sections (outputs, tracking, protocol, compression), the checks across
sections, and the Scenario."""

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fedjoule.algorithms.options import AlgorithmConfig, FedAvgConfig
from fedjoule.algorithms.registry import (
    AlgorithmSection,
    PluginSource,
    algorithm_class,
    compression_refusal_of,
    section_model,
)
from fedjoule.errors import FedjouleError
from fedjoule.plugins import PluginError, plugin_dirs
from fedjoule.scenarios.schema.base import MAX_CLIENTS, MAX_ROUNDS, MAX_SEED, Int, Section
from fedjoule.scenarios.schema.devices import PopulationSection
from fedjoule.scenarios.schema.learning import DatasetSection, ModelSection, TrainingSection
from fedjoule.scenarios.schema.network import (
    AvailabilitySection,
    ChannelSection,
    EnergySection,
    RoundSection,
    TopologySection,
)
from fedjoule.scenarios.schema.policy import PolicySection, _policy_scenario
from fedjoule.simulator import protocols
from fedjoule.tracking.registry import tracker_class
from fedjoule.tracking.session import check_tracking_folder


class OutputSection(Section):
    """Optional outputs of a run."""

    events: bool = Field(
        False,
        description="Write events.jsonl: every transfer and computation (round, client, "
        "kind, start and end in simulated s, energy in J, bits).",
    )
    timeline_rounds: list[Annotated[Int, Field(ge=0, lt=MAX_ROUNDS)]] = Field(
        [],
        max_length=100,
        description="Rounds (0-based) to draw as `timeline_round_<r>.png`: per client, "
        "download, compute, upload and waiting against simulated time (s); at most 100.",
    )


TRACKER_NAME = r"^([A-Za-z0-9_][A-Za-z0-9_.-]*|[^:]+:[A-Za-z_][A-Za-z0-9_]*)$"


class TrackingSection(Section):
    """Experiment tracking to TensorBoard, MLflow, W&B (offline) or CSV (docs/tracking.md).
    The scenario, every rounds.csv column per round, the summary and the plots are written
    as the run goes. Tracking changes no result; the default tracks nothing."""

    backends: list[Annotated[str, Field(min_length=1, max_length=4096, pattern=TRACKER_NAME)]] = (
        Field(
            [],
            max_length=16,
            description="Trackers: tensorboard (pip install 'fedjoule[tensorboard]'), mlflow "
            "(a local file store; 'fedjoule[mlflow]'), wandb (offline; 'fedjoule[wandb]'), csv "
            "(no extra), a name an installed package or Python code registered (kind tracker), "
            "or a plug-in class 'file.py:ClassName' (fedjoule.tracking.base.Tracker). Empty: "
            "no tracking. The command line's --track sets it.",
        )
    )
    folder: str = Field(
        "tracking",
        min_length=1,
        max_length=4096,
        description="Where the trackers write, relative to the run's folder (a sweep's or "
        "plan's runs: to the sweep's or plan's folder, so that they nest under its parent "
        "run); an absolute path gathers the runs of many commands in one place.",
    )
    experiment: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="MLflow experiment and W&B project name (None: the scenario's name; a "
        "sweep's or plan's runs: its folder's name).",
    )
    sources: dict[str, PluginSource] = Field(
        {},
        max_length=16,
        description="Recorded when loaded: each plug-in tracker's file (or module) and "
        "SHA-256, by its spec.",
    )

    @model_validator(mode="after")
    def _writable_folder(self):
        """An absolute folder is checked here, by validate as by run (a relative one, under
        the run's folder, by run before it makes that folder)."""
        try:
            check_tracking_folder(self, None)
        except FedjouleError as exc:
            message = str(exc).removeprefix("tracking.")
            raise PydanticCustomError("cross_field", "{message}", {"message": message}) from None
        return self

    @model_validator(mode="after")
    def _resolve_backends(self):
        seen, sources = set(), {}
        for name in self.backends:
            if name in seen:
                message = f"backends: {name!r} is named twice"
                raise PydanticCustomError("cross_field", "{message}", {"message": message})
            seen.add(name)
            recorded = self.sources.get(name)
            try:
                _, source = tracker_class(
                    name, plugin_dirs(), recorded.model_dump() if recorded else None
                )
            except PluginError as exc:
                message = f"backends: {exc}"
                raise PydanticCustomError(
                    "cross_field", "{message}", {"message": message}
                ) from None
            if source:
                sources[name] = PluginSource(**source)
        self.sources = sources
        return self


def _protocol_fields(v) -> Iterator[tuple[str, str]]:
    fields_of = protocols.PROTOCOL_FIELDS  # which fields each kind reads (others stay none)
    used = fields_of[v.kind]
    for name in sorted({f for fields in fields_of.values() for f in fields} - set(used)):
        if getattr(v, name) is not None:
            kinds = [k for k, fields in fields_of.items() if name in fields]
            yield (
                name,
                f"{name} applies to kind {' or '.join(kinds)}, not to kind {v.kind} "
                "(leave it out or set it to null)",
            )


class ProtocolSection(Section):
    """How the server dispatches and aggregates (docs/protocols.md); default sync rounds.
    Fields a kind does not read stay null; null fields a kind reads take the defaults named."""

    kind: Literal[protocols.KINDS] = Field(
        "sync",
        description="sync: rounds (the rest of this file); async: FedAsync (Xie, Koyejo, "
        "Gupta 2019), the server mixes each arriving model in; buffered: FedBuff (Nguyen et "
        "al., AISTATS 2022), the server applies the mean of every buffer_size arrived "
        "deltas; hierarchical: HierFAVG (Liu et al., ICC 2020), an edge server per cell "
        "aggregates every round and the cloud every edge_rounds rounds.",
    )
    concurrency: Int | None = Field(
        None,
        ge=1,
        le=MAX_CLIENTS,
        description="async, buffered: clients training at any time (null: "
        "training.clients_per_round; at most population.size).",
    )
    mixing: float | None = Field(
        None,
        gt=0,
        le=1,
        description="async: the mixing weight alpha in w <- (1 - alpha s) w + alpha s w_k "
        "(null: 0.6, within the paper's 0.4-0.9 grid).",
    )
    staleness: Literal["constant", "polynomial", "hinge"] | None = Field(
        None,
        description="async, buffered: the staleness weight s(t) of an update t versions old: "
        "constant 1; polynomial (t + 1)^-a; hinge 1 for t <= b, else 1 / (a (t - b) + 1) "
        "(FedAsync's three; null: polynomial, with a = 0.5 FedBuff's 1 / sqrt(1 + t)).",
    )
    staleness_a: float | None = Field(
        None,
        ge=0,
        le=1_000,
        description="a of polynomial and hinge (null: 0.5 polynomial, "
        "10 hinge, FedAsync's settings).",
    )
    staleness_b: float | None = Field(
        None, ge=0, le=MAX_ROUNDS, description="b of hinge, in versions (null: 4, FedAsync's)."
    )
    buffer_size: Int | None = Field(
        None,
        ge=1,
        le=MAX_CLIENTS,
        description="buffered: arrivals per aggregation K, at most protocol.concurrency "
        "(null: training.clients_per_round; FedBuff uses 10).",
    )
    server_lr: float | None = Field(
        None, gt=0, le=1_000, description="buffered: the server learning rate (null: 1)."
    )
    edge_rounds: Int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="hierarchical: client rounds each edge server aggregates between two "
        "cloud aggregations, kappa_2 of HierFAVG (null: 2).",
    )
    backhaul_energy_j_per_bit: float | None = Field(
        None,
        ge=0,
        le=1,
        description="hierarchical: energy of a bit crossing an edge server's backhaul to or "
        "from the cloud (J/bit; null: 0, time only), charged to its own ledger column "
        "energy_backhaul_j.",
    )

    cross_checks = (_protocol_fields,)

    @field_validator("kind", mode="wrap")
    @classmethod
    def _registered_kind(cls, value, handler):
        """A kind registered from outside the package (protocols.register) is a kind too;
        an unknown one is refused as the built-in list refuses it, naming every kind."""
        if isinstance(value, str) and value in protocols.DECLARATIONS:
            return value
        if len(protocols.DECLARATIONS) == len(protocols.KINDS):
            return handler(value)
        *kinds, last = map(repr, protocols.DECLARATIONS)
        expected = f"{', '.join(kinds)} or {last}"
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": expected}
        )

    def value(self, name: str):
        """A field's value, or its default when null (docs/protocols.md)."""
        value = getattr(self, name)
        if value is not None:
            return value
        return protocols.default(self, name)


def _protocol_algorithm(v) -> Iterator[tuple[str, str]]:
    kind, algorithm = v.protocol.kind, v.algorithm
    if kind == "sync":
        return
    algorithm = getattr(algorithm, "_data", algorithm)  # the raw view of a file with problems
    raw = isinstance(algorithm, dict)
    name = algorithm.get("name", "fedavg") if raw else algorithm.name
    declared = protocols.DECLARATIONS[kind]  # (the algorithms it runs, why not the others)
    reason = declared.refused.get(name)
    allowed = declared.algorithms  # None: every algorithm but the refused ones
    if reason is None and allowed is not None and name not in allowed and not raw:
        reason = _plugin_reason(algorithm)
    if reason:
        allowed = ", ".join(allowed or ("the others",))
        yield (
            "protocol.kind",
            f"protocol.kind={kind} does not run algorithm.name={name}: {reason}; allowed: "
            f"{allowed} and plug-ins that upload one model and keep no client state",
        )


def _plugin_reason(section) -> str | None:
    """Why a plug-in algorithm cannot run outside sync rounds (None: it can)."""
    try:
        cls, _ = algorithm_class(section)
    except Exception:  # noqa: BLE001 - the algorithm section reports its own problem
        return None
    if cls.client_state:
        return f"it keeps client state ({', '.join(cls.client_state)})"
    if cls.needs_probe:
        return "it needs a loss-probe set"
    if cls.uplink_vectors != 1 or cls.downlink_vectors != 1:
        return "it does not exchange exactly one model each way"
    return None


def _protocol_round(v) -> Iterator[tuple[str, str]]:
    p = v.protocol
    if p.kind != "sync":
        for direction in ("uplink", "downlink"):
            kind = getattr(v.compression, direction).kind
            if kind != "none":
                yield (
                    f"compression.{direction}.kind",
                    f"compression.{direction}.kind={kind} is not combined with "
                    f"protocol.kind={p.kind} yet (its client and server state assume sync "
                    "rounds; docs/protocols.md): use none, or protocol.kind=sync",
                )
    if p.kind not in ("async", "buffered"):
        return
    if v.round.overcommit != 1:
        yield (
            "round.overcommit",
            f"round.overcommit applies to sync and hierarchical "
            f"rounds, not to protocol.kind={p.kind} (concurrency sets what is in flight)",
        )
    if v.training.participation != "fixed":
        yield (
            "training.participation",
            f"protocol.kind={p.kind} dispatches a client to each "
            "free slot: training.participation must be fixed",
        )
    if v.round.interval_s is not None:
        yield (
            "round.interval_s",
            f"protocol.kind={p.kind} has no rounds to schedule: round.interval_s must be null",
        )
    n = v.population.size
    if p.concurrency is not None and p.concurrency > n:
        yield (
            "protocol.concurrency",
            f"protocol.concurrency ({p.concurrency}) exceeds population.size ({n})",
        )
    m = v.training.clients_per_round
    in_flight, buffer = min(p.concurrency or m, n), p.buffer_size or m
    if p.kind == "buffered" and buffer > in_flight:
        shown = f"{buffer}" if p.buffer_size else f"null: training.clients_per_round, {buffer}"
        yield (
            "protocol.buffer_size",
            f"protocol.buffer_size ({shown}) exceeds the clients "
            f"in flight ({in_flight}, protocol.concurrency): a version would wait for more "
            "arrivals than there are clients training at once; at most that many",
        )


def _clients_per_round(v) -> Iterator[tuple[str, str]]:
    m, n = v.training.clients_per_round, v.population.size
    if m > n:
        yield (
            "training.clients_per_round",
            f"training.clients_per_round ({m}) exceeds population.size ({n})",
        )


def _min_clients(v) -> Iterator[tuple[str, str]]:
    k, m = v.round.min_clients, v.training.clients_per_round
    if k > m:
        yield (
            "round.min_clients",
            f"round.min_clients ({k}) exceeds training.clients_per_round ({m})",
        )


def _interference(v) -> Iterator[tuple[str, str]]:
    channel, topology = v.channel, v.topology
    if v.population.capacity_trace is not None and (
        channel.trace is not None or channel.interference == "cochannel"
    ):
        yield (
            "population.capacity_trace",
            "population.capacity_trace sets every link's rate; it does not go with "
            "channel.trace or channel.interference=cochannel",
        )
    if channel.interference == "cochannel" and v.protocol.kind != "sync":
        yield (
            "channel.interference",
            f"channel.interference=cochannel is for protocol.kind=sync rounds (got "
            f"{v.protocol.kind}): set interference none or protocol.kind sync",
        )
    if channel.trace is not None and channel.interference == "cochannel":
        yield (
            "channel.trace",
            "channel.trace and channel.interference=cochannel do not go together (a measured "
            "rate has no SINR to lower); use one of them",
        )
    if channel.trace is not None and channel.trace.uplink and channel.rate == "fixed":
        yield (
            "channel.trace",
            "channel.trace.uplink needs channel.rate=adaptive (the trace sets the rate)",
        )
    if topology.reuse_factor != 1 and topology.layout != "hexagonal":
        yield (
            "topology.reuse_factor",
            f"topology.reuse_factor={topology.reuse_factor} needs layout hexagonal (the "
            f"reuse pattern is the hexagonal one), got layout {topology.layout}",
        )
    if channel.interference == "cochannel" and channel.snr_db is not None:
        yield (
            "channel.interference",
            "channel.interference=cochannel needs geometry (the gains to the other cells); "
            f"unset channel.snr_db (got {channel.snr_db:g})",
        )


def _power_control_channel(v) -> Iterator[tuple[str, str]]:
    names = [c.name for c in v.population.device_classes if c.radio.power_control == "fractional"]
    if not names:
        return
    who = f"radio.power_control=fractional (device class {', '.join(map(repr, names))})"
    channel = v.channel
    if channel.snr_db is not None:
        yield (
            "channel.snr_db",
            f"{who} needs geometry (each client's path loss sets its power); unset "
            f"channel.snr_db (got {channel.snr_db:g})",
        )
    if channel.trace is not None and channel.trace.uplink is not None:
        yield (
            "channel.trace.uplink",
            f"{who} needs the channel model's uplink rates (a traced rate is measured, so "
            "a lower power would save energy at no cost in rate); remove channel.trace.uplink",
        )
    if v.population.capacity_trace is not None:
        yield (
            "population.capacity_trace",
            f"{who} needs the channel model's uplink rates (the capacity trace sets every "
            "link's rate, so a lower power would save energy at no cost in rate); remove "
            "population.capacity_trace",
        )


def _compression_options(v) -> Iterator[tuple[str, str]]:
    needs = {"qsgd": "levels", "topk": "fraction"}
    for name in ("levels", "fraction"):
        if getattr(v, name) is not None and needs.get(v.kind) != name:
            yield name, f"{name} is only used with kind={'qsgd' if name == 'levels' else 'topk'}"
    if v.kind in needs and getattr(v, needs[v.kind]) is None:
        yield needs[v.kind], f"kind={v.kind} needs {needs[v.kind]}"
    if v.error_feedback and v.kind not in ("topk", "sign"):
        yield "error_feedback", f"error_feedback is only used with kind=topk or sign, not {v.kind}"


class LinkCompression(Section):
    """How one direction's vectors are encoded (docs/compression.md)."""

    kind: Literal["none", "qsgd", "topk", "sign"] = Field(
        "none",
        description="none: every value at channel.bits_per_param; qsgd: stochastic "
        "quantisation to `levels` levels of |v| (Alistarh et al., NeurIPS 2017), 32 + P "
        "ceil(log2(2 levels + 1)) bits; topk: the k = ceil(fraction P) largest-magnitude "
        "entries at bits_per_param plus min(k ceil(log2 P), P) bits of positions (Stich et "
        "al., NeurIPS 2018); sign: |v|_1 / P sign(v), 32 + P bits (Karimireddy et al., ICML "
        "2019).",
    )
    levels: Int | None = Field(
        None, ge=1, le=65_536, description="kind=qsgd: quantisation levels s (1 to 65,536)."
    )
    fraction: float | None = Field(
        None, gt=0, le=1, description="kind=topk: share of the entries kept, in (0, 1]."
    )
    error_feedback: bool = Field(
        False,
        description="kind=topk or sign, uplink: each client keeps the residual e_i of what "
        "compression left out and adds it to its next update (error feedback).",
    )

    cross_checks = (_compression_options,)


def _downlink_feedback(v) -> Iterator[tuple[str, str]]:
    if v.downlink.error_feedback:
        yield (
            "downlink.error_feedback",
            "error_feedback is an uplink option: a compressed downlink already carries what "
            "it left out into the next download (each client's copy of the model is the "
            "reference, docs/compression.md)",
        )


class CompressionSection(Section):
    """Update compression the learning feels: the server aggregates what it decodes
    (docs/compression.md)."""

    uplink: LinkCompression = Field(
        default_factory=LinkCompression, description="The clients' uploads."
    )
    downlink: LinkCompression = Field(
        default_factory=LinkCompression,
        description="The broadcast: each client receives the compressed difference between "
        "the model it starts from and the copy it holds.",
    )

    cross_checks = (_downlink_feedback,)


def _compression_algorithm(v) -> Iterator[tuple[str, str]]:
    section = v.compression
    directions = [d for d in ("uplink", "downlink") if getattr(section, d).kind != "none"]
    if not directions:
        return
    algorithm = v.algorithm
    if not isinstance(algorithm, AlgorithmConfig):  # the raw view of a file with problems
        raw = getattr(algorithm, "_data", algorithm)
        algorithm = section_model(raw).model_validate(raw)
    for direction in directions:
        reason = compression_refusal_of(algorithm, direction)
        if reason:
            yield (
                f"compression.{direction}.kind",
                f"compression.{direction}.kind={getattr(section, direction).kind} cannot be "
                f"used with algorithm {algorithm.name!r}: {reason}",
            )


class Scenario(Section):
    """A whole scenario: what is simulated and learnt, from one seed."""

    name: str = Field(
        "custom",
        min_length=1,
        max_length=200,
        description="Scenario name, used in output folder names.",
    )
    description: str = Field(
        "", max_length=2_000, description="One line shown by `fedjoule scenarios`."
    )
    seed: Int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="The one seed every random stream derives from (0 to 2^63 - 1).",
    )
    dataset: DatasetSection = Field(default_factory=DatasetSection)
    model: ModelSection = Field(default_factory=ModelSection)
    algorithm: AlgorithmSection = Field(default_factory=FedAvgConfig)
    training: TrainingSection = Field(default_factory=TrainingSection)
    population: PopulationSection = Field(default_factory=PopulationSection)
    channel: ChannelSection = Field(default_factory=ChannelSection)
    availability: AvailabilitySection = Field(default_factory=AvailabilitySection)
    round: RoundSection = Field(default_factory=RoundSection)
    topology: TopologySection = Field(default_factory=TopologySection)
    energy: EnergySection = Field(default_factory=EnergySection)
    output: OutputSection = Field(default_factory=OutputSection)
    compression: CompressionSection = Field(default_factory=CompressionSection)
    protocol: ProtocolSection = Field(default_factory=ProtocolSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    policy: PolicySection = Field(default_factory=PolicySection)

    cross_checks = (
        _clients_per_round,
        _min_clients,
        _compression_algorithm,
        _protocol_algorithm,
        _protocol_round,
        _interference,
        _power_control_channel,
        _policy_scenario,
    )
