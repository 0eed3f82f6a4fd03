"""Model templates and their flat-parameter functional form.

Every model name a scenario can use is a registry entry (fedjoule.plugins.REGISTRY, kind
"model") whose target is a builder `(input_shape, n_classes, config) -> nn.Module` or
`(nn.Module, loss)`, `config` being the scenario's `model:` section. The built-ins register
here; `custom` calls the user's factory, `torchvision` an architecture of torchvision."""

import difflib
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from fedjoule import rng
from fedjoule.datafile import open_data_file
from fedjoule.errors import FedjouleError
from fedjoule.models.functional import FlatModel
from fedjoule.models.templates import char_lstm, cnn, logistic, mlp, resnet18
from fedjoule.plugins import REGISTRY, PluginError, call_plugin, entry_target, load_spec


def build_model(config, input_shape: tuple[int, ...], n_classes: int, seed: int):
    """The FlatModel and its initial (P,) parameters for a scenario's `model:` section."""
    entry = REGISTRY.get("model", config.name)
    if entry is None:
        have = ", ".join(REGISTRY.entries("model"))
        raise FedjouleError(f"model {config.name!r} is not available here; have {have}")
    try:
        builder, _ = entry_target(entry)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(rng.seed_int(seed, "model"))
            module, loss = _module_and_loss(
                builder(tuple(input_shape), n_classes, config), config.name
            )
    except PluginError as exc:
        raise FedjouleError(f"model: {exc}") from None
    if config.weights:
        load_weights(module, config.weights, config.name)
    if config.forward_flops_per_sample:  # stated in the scenario: never counted
        module.forward_flops_per_sample = config.forward_flops_per_sample
    model = FlatModel.wrap(module, loss=loss)
    w0 = model.flat_parameters()
    if config.zero_init:
        w0.zero_()
    return model, w0


def _module_and_loss(built, what: str) -> tuple[nn.Module, Callable | None]:
    """A builder's nn.Module and its loss (None: cross-entropy, also for (module, None));
    anything else is refused."""
    if isinstance(built, nn.Module):
        return built, None
    if (
        isinstance(built, tuple)
        and len(built) == 2
        and isinstance(built[0], nn.Module)
        and (built[1] is None or callable(built[1]))
    ):
        return built[0], built[1]
    shown = repr(built)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    raise FedjouleError(
        f"model {what} returned {type(built).__name__} {shown}; a model factory must return "
        "an nn.Module, or a tuple (nn.Module, loss) with loss(logits, labels) -> a scalar "
        "mean loss"
    )


# --- the built-in names ------------------------------------------------------------------


def _logistic(input_shape, n_classes, config):
    return logistic(input_shape, n_classes)


def _mlp(input_shape, n_classes, config):
    return mlp(input_shape, n_classes, config.hidden)


def _cnn(input_shape, n_classes, config):
    return cnn(input_shape, n_classes)


def _resnet18(input_shape, n_classes, config):
    return resnet18(input_shape, n_classes, config.norm, config.norm_groups, config.width)


def _char_lstm(input_shape, n_classes, config):
    return char_lstm(
        input_shape, n_classes, config.embedding_dim, config.lstm_hidden, config.lstm_layers
    )


def _torchvision(input_shape, n_classes, config):
    """torchvision.models.get_model(arch, num_classes=n_classes, weights=None, **options):
    randomly initialised (never downloaded); `weights` loads a local file afterwards."""
    import torchvision  # deferred: torchvision (1.5 s; its models only)

    if len(input_shape) != 3 or input_shape[0] != 3:
        raise FedjouleError(
            f"model torchvision ({config.arch}) takes RGB images (3, height, width); the "
            f"dataset's samples have shape {tuple(input_shape)} (use model.name custom with a "
            "factory for other inputs)"
        )
    names = torchvision.models.list_models(module=torchvision.models)
    if config.arch not in names:
        close = difflib.get_close_matches(config.arch, names, n=4, cutoff=0.5)
        raise FedjouleError(
            f"model.arch {config.arch!r} is not a classification architecture of torchvision "
            f"{torchvision.__version__}"
            + (f"; did you mean {', '.join(close)}?" if close else "")
            + f" The {len(names)} it has: {', '.join(names)}"
        )
    for reserved in ("num_classes", "weights"):
        if reserved in config.options:
            raise FedjouleError(
                f"model.options.{reserved}: set by fedjoule (the dataset's classes; weights "
                "come from model.weights, a local file); remove it"
            )
    return call_plugin(
        f"torchvision.models.get_model({config.arch!r}, options {config.options})",
        torchvision.models.get_model,
        config.arch,
        num_classes=n_classes,
        weights=None,
        **config.options,
    )


def _custom(input_shape, n_classes, config):
    """The user's factory(input_shape, n_classes, **options): an nn.Module or (module, loss)."""
    recorded = config.source.model_dump() if config.source else None
    factory, _ = load_spec(config.factory, (), recorded)
    built = call_plugin(
        f"model factory {config.factory!r}", factory, input_shape, n_classes, **config.options
    )
    return _module_and_loss(built, f"factory {config.factory!r}")


def load_weights(module: nn.Module, path: str, what: str) -> None:
    """Load a local state_dict file (torch.save(model.state_dict(), path)) into `module`:
    read with weights_only=True (tensors only, no code), never downloaded."""
    open_data_file(path, "model.weights", "weights").close()  # no FIFO, no device, bounded
    try:
        state = torch.load(Path(path), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:  # torch's text advises weights_only=False: not shown
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        held = f"holds a pickled {found.group(1)}" if found else "is not plain tensors"
        raise FedjouleError(
            f"model.weights {path}: refused, the file {held}; fedjoule loads only plain "
            "tensors and state dicts (torch.save(model.state_dict(), path)) and never "
            "unpickles code"
        ) from None
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise FedjouleError(
            f"model.weights {path}: cannot be read as a state_dict saved with torch.save "
            f"({type(exc).__name__}: {first})"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise FedjouleError(
            f"model.weights {path}: holds a {type(state).__name__}, not a state_dict (a "
            "dict of tensor names to tensors: torch.save(model.state_dict(), path))"
        )
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise FedjouleError(
            f"model.weights {path} does not fit model {what} as built for this dataset "
            f"(the head has the dataset's number of classes): {exc}"
        ) from None


for _name, _builder in {
    "logistic": _logistic,
    "mlp": _mlp,
    "cnn": _cnn,
    "resnet18": _resnet18,
    "char-lstm": _char_lstm,
    "torchvision": _torchvision,
    "custom": _custom,
}.items():
    REGISTRY.register("model", _name, _builder)
