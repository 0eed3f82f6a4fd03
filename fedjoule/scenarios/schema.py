"""The scenario schema: every field a scenario file may set, its unit, default and range.

Each section is a pydantic model with extra="forbid", so a misspelt field is an
error. Field descriptions are the documentation: docs/scenario-reference.md is
generated from them (`fedjoule reference`).

Values are checked strictly: numbers must be finite (no NaN or inf), true/false is not
a number, text is not a number, and integer fields take whole numbers only (1.0e6 is
read as 1000000, 2.5 is an error). Every count, size and time has an upper bound far
above any real deployment, so that no legal scenario exhausts memory or runs forever.

Checks that relate several fields (cross-field checks) are small functions listed in
each section's `cross_checks`; they run as a model validator, and
`fedjoule.scenarios.loading.validate` also runs them on a partly invalid file so that
one pass reports every problem.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
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
    section_model,
)
from fedjoule.channel.trace import PACKAGE_PREFIX, load_section, trace_path
from fedjoule.devices.dvfs import cpu_power_w, freq_range_hz, out_of_table, training_cluster
from fedjoule.devices.fedscale import check_file, is_fedscale_file
from fedjoule.devices.library import merged_class, unknown_profile_message
from fedjoule.errors import FedjouleError
from fedjoule.plugins import PluginError, Unchecked, load_spec, plugin_dirs
from fedjoule.simulator import protocols
from fedjoule.tracking.registry import tracker_class
from fedjoule.tracking.session import check_tracking_folder

# Upper bounds (see each field's description for why).
MAX_CLIENTS = 10_000_000  # the system engine ran 1,000,000 devices in 1 GB; 10x that fits
MAX_ROUNDS = 1_000_000  # papers run <= 10,000 rounds; rounds.csv stays < 1 GB
MAX_TIME_S = 1.0e9  # about 32 years of simulated time: no round, period or wait is longer
MAX_CELLS = 1_000  # a large city's sites; client-to-cell association is N x cells
MAX_DB = 300.0  # any dB/dBm value: keeps 10^(x/10) and its square finite
MAX_SEED = 2**63 - 1  # fits a signed 64-bit integer in every output and tool


def _whole_number(value):
    """Integer fields take whole-number floats (YAML reads 1.0e6 as a float); a fractional,
    non-finite or boolean value is left for strict validation to reject."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


Int = Annotated[int, BeforeValidator(_whole_number)]
"""An integer field: whole numbers (also written as 1.0e6), never true/false."""


class Section(BaseModel):
    """A scenario section: unknown fields are errors, numbers are finite, types strict."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    # Checks over several fields of the section: each takes the section (or a view of its
    # raw values that raises fedjoule.scenarios.schema.Invalid for a value that did not
    # validate) and yields (field name, message) for each problem.
    cross_checks: ClassVar[tuple[Callable[..., Iterator[tuple[str, str]]], ...]] = ()

    @model_validator(mode="after")
    def _cross_field(self):
        problems = [
            f"{field}: {message}"
            for check in type(self).cross_checks
            for field, message in check(self)
        ]
        if problems:
            raise PydanticCustomError("cross_field", "{message}", {"message": "; ".join(problems)})
        return self


class Invalid(Exception):  # noqa: N818 - a signal, not an error
    """A cross-field check needs a value that did not validate: the check is skipped."""


class SyntheticData(Section):
    """The FedDyn/FedDC synthetic logistic generator (docs/datasets.md)."""

    dim: Int = Field(
        30, ge=1, le=100_000, description="Feature dimension d (at most 100,000 per sample)."
    )
    classes: Int = Field(5, ge=2, le=1_000, description="Number of classes C.")
    avg_samples: Int = Field(
        200,
        ge=1,
        le=1_000_000,
        description="Mean training samples per client (at most 1,000,000: the data of all "
        "clients is generated in memory).",
    )
    alpha: float = Field(
        1.0, ge=0, le=1_000, description="Spread of the per-client labelling models."
    )
    beta: float = Field(1.0, ge=0, le=1_000, description="Spread of the per-client feature means.")
    size_sigma: float = Field(
        0.0,
        ge=0,
        le=3,
        description="Log-normal sigma of client sizes (0: all equal). At most 3: sizes are "
        "not normalised, and sigma 3 already gives clients 1,000 times the mean.",
    )
    iid_sol: bool = Field(False, description="One labelling model shared by all clients.")
    iid_dat: bool = Field(False, description="Zero feature means for every client.")
    test_samples: Int = Field(
        100,
        ge=1,
        le=100_000,
        description="Held-out test samples per client, from its own distribution.",
    )


def resolve_plugin(section, paths: tuple[str, ...] = ()) -> None:
    """Load a section's `factory` and record its source; make its path fields (`root`,
    `weights`) absolute. A problem is reported at the field that names it."""
    field = "factory"
    try:
        for field in paths:
            value = getattr(section, field)
            if value is not None:
                setattr(section, field, str(_found(value)))
        field = "factory"
        if section.factory is not None:
            recorded = section.source.model_dump() if section.source else None
            target, source = load_spec(section.factory, plugin_dirs(), recorded)
            if not isinstance(target, Unchecked) and not callable(target):
                raise PluginError(f"{section.factory!r} is not a function")
            section.source = PluginSource(**source)
    except PluginError as exc:
        message = f"{field}: {exc}"
        raise PydanticCustomError("cross_field", "{message}", {"message": message}) from None


def _found(value: str):
    """A file or folder path, relative to the scenario file's folder, then the working one."""
    path = Path(value).expanduser()
    if path.is_absolute():
        if not _exists(path):
            raise PluginError(f"{value} does not exist")
        return path
    folders = dict.fromkeys((*plugin_dirs(), Path.cwd()))  # (once when they are one)
    for folder in folders:
        if _exists(folder / path):
            return (folder / path).resolve()
    tried = ", ".join(str(f / path) for f in folders)
    raise PluginError(f"{value} not found (looked at {tried})")


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # e.g. a name too long for the file system: not there
        return False


