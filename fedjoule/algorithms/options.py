"""The built-in algorithms declared without torch: each one's options (the pydantic model
a scenario's `algorithm:` section is checked against) and where its class lives. The
schema reads these, so that reading a scenario imports no torch; the class (and torch)
loads where an algorithm runs (registry.algorithm_class). docs/algorithms.md has each
algorithm's update rules and sources.
"""

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class AlgorithmConfig(BaseModel):
    """Options common to every algorithm; each algorithm subclasses this with a literal name.
    Checked as scenario sections are: unknown fields are errors, numbers finite, types strict
    (true is not a number). A field with an alias (`class` of a custom algorithm) is read
    and written under its alias."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        validate_by_name=True,
        serialize_by_alias=True,
    )
    cross_checks: ClassVar[tuple] = ()  # (none: the scenario's checks skip option models)


class FedAvgConfig(AlgorithmConfig):
    """FedAvg has no options of its own."""

    name: Literal["fedavg"] = "fedavg"


class FedProxConfig(AlgorithmConfig):
    """FedProx options."""

    name: Literal["fedprox"] = "fedprox"
    mu: float = Field(0.01, ge=0, description="Proximal weight mu (paper tunes 0.001-1).")


class ScaffoldConfig(AlgorithmConfig):
    """SCAFFOLD options."""

    name: Literal["scaffold"] = "scaffold"
    server_lr: float = Field(1.0, gt=0, description="Global step eta_g (paper mostly 1).")
    variate_lr: Literal["round", "base"] = Field(
        "round",
        description="lr in the option-II variate update: the round's lr (paper) or the "
        "undecayed base lr (FedDyn reference code).",
    )


class FedDynConfig(AlgorithmConfig):
    """FedDyn options."""

    name: Literal["feddyn"] = "feddyn"
    alpha: float = Field(0.01, gt=0, description="Regularisation alpha (examples: 0.01).")
    adaptive_alpha: bool = Field(
        True, description="Per-client alpha_i = alpha / w_i with w_i = n_i / mean n (code)."
    )


class FedDCConfig(AlgorithmConfig):
    """FedDC options."""

    name: Literal["feddc"] = "feddc"
    alpha: float = Field(
        0.01, gt=0, description="Drift penalty alpha (code: 0.01 CIFAR, 0.1 MNIST)."
    )
    adaptive_alpha: bool = Field(True, description="alpha_i = alpha / w_i (code).")
    aggregation: Literal["code", "paper"] = Field(
        "code",
        description="code: mean arrived theta_i + mean h over all N; paper: mean arrived "
        "(theta_i + h_i).",
    )


class TacoConfig(AlgorithmConfig):
    """TACO options (reconstructed forms, see taco.py's docstring)."""

    name: Literal["taco"] = "taco"
    gamma: float = Field(
        0.01,
        ge=0,
        description="Correction strength gamma (reconstructed; stable while K gamma (1 - alpha) "
        "< 1; paper's candidates 0, 0.001, 0.01, 0.1, 1).",
    )
    kappa: float = Field(0.7, gt=0, le=1, description="alpha above kappa is suspicious.")
    zeta: int = Field(
        3, ge=0, le=1_000_000, description="Expel after more than zeta suspicious rounds."
    )
    server_lr: float = Field(1.0, gt=0, description="Global step eta_g.")
    normalize_by_k: bool = Field(
        False, description="Divide the correction by K so one gamma serves every K."
    )
    weight_floor: float | None = Field(
        None,
        ge=0,
        description="Aggregation weights p_i proportional to alpha_i + floor (default 1/m): "
        "they fall back to uniform as updates cancel near a stationary point; 0 gives the "
        "plain alpha_i / sum alpha (does not settle, see docs).",
    )


class DrfaConfig(AlgorithmConfig):
    """DRFA options."""

    name: Literal["drfa"] = "drfa"
    dual_lr: float = Field(0.1, gt=0, description="Dual step size eta_lambda (code README).")
    dual_decay: float = Field(
        1.0, gt=0, le=1, description="Per-round factor on dual_lr (official code: 0.9)."
    )
    lambda_floor: float = Field(
        1e-3, ge=0, description="Entries of lambda below this are raised to it, then renormalised."
    )
    sampling: Literal["lambda", "uniform"] = Field(
        "lambda",
        description="lambda: sample by lambda, plain mean (paper); uniform: sample uniformly, "
        "weight the arrived models by lambda (the code's importance weighting, normalised).",
    )
    lambda_init: Literal["samples", "uniform"] = Field(
        "samples", description="Initial lambda: n_i / n (code) or 1/N."
    )


class DrdmConfig(DrfaConfig):
    """DRDM options: DRFA's plus FedDyn's alpha."""

    name: Literal["drdm"] = "drdm"  # type: ignore[assignment]
    alpha: float = Field(0.01, gt=0, description="FedDyn regularisation alpha.")
    adaptive_alpha: bool = Field(True, description="alpha_i = alpha / w_i (FedDyn code).")


class FoolsGoldConfig(AlgorithmConfig):
    """FoolsGold options."""

    name: Literal["foolsgold"] = "foolsgold"
    confidence: float = Field(1.0, gt=0, description="Logit confidence kappa.")
    combine: Literal["mean", "sum"] = Field(
        "mean",
        description="mean: sum a_i Delta_i / sum a_i (FedAvg-sized steps); sum: sum a_i Delta_i "
        "(the official code).",
    )


class StemConfig(AlgorithmConfig):
    """STEM options (paper's theory step sizes replaced by a constant lr, as in practice)."""

    name: Literal["stem"] = "stem"
    momentum_a: float = Field(
        0.2, gt=0, le=1, description="STORM weight a in (0, 1]; a = 1 is plain SGD."
    )


class FedACGConfig(AlgorithmConfig):
    """FedACG options."""

    name: Literal["fedacg"] = "fedacg"
    server_momentum: float = Field(0.85, ge=0, lt=1, description="Server momentum lambda.")
    beta: float = Field(
        1e-3, ge=0, description="Local regulariser weight: beta |theta - look-ahead|^2 (code)."
    )


# name -> the module:class that runs it, and its options (in the order listed)
BUILT_IN: dict[str, tuple[str, type[AlgorithmConfig]]] = {
    "fedavg": ("fedjoule.algorithms.fedavg:FedAvg", FedAvgConfig),
    "fedprox": ("fedjoule.algorithms.fedprox:FedProx", FedProxConfig),
    "scaffold": ("fedjoule.algorithms.scaffold:Scaffold", ScaffoldConfig),
    "feddyn": ("fedjoule.algorithms.feddyn:FedDyn", FedDynConfig),
    "feddc": ("fedjoule.algorithms.feddc:FedDC", FedDCConfig),
    "taco": ("fedjoule.algorithms.taco:Taco", TacoConfig),
    "drfa": ("fedjoule.algorithms.drfa:Drfa", DrfaConfig),
    "drdm": ("fedjoule.algorithms.drdm:Drdm", DrdmConfig),
    "foolsgold": ("fedjoule.algorithms.foolsgold:FoolsGold", FoolsGoldConfig),
    "stem": ("fedjoule.algorithms.stem:Stem", StemConfig),
    "fedacg": ("fedjoule.algorithms.fedacg:FedACG", FedACGConfig),
}
