"""The algorithms a scenario can name: the built-ins, those installed packages add through
the entry-point group `fedjoule.algorithms`, and `custom` classes from a file or module.

An algorithm is a subclass of `Algorithm` (base.py); its options are the pydantic model
in its `config_class` attribute (a subclass of AlgorithmConfig, no options by default).
A scenario's `algorithm:` section is checked against that model:

    algorithm: {name: fedavg}                                   # built in
    algorithm: {name: fednova, mu: 0.01}                        # installed (entry point)
    algorithm: {name: custom, class: "my_algo.py:MyAlgo", options: {...}}
"""

from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    WrapValidator,
    create_model,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from fedjoule.algorithms.declarations import DECLARATIONS, compression_refusal
from fedjoule.algorithms.options import BUILT_IN, AlgorithmConfig
from fedjoule.errors import did_you_mean
from fedjoule.plugins import (
    REGISTRY,
    PluginError,
    Unchecked,
    check_unchanged,
    entry_target,
    load_spec,
    plugin_dirs,
)

if TYPE_CHECKING:
    from fedjoule.algorithms.base import Algorithm

for _name, (_where, _) in BUILT_IN.items():
    REGISTRY.register("algorithm", _name, _where)  # the class is imported on first use


def __getattr__(name: str):
    """ALGORITHMS: each built-in name's (class, options model); importing the classes loads
    torch, so it is built when first asked for."""
    if name != "ALGORITHMS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = {
        n: (entry_target(REGISTRY.get("algorithm", n))[0], config)
        for n, (_, config) in BUILT_IN.items()
    }
    globals()[name] = value  # (built once)
    return value


CUSTOM = "custom"


class PluginSource(AlgorithmConfig):
    """Where a plug-in's code came from (an algorithm's, model's, dataset's or policy's): filled
    in when a scenario is loaded and recorded in scenario.yaml, so that the same code
    rebuilds the run (a changed file is refused)."""

    file: str | None = Field(None, max_length=4096, description="Absolute path of the file.")
    module: str | None = Field(
        None, max_length=1000, description="Module it was imported as (`package.module` specs)."
    )
    sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the file's content."
    )
    entry_point: str | None = Field(None, max_length=1000, description="Entry point's target.")


def names() -> list[str]:
    """Every algorithm name a scenario may use (`custom` last)."""
    return [*REGISTRY.entries("algorithm"), CUSTOM]


def algorithm_class(section: AlgorithmConfig) -> "tuple[type[Algorithm], AlgorithmConfig]":
    """The class a validated `algorithm:` section names, and the options it is built with."""
    if section.name == CUSTOM:
        cls, _ = load_spec(section.class_, (), _recorded(section.source))
        return cls, section.options
    entry = REGISTRY.get("algorithm", section.name)
    if entry is None:
        raise PluginError(f"algorithm {section.name!r} is not available here; have {names()}")
    cls, _ = entry_target(entry)
    return cls, section


def compression_refusal_of(section: AlgorithmConfig, direction: str) -> str | None:
    """Why the algorithm a validated section names cannot compress `direction` (None: it
    can): a built-in's from its declaration (no torch), a plug-in's from its class."""
    if section.name in DECLARATIONS:
        return compression_refusal(DECLARATIONS[section.name], section, direction)
    cls, options = algorithm_class(section)
    return cls.compression_refusal(options, direction)


def build_algorithm(
    config,
    n_clients: int,
    client_samples,
    nominal_steps: int = 1,
    base_lr: float = 0.1,
    seed: int = 0,
) -> "Algorithm":
    """The algorithm object a scenario's `algorithm:` section describes."""
    cls, options = algorithm_class(config)
    return cls(options, n_clients, client_samples, nominal_steps, base_lr, seed)


class UncheckedOptions(AlgorithmConfig):
    """A plug-in algorithm's options when its class is not imported (validate without
    --import-plugins): kept as given, checked only when the class is loaded."""

    model_config = ConfigDict(extra="allow")


def check_algorithm_class(cls: Any, where: str) -> "type[Algorithm]":
    """A plug-in must be an Algorithm subclass with a pydantic option model."""
    from fedjoule.algorithms.base import Algorithm  # deferred: torch (plug-in classes only)

    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise PluginError(
            f"{where} is {type(cls).__name__} {getattr(cls, '__name__', cls)!r}, not a subclass "
            "of fedjoule.algorithms.base.Algorithm"
        )
    config = getattr(cls, "config_class", AlgorithmConfig)
    if not (isinstance(config, type) and issubclass(config, AlgorithmConfig)):
        raise PluginError(
            f"{where}: config_class must be a subclass of "
            "fedjoule.algorithms.base.AlgorithmConfig (a pydantic model of the options)"
        )
    return cls