def _data_file(value: str | None) -> str | None:
    """A data file field (a trace) as the absolute path _found resolves it to, relative to
    the scenario file's folder, then the working one; a packaged `package:NAME` unchanged."""
    if value is None or value.startswith(PACKAGE_PREFIX):
        return value
    return str(_found(value))


PluginSpec = Annotated[
    str,
    Field(
        min_length=3,
        max_length=4096,
        pattern=r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$",
        description="'file.py:name' (relative to the scenario file, then the working "
        "folder) or 'package.module:name'.",
    ),
]
Options = Annotated[
    dict[str, object],
    Field(max_length=1_000, description="Keyword arguments passed to the plug-in."),
]

DATASET_NAMES = (
    "synthetic",
    "mnist",
    "fashion-mnist",
    "kmnist",
    "emnist",
    "cifar10",
    "cifar100",
    "svhn",
    "adult",
    "torchvision",
    "image-folder",
    "text",
    "custom",
)


def _factory_field(v, section: str) -> Iterator[tuple[str, str]]:
    """`factory` is set exactly for name custom."""
    if v.name == "custom" and v.factory is None:
        yield "factory", f"{section}.name custom needs factory: 'file.py:function'"
    if v.name != "custom" and v.factory is not None:
        yield "factory", f"factory is for {section}.name custom, not {v.name}"


def _dataset_plugin_fields(v) -> Iterator[tuple[str, str]]:
    yield from _factory_field(v, "dataset")
    if v.name == "torchvision" and v.class_ is None:
        yield "class", "dataset.name torchvision needs class: e.g. CIFAR100"
    if v.name in ("image-folder", "text") and v.root is None:
        what = "a folder of class folders" if v.name == "image-folder" else "a text file"
        yield "root", f"dataset.name {v.name} needs root: {what}"
    if v.partition == "natural" and v.name not in ("custom", "text"):
        yield (
            "partition",
            "partition natural needs a dataset with a client per sample (custom or text)",
        )


