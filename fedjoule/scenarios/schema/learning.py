"""The learning sections: the dataset, the model and local training."""

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fedjoule.algorithms.registry import (
    PluginSource,
)
from fedjoule.channel.trace import PACKAGE_PREFIX
from fedjoule.plugins import PluginError, Unchecked, load_spec, plugin_dirs
from fedjoule.scenarios.schema.base import MAX_CLIENTS, MAX_ROUNDS, Int, Section


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