@cache
def named_section(name: str, config: type[AlgorithmConfig]) -> type[AlgorithmConfig]:
    """The section model of an installed algorithm: its options, `name: <name>` and the
    recorded source of its code (module file and SHA-256)."""
    return create_model(
        f"{config.__name__}Section",
        __base__=config,
        name=(Literal[name], name),
        source=(PluginSource | None, None),
    )


@cache
def custom_section(config: type[AlgorithmConfig]) -> type[AlgorithmConfig]:
    """The section model of `name: custom`: the class, its options, its recorded source."""
    return create_model(
        f"Custom{config.__name__}Section",
        __base__=AlgorithmConfig,
        name=(Literal["custom"], CUSTOM),
        class_=(
            str,
            Field(
                alias="class",
                min_length=3,
                max_length=4096,
                description="'file.py:ClassName' or 'package.module:ClassName'.",
            ),
        ),
        options=(SerializeAsAny[config], Field(default_factory=config)),
        source=(PluginSource | None, None),
    )


def section_model(value: Any) -> type[AlgorithmConfig]:
    """The model that checks an `algorithm:` mapping, chosen by its `name` (fedavg when it
    has none). Raises PluginError for a name or plug-in that cannot be used."""
    name = value.get("name", "fedavg") if isinstance(value, dict) else "fedavg"
    if name == CUSTOM:
        spec = value.get("class")
        if not isinstance(spec, str):
            raise _FieldProblem("class", "a custom algorithm needs class: 'file.py:ClassName'")
        cls, _ = load_spec(spec, plugin_dirs(), _recorded(value.get("source")))
        if isinstance(cls, Unchecked):  # validate without --import-plugins
            return custom_section(UncheckedOptions)
        check_algorithm_class(cls, spec)
        return custom_section(cls.config_class)
    if not isinstance(name, str):
        raise _FieldProblem("name", f"expected text (an algorithm name), got {name!r}")
    entry = REGISTRY.get("algorithm", name)
    if entry is None:
        raise _FieldProblem(
            "name",
            f"unknown algorithm {name!r}{did_you_mean(name, names())}; "
            f"available: {', '.join(map(repr, names()))}",
        )
    if entry.origin == "built in":
        return BUILT_IN[name][1]  # (its class, and torch, not imported)
    cls, _ = entry_target(entry)
    check_algorithm_class(cls, f"algorithm {name!r} ({entry.origin})")
    return named_section(name, cls.config_class)


def _recorded(source) -> dict | None:
    if source is None:
        return None
    if isinstance(source, dict):
        return source
    return source.model_dump()


class _FieldProblem(Exception):  # noqa: N818 - carries a located validation error
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message


def _resolve(value: Any, handler, info) -> AlgorithmConfig:
    """Validate an `algorithm:` section against the model its name chooses."""
    if isinstance(value, AlgorithmConfig):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError(
            "dict_type", "expected a mapping with a name, e.g. {name: fedavg}"
        )
    try:
        model = section_model(value)
    except _FieldProblem as problem:
        raise _located(problem.field, problem.message, value.get(problem.field)) from None
    except PluginError as exc:
        field = "class" if value.get("name") == CUSTOM else "name"
        raise _located(field, str(exc), value.get(field)) from None
    section = model.model_validate(value)
    try:  # record where a plug-in's code came from (and refuse it if it has changed)
        if section.name == CUSTOM:
            _, source = load_spec(section.class_, plugin_dirs(), _recorded(section.source))
            section.source = PluginSource(**source)
        elif "source" in type(section).model_fields:
            _, source = entry_target(REGISTRY.get("algorithm", section.name))
            check_unchanged(section.name, source, _recorded(section.source))
            section.source = PluginSource(**source)
    except PluginError as exc:
        raise _located("source", str(exc), value.get("source")) from None
    return section


def _located(field: str, message: str, value: Any) -> ValidationError:
    detail = InitErrorDetails(
        type=PydanticCustomError("plugin", "{message}", {"message": message}),
        loc=(field,),
        input=value,
    )
    return ValidationError.from_exception_data("algorithm", [detail])


# The scenario's `algorithm:` section: checked by the model its `name` chooses.
AlgorithmSection = Annotated[SerializeAsAny[AlgorithmConfig], WrapValidator(_resolve)]


def section_model_or_none(value: Any) -> type[AlgorithmConfig] | None:
    """section_model, or None where it raises (for error reporting over bad files)."""
    try:
        return section_model(value)
    except (PluginError, _FieldProblem):
        return None