class DatasetSection(Section):
    """Which data, and how it is split among the clients."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    name: Literal[DATASET_NAMES] = Field(  # type: ignore[valid-type]
        "synthetic",
        description="Dataset: synthetic (generated); mnist, fashion-mnist, kmnist, emnist, "
        "cifar10, cifar100, svhn (torchvision); adult (UCI); torchvision (any torchvision "
        "classification dataset, `class`); image-folder (`root`: one folder per class); "
        "text (`root`: a plain text file, next-character prediction); custom (`factory`).",
    )
    partition: Literal["iid", "dirichlet", "shards", "natural"] = Field(
        "iid",
        description="Label split: iid, dirichlet label skew (docs/datasets.md), shards (2 labels "
        "per client), or natural (the dataset's own client of each sample: a custom factory's "
        "client ids, text speakers or chunks). Ignored for synthetic, whose data is "
        "generated per client.",
    )
    dirichlet_alpha: float = Field(
        0.3, gt=0, le=1e6, description="Dirichlet concentration (smaller: more skew)."
    )
    shards_per_client: Int = Field(2, ge=1, le=1_000, description="Shards per client for `shards`.")
    sizes: Literal["equal", "lognormal", "zipf"] = Field(
        "equal",
        description="Client dataset sizes: equal, lognormal or zipf "
        "(docs/datasets.md#client-sizes).",
    )
    size_sigma: float = Field(0.3, ge=0, le=10, description="Log-normal sigma for sizes=lognormal.")
    zipf_s: float = Field(
        1.2,
        gt=0,
        le=10,
        description="Zipf exponent for sizes=zipf (at most 10: rank^-s stays above zero).",
    )
    min_client_samples: Int = Field(
        10, ge=1, le=1_000_000, description="Smallest client training set (lognormal, zipf)."
    )
    local_test_samples: Int = Field(
        200,
        ge=1,
        le=100_000,
        description="Test samples per client, drawn from the global test set with the "
        "client's label mix; they give worst-client accuracy.",
    )
    synthetic: SyntheticData = Field(default_factory=SyntheticData)
    class_: str | None = Field(
        None,
        alias="class",
        min_length=1,
        max_length=200,
        description="torchvision: the dataset class, e.g. CIFAR100, FashionMNIST, STL10.",
    )
    root: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="image-folder: the folder of class folders; text: the text file. "
        "Relative to the scenario file's folder, then the working folder.",
    )
    image_size: Int | None = Field(
        None,
        ge=1,
        le=4096,
        description="image-folder and torchvision: resize every image to image_size x "
        "image_size (None: all images must already share one size).",
    )
    sequence_length: Int = Field(
        80, ge=2, le=10_000, description="text: characters per sample (LEAF Shakespeare: 80)."
    )
    text_clients: Literal["speaker", "chunk"] = Field(
        "speaker",
        description="text with partition natural: one client per speaker (lines 'NAME: "
        "text' or a play's upper-case speaker lines) or per equal chunk of the file.",
    )
    factory: PluginSpec | None = Field(
        None,
        description="custom: 'file.py:function' returning train and test tensors (see "
        "docs/datasets.md).",
    )
    options: Options = Field(
        {}, description="Keyword arguments of the custom factory or the torchvision class."
    )
    source: PluginSource | None = Field(
        None, description="Recorded when loaded: the factory file's path and SHA-256."
    )

    cross_checks = (_dataset_plugin_fields,)

    @model_validator(mode="after")
    def _load_plugin(self):
        resolve_plugin(self, ("root",))
        return self


def _zero_init(v) -> Iterator[tuple[str, str]]:
    if v.zero_init and v.name != "logistic":
        yield (
            "zero_init",
            f"zero_init is only for the logistic model: a zero-initialised {v.name} has "
            "identical hidden units and zero gradients, so it never learns",
        )


def _model_plugin_fields(v) -> Iterator[tuple[str, str]]:
    yield from _factory_field(v, "model")
    if v.name == "torchvision" and v.arch is None:
        yield "arch", "model.name torchvision needs arch: e.g. mobilenet_v3_small"
    if v.name not in ("torchvision", "custom") and v.options:
        yield "options", f"options are for custom and torchvision models, not {v.name}"


class ModelSection(Section):
    """The model every client trains."""

    name: Literal["logistic", "mlp", "cnn", "resnet18", "char-lstm", "torchvision", "custom"] = (
        Field(
            "logistic",
            description="logistic regression; mlp (hidden layers below, ReLU); cnn (MNIST-class: "
            "conv 5x5 32 and 64 with max-pool, FC 512, FC classes); resnet18 (CIFAR-style 3x3 "
            "stem, `norm`); char-lstm (embedding, LSTM, linear head: next-character "
            "prediction); torchvision (`arch`); custom (`factory`).",
        )
    )
    hidden: list[Annotated[Int, Field(ge=1, le=10_000)]] = Field(
        [200, 200],
        max_length=32,
        description="Hidden layer widths of the mlp: at most 32 layers of 1 to 10,000 units "
        "(a 10,000 x 10,000 layer is already 100 million parameters per client copy).",
    )
    zero_init: bool = Field(
        False,
        description="Start from all-zero parameters (the FedDyn synthetic setting; logistic "
        "only: a zero MLP or CNN is symmetric and never learns).",
    )
    norm: Literal["group", "batch", "none"] = Field(
        "group",
        description="resnet18's normalisation: group norm (FedDC's ResNet-18; the usual "
        "choice in FL, Hsieh et al. 2020), batch norm, or none.",
    )
    norm_groups: Int = Field(
        2, ge=1, le=64, description="Groups of each group norm (FedDC's code: 2)."
    )
    width: Int = Field(
        64,
        ge=1,
        le=1_024,
        description="resnet18: channels of the first stage (64 in ResNet-18; the later stages "
        "have 2, 4 and 8 times as many).",
    )
    embedding_dim: Int = Field(
        8, ge=1, le=4_096, description="char-lstm: embedding size (LEAF Shakespeare: 8)."
    )
    lstm_hidden: Int = Field(
        256, ge=1, le=8_192, description="char-lstm: LSTM units per layer (LEAF: 256)."
    )
    lstm_layers: Int = Field(2, ge=1, le=16, description="char-lstm: LSTM layers (LEAF: 2).")
    batch_norm_stats: Literal["average", "local"] = Field(
        "average",
        description="Batch-norm running statistics: average (aggregated like the parameters, "
        "weighted by client samples) or local (FedBN-style: each client keeps its own "
        "between rounds; the server's average still serves the global evaluation).",
    )
    arch: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="torchvision: a classification architecture of torchvision.models, e.g. "
        "mobilenet_v3_small, resnet50, efficientnet_b0.",
    )
    weights: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="A local file of initial weights for any model (a state_dict saved with "
        "torch.save; read with weights_only=True; never downloaded). Relative to the "
        "scenario file's folder, then the working folder.",
    )
    factory: PluginSpec | None = Field(
        None,
        description="custom: 'file.py:function' called as function(input_shape, n_classes, "
        "**options) and returning an nn.Module, or (module, loss) (docs/learning-models.md).",
    )
    options: Options = Field({}, description="Keyword arguments of the factory or architecture.")
    forward_flops_per_sample: float | None = Field(
        None,
        gt=0,
        le=1e18,
        description="Forward FLOPs of one sample, for a model whose FLOPs cannot be counted "
        "(None: counted with torch's FLOP counter).",
    )
    source: PluginSource | None = Field(
        None, description="Recorded when loaded: the factory file's path and SHA-256."
    )

    cross_checks = (_zero_init, _model_plugin_fields)

    @model_validator(mode="after")
    def _load_plugin(self):
        resolve_plugin(self, ("weights",))
        return self


class TrainingSection(Section):
    """Rounds, local work and evaluation."""

    rounds: Int = Field(
        100, ge=1, le=MAX_ROUNDS, description="Number of communication rounds (at most 1,000,000)."
    )
    local_steps: Int = Field(  # (published K grids stop at a few hundred)
        10, ge=1, le=10_000, description="Local SGD steps K per round (at most 10,000)."
    )
    local_epochs: float | None = Field(  # (FedAvg's E goes to 20)
        None,
        gt=0,
        le=100,
        description="Local work as epochs instead of steps: client i runs "
        "ceil(local_epochs * n_i / batch_size) steps (replaces local_steps when set; at "
        "most 100 epochs).",
    )
    batch_size: Int = Field(
        32,
        ge=1,
        le=10_000,
        description="Minibatch size B (at most 10,000: every selected client holds a batch "
        "in memory at once).",
    )
    lr: float = Field(0.1, gt=0, description="Local learning rate at round 0.")
    lr_decay: float = Field(
        1.0, gt=0, le=1, description="Per-round learning-rate factor: lr_t = lr * lr_decay^t."
    )
    weight_decay: float = Field(0.0, ge=0, description="L2 coefficient added to the gradient.")
    clip_grad_norm: float | None = Field(
        None, gt=0, description="Clip each client's step gradient to this norm (none: off)."
    )
    clients_per_round: Int = Field(
        10,
        ge=1,
        le=MAX_CLIENTS,
        description="Clients selected per round, m (at most population.size).",
    )
    participation: Literal["fixed", "bernoulli"] = Field(
        "fixed",
        description="fixed: clients_per_round clients a round; bernoulli: every online client "
        "takes part with participation_prob and every client drawn is kept (clients_per_round "
        "does not cap them; round.overcommit > 1 keeps the first clients_per_round arrivals); "
        "redrawn while nobody takes part (FedDyn/FedDC code), at most 10,000 times, then the "
        "draw conditioned on somebody taking part is sampled directly.",
    )
    participation_prob: float = Field(
        0.1,
        ge=1e-6,
        le=1,
        description="Per-client probability for participation=bernoulli, at least 1e-6: the "
        "redraws until somebody takes part cost about max(online clients, 1/p) random "
        "numbers a round, so at most about a million.",
    )
    eval_every: Int = Field(
        1, ge=1, le=MAX_ROUNDS, description="Evaluate the global model every n rounds."
    )
    target_metric: Literal["accuracy", "worst_client_accuracy"] = Field(
        "accuracy", description="Metric for rounds/energy/time to target."
    )
    target_value: float | None = Field(
        None, ge=0, le=1, description="Target of target_metric, as a fraction (e.g. 0.9)."
    )
    stop_at_target: bool = Field(
        False, description="End the run at the first evaluation that reaches the target."
    )


def _cpu_range(v) -> Iterator[tuple[str, str]]:
    if v.cpu_freq_min_hz > v.cpu_freq_max_hz:
        yield (
            "cpu_freq_min_hz",
            f"cpu_freq_min_hz must not exceed cpu_freq_max_hz ({v.cpu_freq_max_hz:g}), "
            f"got {v.cpu_freq_min_hz:g}",
        )


def _charge_range(v) -> Iterator[tuple[str, str]]:
    if v.initial_charge_min > v.initial_charge_max:
        yield (
            "initial_charge_min",
            f"initial_charge_min must not exceed initial_charge_max ({v.initial_charge_max:g}), "
            f"got {v.initial_charge_min:g}",
        )


COMPUTE_FIGURES = {
    "efficiency": ("flops_per_s", "flops_per_joule"),
    "measured": ("reference_seconds_per_sample", "reference_flops_per_sample", "measured_power_w"),
}


def _compute_figures(v) -> Iterator[tuple[str, str]]:
    missing = [name for name in COMPUTE_FIGURES.get(v.compute, ()) if getattr(v, name) is None]
    if missing:
        yield (
            "compute",
            f"compute: {v.compute} needs {', '.join(missing)} (or a profile that sets them; "
            "`fedjoule profiles`)",
        )


def _dvfs_frequency(v) -> Iterator[tuple[str, str]]:
    """The frequencies a class runs at lie in its dvfs table; a measured class run below
    the top speed has its CPU's power there inside its measured power."""
    kind, table, fixed = v.compute, v.dvfs, v.cpu_freq_hz
    if fixed is not None and kind not in ("cpu", "measured"):
        yield "cpu_freq_hz", f"cpu_freq_hz applies to compute: cpu or measured, not {kind}"
    elif fixed is not None and kind == "measured" and table is None:
        yield (
            "cpu_freq_hz",
            "cpu_freq_hz on compute: measured needs a dvfs table (the measurement is taken "
            "at the table's highest speed)",
        )
    if table is None or kind not in ("cpu", "measured"):
        return
    asked = {"cpu_freq_hz": fixed} if fixed is not None else {}
    if kind == "cpu" and fixed is None:
        asked = {"cpu_freq_min_hz": v.cpu_freq_min_hz, "cpu_freq_max_hz": v.cpu_freq_max_hz}
    try:
        low, high = freq_range_hz(table)
    except IndexError:  # a table that did not validate (its own message says why)
        raise Invalid("dvfs") from None
    for name, freq in asked.items():
        if not low <= freq <= high:
            yield name, f"{name} {out_of_table(table, freq)}"
    if kind == "measured" and fixed is not None and v.measured_power_w is not None:
        top_w = float(cpu_power_w(table, high))
        if top_w > v.measured_power_w:
            yield (
                "dvfs",
                f"the dvfs table's CPU power at its top speed, {top_w:.4g} W, exceeds "
                f"measured_power_w {v.measured_power_w:g} W, the device's whole power while "
                "training",
            )


def raw_with_profile(data, strict: bool):
    """A raw device class with its profile's values merged under its own fields
    (fedjoule.devices.library.merged_class). strict: an unknown profile is an error
    listing the available ones; otherwise the class is returned unchanged."""
    if not isinstance(data, dict) or not isinstance(data.get("profile"), str):
        return data
    try:
        return merged_class(data)
    except FedjouleError:
        if strict:
            raise PydanticCustomError(
                "unknown_profile",
                "{message}",
                {"message": unknown_profile_message(data["profile"])},
            ) from None
        return data


DB = Annotated[float, Field(ge=-MAX_DB, le=MAX_DB)]


def _at_least_1_hz(value: float) -> float:
    if value < 1:
        raise PydanticCustomError(
            "too_small", "Input should be at least 1 Hz (a transfer would take forever)"
        )
    return value


# gt=0 first (the usual message for a negative value), then the 1 Hz floor
Bandwidth = Annotated[float, Field(gt=0, le=1e12), AfterValidator(_at_least_1_hz)]


OptionalPower = Annotated[float | None, Field(ge=0, le=1e6)]
OptionalTime = Annotated[float | None, Field(ge=0, le=MAX_TIME_S)]


def _power_control_fields(v) -> Iterator[tuple[str, str]]:
    for name in ("p0_dbm", "alpha"):
        if getattr(v, name) is not None and v.power_control != "fractional":
            yield name, f"{name} is only used with power_control=fractional"
    if v.power_control == "fractional" and v.model not in ("radiated", "linear"):
        yield (
            "power_control",
            f"power_control=fractional needs a radio model whose power follows the radiated "
            f"power (radiated or linear); the {v.model} model's power is a measured "
            "function of the throughput, taken on devices whose network already ran its "
            "power control, so a lower radiated power would not change it "
            "(docs/models.md#uplink-power-control)",
        )


class RadioSection(Section):
    """How the device's radio turns time and bits into energy. Every parameter left out
    (null) takes the model's measured default (fedjoule/devices/radio.py and
    docs/models.md#measured-radio-models, with sources)."""

    model: Literal["radiated", "linear", "lte", "wifi", "nbiot", "nr-nsa", "nr-sa", "nr-mmwave"] = (
        Field(
            "radiated",
            description="radiated: transmit energy = radiated power x airtime, receive at "
            "rx_power_w (the wireless-FL theory papers' model); linear: P_tx / pa_efficiency "
            "+ circuit_power_w; lte, wifi, nbiot: measured power = per-Mbit/s slope x "
            "throughput + base power, with promotion and tail states; nr-nsa, nr-sa, "
            "nr-mmwave: the same for 5G NR (NSA low-band, SA low-band, NSA mmWave; "
            "Narayanan et al., SIGCOMM 2021), NSA promoting through its LTE anchor first.",
        )
    )
    pa_efficiency: float | None = Field(
        None, gt=0, le=1, description="linear: power-amplifier drain efficiency eta."
    )
    circuit_power_w: OptionalPower = Field(
        None, description="linear: transmit circuit power beside the amplifier (W)."
    )
    uplink_w_per_mbps: OptionalPower = Field(
        None, description="lte/wifi/nbiot/nr-*: uplink power per Mbit/s of throughput (W)."
    )
    downlink_w_per_mbps: OptionalPower = Field(
        None, description="lte/wifi/nbiot/nr-*: downlink power per Mbit/s of throughput (W)."
    )
    base_power_w: OptionalPower = Field(
        None,
        description="lte/wifi/nbiot/nr-*: power while receiving (and, for lte, wifi, "
        "nr-nsa and nr-sa, transmitting) before the throughput term (W).",
    )
    uplink_base_power_w: OptionalPower = Field(
        None,
        description="lte/wifi/nbiot/nr-*: power while transmitting before the throughput term "
        "(W); null: base_power_w (lte, wifi, nr-nsa, nr-sa) or the model's own uplink base "
        "power (nbiot, nr-mmwave).",
    )
    promotion_s: OptionalTime = Field(
        None,
        description="Time to connect from idle before the first transfer (s; nr-nsa, "
        "nr-mmwave: the NR leg, after the LTE anchor).",
    )
    promotion_power_w: OptionalPower = Field(None, description="Power while connecting (W).")
    tail_s: OptionalTime = Field(
        None, description="Time the radio stays connected after the last transfer (s)."
    )
    tail_power_w: OptionalPower = Field(None, description="Power during the tail (W).")
    idle_power_w: OptionalPower = Field(
        None,
        description="Power of the idle radio (after its tail), counted only while the device "
        "takes part in a round, from the end of its download to the start of its upload "
        "(W; energy_idle_j).",
    )
    uplink_max_mbps: float | None = Field(
        None,
        gt=0,
        le=1e12,
        description="lte, nr-*: the highest uplink throughput the slope was measured "
        "at (Mbit/s); faster transfers are charged at this throughput's power and counted "
        "in summary.json's warnings (docs/models.md#measured-range). A value far above "
        "any rate (1e6) extends the slope without bound, as older papers did.",
    )
    downlink_max_mbps: float | None = Field(
        None,
        gt=0,
        le=1e12,
        description="lte, nr-*: the highest downlink throughput the slope was "
        "measured at (Mbit/s), as uplink_max_mbps.",
    )
    anchor_promotion_s: OptionalTime = Field(
        None,
        description="nr-nsa, nr-mmwave: time to connect the LTE anchor from idle, before "
        "the NR leg (promotion_s) (s).",
    )
    anchor_promotion_power_w: OptionalPower = Field(
        None, description="nr-nsa, nr-mmwave: power while the LTE anchor connects (W)."
    )
    power_control: Literal["none", "fractional"] = Field(
        "none",
        description="Uplink transmit power (docs/models.md#uplink-power-control). none: "
        "tx_power_dbm always. fractional: 3GPP open-loop power control (TS 36.213 "
        "5.1.1.1, TS 38.213 7.1.1), P = min(tx_power_dbm, p0_dbm + alpha PL + 10 "
        "log10(M)) with PL the client's path loss and shadowing to its base station and M "
        "= b / 180 kHz the resource blocks of its typical band b (clients.csv tx_power_w); "
        "radio models radiated and linear only, and it needs geometry (channel.snr_db "
        "unset) and model rates (no channel.trace.uplink, no population.capacity_trace).",
    )
    p0_dbm: float | None = Field(
        None,
        ge=-126,
        le=24,
        description="fractional: target received power per 180 kHz resource block P0 "
        "(dBm, -126 to 24 as TS 36.331's p0-NominalPUSCH); null: -80 (the ns-3 LTE "
        "module's default).",
    )
    alpha: float | None = Field(
        None,
        ge=0,
        le=1,
        description="fractional: path-loss compensation factor alpha (0 to 1; 3GPP signals "
        "0, 0.4, 0.5, ..., 1); null: 1 (full compensation, the ns-3 LTE module's default).",
    )

    cross_checks = (_power_control_fields,)


def _dvfs_lists(v) -> Iterator[tuple[str, str]]:
    speeds, powers = v.core_speeds_khz, v.core_power_ma
    if len(speeds) != len(powers):
        yield (
            "core_power_ma",
            f"core_power_ma has {len(powers)} values, core_speeds_khz {len(speeds)}; "
            "give one current per speed",
        )
    if any(b <= a for a, b in zip(speeds, speeds[1:], strict=False)):
        yield "core_speeds_khz", f"core_speeds_khz must increase, got {speeds}"


KiloHertz = Annotated[float, Field(gt=0, le=1e9)]
MilliAmps = Annotated[float, Field(ge=0, le=1e6)]


class DvfsCluster(Section):
    """One CPU cluster of a dvfs table, as Android's power_profile.xml gives it: currents
    measured at the battery (mA)."""

    cores: Int = Field(..., ge=1, le=1024, description="cpu.clusters.cores: its cores.")
    core_speeds_khz: list[KiloHertz] = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="cpu.core_speeds.clusterN: the frequencies (kHz), increasing.",
    )
    core_power_ma: list[MilliAmps] = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="cpu.core_power.clusterN: current of one running core at each speed "
        "(mA), beside the cluster's and the active current; linear in f between speeds.",
    )
    cluster_power_ma: MilliAmps = Field(
        0.0, description="cpu.cluster_power.clusterN: the cluster's own current (mA)."
    )

    cross_checks = (_dvfs_lists,)


def _dvfs_choice(v) -> Iterator[tuple[str, str]]:
    if v.cluster is not None and v.cluster >= len(v.clusters):
        yield "cluster", f"cluster {v.cluster} is not in the table ({len(v.clusters)} clusters)"
        return
    cores = v.clusters[training_cluster(v)].cores
    if v.cores_used is not None and v.cores_used > cores:
        yield "cores_used", f"cores_used {v.cores_used} exceeds the cluster's {cores} cores"


class DvfsTable(Section):
    """CPU power at each frequency (docs/models.md#cpu-power-per-frequency): Android's
    power_profile.xml cluster tables; `fedjoule profiles --import FILE` writes one."""

    voltage_v: float = Field(
        ...,
        gt=0,
        le=100,
        description="Voltage turning the table's currents into power (V): power = current "
        "x voltage; state its source.",
    )
    active_ma: MilliAmps = Field(
        0.0, description="cpu.active: the CPU's current while running, beside clusters (mA)."
    )
    clusters: list[DvfsCluster] = Field(
        ..., min_length=1, max_length=64, description="The clusters, in the file's order."
    )
    cluster: Int | None = Field(
        None,
        ge=0,
        le=63,
        description="The cluster training runs on (its index); null: the one with the "
        "highest top speed.",
    )
    cores_used: Int | None = Field(
        None, ge=1, le=1024, description="Cores training runs on there; null: all of them."
    )

    cross_checks = (_dvfs_choice,)


class DeviceClass(Section):
    """One kind of edge device and its share of the population (docs/models.md#devices)."""

    name: str = Field("phone", min_length=1, max_length=100, description="Label used in outputs.")
    share: float = Field(1.0, gt=0, le=1, description="Fraction of the population.")
    profile: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="A device profile of the library (`fedjoule profiles`): its measured "
        "values, each with its source, fill every field this class does not set.",
    )
    compute: Literal["cpu", "accelerator", "efficiency", "measured"] = Field(
        "cpu",
        description="cpu: DVFS model; accelerator: FLOP/s model; efficiency: measured FLOP "
        "per joule and FLOP/s; measured: seconds per sample of a reference model and active "
        "power, scaled by FLOPs.",
    )
    cpu_freq_min_hz: float = Field(
        1.0e9, ge=1, le=1e12, description="CPU frequency range, low end (Hz)."
    )
    cpu_freq_max_hz: float = Field(
        2.0e9, ge=1, le=1e12, description="CPU frequency range, high end (Hz)."
    )
    cpu_freq_hz: float | None = Field(
        None,
        ge=1,
        le=1e12,
        description="A fixed CPU frequency for every client of the class (Hz). null: cpu "
        "draws it in [cpu_freq_min_hz, cpu_freq_max_hz]; measured runs at the dvfs table's "
        "highest speed, where it was measured (another frequency needs a dvfs table).",
    )
    kappa: float = Field(
        1e-28, gt=0, le=1, description="Effective switched capacitance (CPU model)."
    )
    flops_per_cycle: float = Field(
        4.0,
        ge=1e-3,
        le=1e6,
        description="FLOPs per CPU cycle; cycles/sample = 3 x forward FLOPs / this.",
    )
    peak_flops: float = Field(1.0e12, ge=1, le=1e18, description="Accelerator peak FLOP/s.")
    efficiency: float = Field(0.3, ge=1e-6, le=1, description="Accelerator achieved fraction.")
    active_power_w: float = Field(
        7.5, gt=0, le=1e6, description="Accelerator power while training (W)."
    )
    flops_per_s: float | None = Field(
        None,
        gt=0,
        le=1e18,
        description="efficiency: measured training throughput (FLOP/s); step time = 3 x "
        "forward FLOPs x batch / this.",
    )
    flops_per_joule: float | None = Field(
        None,
        gt=0,
        le=1e15,
        description="efficiency: measured training FLOPs per joule; step energy = 3 x "
        "forward FLOPs x batch / this.",
    )
    reference_seconds_per_sample: float | None = Field(
        None,
        gt=0,
        le=MAX_TIME_S,
        description="measured: training time per sample (forward and backward) of the "
        "reference model on this device (s); step time = this x forward FLOPs / "
        "reference_flops_per_sample x batch.",
    )
    reference_flops_per_sample: float | None = Field(
        None,
        gt=0,
        le=1e18,
        description="measured: forward FLOPs per sample of the reference model, counted as "
        "fedjoule counts a model's (ResNet-18 at 224x224: 3.64e9).",
    )
    measured_power_w: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="measured: device power while training (W); step energy = this x step time.",
    )
    dvfs: DvfsTable | None = Field(
        None,
        description="CPU power per frequency (cpu and measured kinds): cpu charges the "
        "table's power at f for c x B / (f x cores_used); measured scales its time by "
        "f_max / f and its CPU share of power by the table. null: as without a table.",
    )
    compute_spread_sigma: float = Field(
        0.0,
        ge=0,
        le=5,
        description="efficiency, measured: per-client log-normal spread of step time, "
        "exp(sigma z) with z ~ N(0, 1) (median 1: the measured figure is the median "
        "device); measured energy scales with the time, efficiency energy does not (the "
        "FLOP per joule is the device's). 0: every client as measured. The cpu kind "
        "spreads by its CPU frequency range instead.",
    )
    tx_power_dbm: DB = Field(
        23.0, description="Uplink transmit power (dBm; a phone sends at most about 23 dBm)."
    )
    rx_power_w: float = Field(0.1, ge=0, le=1e6, description="Power while receiving (W).")
    battery_j: float = Field(54_000.0, ge=1e-3, le=1e15, description="Battery capacity (J).")
    initial_charge_min: float = Field(0.5, ge=0, le=1, description="Initial charge, low end.")
    initial_charge_max: float = Field(1.0, ge=0, le=1, description="Initial charge, high end.")
    battery_threshold: float = Field(
        0.2, ge=0, lt=1, description="Below this charge fraction the device stops taking part."
    )
    charge_power_w: float = Field(
        10.0,
        ge=0,
        le=1e6,
        description="Charging power while plugged in (W; diurnal availability).",
    )
    radio: RadioSection = Field(default_factory=RadioSection)

    cross_checks = (_cpu_range, _charge_range, _compute_figures, _dvfs_frequency)

    @model_validator(mode="before")
    @classmethod
    def _merge_profile(cls, data):
        """A named profile's values fill every field the class does not set."""
        return raw_with_profile(data, strict=True)

    @staticmethod
    def raw_with_profile(data):
        """The raw class with its profile merged in (for the cross-field checks of a
        partly invalid file); unchanged when it names no usable profile."""
        return raw_with_profile(data, strict=False)


class FreeloaderSection(Section):
    """Clients that do not train but upload a fabricated update (docs/algorithms.md#freeloaders)."""

    fraction: float = Field(0.0, ge=0, lt=1, description="Fraction of the N clients.")
    behaviour: Literal["zero", "replay", "noisy"] = Field(
        "replay",
        description="zero: send the global model back; replay: the last global update again; "
        "noisy: replay plus Gaussian noise of the update's per-coordinate scale.",
    )
    noise_scale: float = Field(1.0, ge=0, le=1e6, description="Noise multiplier for `noisy`.")


def _shares(v) -> Iterator[tuple[str, str]]:
    total = sum(c.share for c in v.device_classes)
    if abs(total - 1.0) > 1e-6:
        yield "device_classes", f"device class shares must sum to 1, they sum to {total:g}"


def _unique_names(v) -> Iterator[tuple[str, str]]:
    names = [c.name for c in v.device_classes]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        yield "device_classes", f"device class names must be unique, repeated: {repeated}"


class CapacityTraceSection(Section):
    """A device-capacity trace in FedScale's format (docs/models.md#fedscale-traces)."""

    file: str = Field(
        ...,
        min_length=1,
        max_length=4096,
        description="The trace: FedScale's pickle {client_id: {computation: ms per sample, "
        "communication: kbit/s}} (read without running code), or the same as JSON or CSV "
        "(`fedjoule traces convert`); a path relative to the scenario file's folder (then "
        "the working folder), or "
        "package:NAME for one shipped with fedjoule.",
    )
    power_w: float = Field(
        ...,
        gt=0,
        le=1e6,
        description="Device power while training (W): step energy = this x step time (the "
        "measured compute kind; FedScale's traces carry no power).",
    )

    _file_found = field_validator("file")(_data_file)

    @model_validator(mode="after")
    def _readable(self):
        try:
            check_file(trace_path(self.file), "capacity")
        except FedjouleError as exc:
            raise ValueError(f"population.capacity_trace.file {exc}") from None
        return self


class PopulationSection(Section):
    """The clients: how many and of which device classes."""

    size: Int = Field(
        100,
        ge=1,
        le=MAX_CLIENTS,
        description="Number of clients N, at most 10,000,000 (the system engine simulates "
        "1,000,000 devices in about 1 GB; memory grows linearly).",
    )
    freeloaders: FreeloaderSection = Field(default_factory=FreeloaderSection)
    device_classes: list[DeviceClass] = Field(
        default_factory=lambda: [DeviceClass()],
        min_length=1,
        max_length=1_000,
        description="Device classes (1 to 1,000); their shares must sum to 1.",
    )

    capacity_trace: CapacityTraceSection | None = Field(
        None,
        description="A FedScale device-capacity trace: client k takes the trace's k-th "
        "client (by id, cycling); its step time is FedScale's 3 x batch x ms per sample "
        "(the measured compute kind, replacing the device class's), its energy power_w x "
        "that time, and both its links run at its `communication` rate (replacing the "
        "channel model's rates; the radio's power models apply).",
    )

    cross_checks = (_shares, _unique_names)


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
        yield "cells", (
            f"layout=single has one base station, so cells={v.cells} would be ignored; "
            "set topology.layout to hexagonal or grid for several cells"
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

    backends: list[
        Annotated[str, Field(min_length=1, max_length=4096, pattern=TRACKER_NAME)]
    ] = Field(
        [],
        max_length=16,
        description="Trackers: tensorboard (pip install 'fedjoule[tensorboard]'), mlflow "
        "(a local file store; 'fedjoule[mlflow]'), wandb (offline; 'fedjoule[wandb]'), csv "
        "(no extra), a name an installed package or Python code registered (kind tracker), "
        "or a plug-in class 'file.py:ClassName' (fedjoule.tracking.base.Tracker). Empty: "
        "no tracking. The command line's --track sets it.",
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
        None, ge=0, le=1_000, description="a of polynomial and hinge (null: 0.5 polynomial, "
        "10 hinge, FedAsync's settings)."
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
    if reason is None and name not in declared.algorithms and not raw:
        reason = _plugin_reason(algorithm)
    if reason:
        allowed = ", ".join(declared.algorithms)
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
        yield "round.overcommit", f"round.overcommit applies to sync and hierarchical " \
            f"rounds, not to protocol.kind={p.kind} (concurrency sets what is in flight)"
    if v.training.participation != "fixed":
        yield "training.participation", f"protocol.kind={p.kind} dispatches a client to each " \
            "free slot: training.participation must be fixed"
    if v.round.interval_s is not None:
        yield "round.interval_s", f"protocol.kind={p.kind} has no rounds to schedule: " \
            "round.interval_s must be null"
    n = v.population.size
    if p.concurrency is not None and p.concurrency > n:
        yield "protocol.concurrency", f"protocol.concurrency ({p.concurrency}) exceeds " \
            f"population.size ({n})"
    m = v.training.clients_per_round
    in_flight, buffer = min(p.concurrency or m, n), p.buffer_size or m
    if p.kind == "buffered" and buffer > in_flight:
        shown = f"{buffer}" if p.buffer_size else f"null: training.clients_per_round, {buffer}"
        yield "protocol.buffer_size", f"protocol.buffer_size ({shown}) exceeds the clients " \
            f"in flight ({in_flight}, protocol.concurrency): a version would wait for more " \
            "arrivals than there are clients training at once; at most that many"


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
    cls, options = algorithm_class(algorithm)
    for direction in directions:
        reason = cls.compression_refusal(options, direction)
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

    cross_checks = (
        _clients_per_round,
        _min_clients,
        _compression_algorithm,
        _protocol_algorithm,
        _protocol_round,
        _interference,
        _power_control_channel,
    )
