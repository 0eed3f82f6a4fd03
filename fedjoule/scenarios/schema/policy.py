"""The policy section: who takes part in a round and what each selected client is given
(band share, CPU frequency, local steps), and its checks against the rest of the scenario
(docs/policies.md)."""

from collections.abc import Iterator
from typing import Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.registry import PluginSource
from fedjoule.plugins import PluginError, Unchecked, plugin_dirs
from fedjoule.policies.plugin import check_options, decides, policy_class
from fedjoule.scenarios.schema.base import MAX_TIME_S, Int, Section

SELECT = ("random", "round-robin", "best-channel", "proportional-fair", "age", "oort",
          "power-of-choice", "battery")  # fmt: skip
NEEDS_CSI = ("best-channel", "proportional-fair")
CUSTOM = "custom"  # select by the plug-in policy.class (docs/writing-a-policy.md)
LOSS_DRIVEN = ("oort", "power-of-choice")  # they rank clients by their reported loss
# the protocols whose servers run the policy step (each round, dispatch or edge round)
PROTOCOLS = ("sync", "async", "buffered", "hierarchical")
STREAMING = ("async", "buffered")  # no common upload start: no band shares
# each selector's own parameters: (field, the selector that uses it)
PARAMETERS = (("choice_d", "power-of-choice"), ("oort_alpha", "oort"),
              ("oort_round_time_s", "oort"), ("battery_weighted", "battery"))  # fmt: skip


def _parameters(v) -> Iterator[tuple[str, str]]:
    for name, selector in PARAMETERS:
        default = PolicySection.model_fields[name].default
        if getattr(v, name) != default and v.select != selector:
            yield name, f"{name} is only used with select={selector}, not {v.select}"
    if v.select == CUSTOM and v.class_ is None:
        yield "class", "select=custom needs class: 'file.py:ClassName' (a plug-in policy)"
    if v.select in NEEDS_CSI and v.csi == "none":
        yield (
            "csi",
            f"select={v.select} needs the channel state: set csi to last (the last measured "
            "SNR) or oracle (this round's), not none",
        )


class PolicySection(Section):
    """Who takes part in each round (each async or buffered dispatch, each hierarchical
    edge round), and each one's band share, CPU frequency and steps. The defaults keep the
    scenario's fixed values (docs/policies.md)."""

    select: Literal[(*SELECT, CUSTOM)] = Field(
        "random",
        description="Who takes part. random: m of the online clients uniformly (or by the "
        "algorithm's weights; bernoulli participation); round-robin: the ring of ids in "
        "groups of m (Yang et al., IEEE Trans. Commun. 2020); best-channel: the m highest "
        "SNR; proportional-fair: the m highest instantaneous over mean rate (Yang et al. "
        "2020); age: the m longest unselected (times the spectral efficiency with csi); "
        "oort: utility from loss and round time (Lai et al., OSDI 2021); power-of-choice: "
        "d candidates, the m highest loss win (Cho et al., AISTATS 2022); battery: the m "
        "fullest reported batteries (after EAFL, 2022); custom: the plug-in policy.class's "
        "select. oort and power-of-choice need a training run (the reported losses).",
    )
    bandwidth: Literal["equal", "equal-finish", "min-energy"] = Field(
        "equal",
        description="Each selected client's share of its cell's uplink band (channel.access "
        "fdma). equal: 1/m; equal-finish: shares that end every upload at once; min-energy: "
        "the split of least radiated energy with every upload within round.deadline_s "
        "(after Yang et al., IEEE TWC 2021; scipy). Sync and hierarchical rounds only: "
        "async and buffered uploads start at different times (equal there).",
    )
    frequency: Literal["fixed", "deadline"] = Field(
        "fixed",
        description="Each selected client's CPU frequency. fixed: its scenario frequency; "
        "deadline: the lowest of its class's DVFS range at which its expected download, "
        "computation and upload fit round.deadline_s (Tran et al., INFOCOM 2019).",
    )
    steps: Literal["fixed", "deadline"] = Field(
        "fixed",
        description="Each selected client's local steps. fixed: its scenario steps; "
        "deadline: as many as fit round.deadline_s after its expected download and upload, "
        "at least 1, at most max_steps.",
    )
    csi: Literal["none", "last", "oracle"] = Field(
        "none",
        description="The channel state a policy sees: none; last: each client's SNR when "
        "it last uploaded; oracle: this round's SNR (the round's fading). Over the whole "
        "uplink band, interference not included.",
    )
    max_steps: Int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="steps=deadline: at most this many local steps (null: each client's "
        "scenario steps, so the policy only trims what would miss the deadline).",
    )
    choice_d: Int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="select=power-of-choice: the d candidates sampled in proportion to "
        "their data (null: 2 m; at most the candidates).",
    )
    oort_alpha: float = Field(
        2.0,
        ge=0,
        le=100,
        description="select=oort: the straggler penalty exponent alpha in (T / t_k)^alpha "
        "(2: the released selector's default).",
    )
    oort_round_time_s: float | None = Field(
        None,
        gt=0,
        le=MAX_TIME_S,
        description="select=oort: the preferred round time T (s); null: round.deadline_s.",
    )
    battery_weighted: bool = Field(
        False,
        description="select=battery: sample m in proportion to the reported battery level "
        "instead of taking the m fullest.",
    )
    class_: str | None = Field(
        None,
        alias="class",
        min_length=1,
        max_length=4096,
        description="A plug-in policy (docs/writing-a-policy.md): 'file.py:ClassName' "
        "(relative to the scenario file), 'package.module:ClassName' or the name of an "
        "installed one (entry points fedjoule.policies). Its select is used with "
        "select=custom, its allocate (if it has one) after the built-in allocators.",
    )
    options: dict[str, object] = Field(
        {}, max_length=1_000, description="Keyword arguments of the plug-in policy's class."
    )
    source: PluginSource | None = Field(
        None, description="Recorded when loaded: the plug-in policy's file and SHA-256."
    )

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)
    cross_checks = (_parameters,)

    @model_validator(mode="after")
    def _load_plugin(self):
        """Load policy.class under the plug-in trust rules and record its source."""
        if self.class_ is None:
            return self
        recorded = self.source.model_dump() if self.source else None
        try:
            cls, source = policy_class(self.class_, plugin_dirs(), recorded)
            if not isinstance(cls, Unchecked):
                check_options(cls, self.class_, self.options)
                if not decides(cls, "select" if self.select == CUSTOM else "allocate"):
                    raise PluginError(
                        f"{self.class_!r} has no select, which select=custom uses"
                        if self.select == CUSTOM
                        else f"{self.class_!r} has no allocate, so with select={self.select} "
                        "it decides nothing: set select to custom, or add an allocate"
                    )
        except PluginError as exc:
            message = f"class: {exc}"
            raise PydanticCustomError("cross_field", "{message}", {"message": message}) from None
        self.source = PluginSource(**source) if source else None
        return self

    @property
    def is_default(self) -> bool:
        """Every decision the scenario's (no observation is kept)."""
        return self.class_ is None and (
            self.select, self.bandwidth, self.frequency, self.steps, self.csi) == (
            "random", "equal", "fixed", "fixed", "none")  # fmt: skip


def has_dvfs_range(device_class) -> bool:
    """A class whose CPU frequency a policy may set: compute cpu (its dvfs table's training
    cluster, else [cpu_freq_min_hz, cpu_freq_max_hz]) or measured with a dvfs table."""
    kind = device_class.compute
    return kind == "cpu" or (kind == "measured" and device_class.dvfs is not None)


def _policy_scenario(v) -> Iterator[tuple[str, str]]:
    """The policy against the other sections (a Scenario cross-check)."""
    p = v.policy
    decided = [f"{name}={getattr(p, name)}" for name, default in (
        ("select", "random"), ("bandwidth", "equal"), ("frequency", "fixed"),
        ("steps", "fixed"), ("csi", "none")) if getattr(p, name) != default]  # fmt: skip
    if p.class_ is not None:
        decided.append(f"class={p.class_}")
    if not decided:
        return
    if v.protocol.kind not in PROTOCOLS:
        yield (
            "policy",
            f"policy {', '.join(decided)} runs in the built-in protocols "
            f"({', '.join(PROTOCOLS)}), not protocol.kind={v.protocol.kind}: leave policy "
            "at its defaults",
        )
    if v.protocol.kind in STREAMING and p.bandwidth != "equal":
        yield (
            "policy.bandwidth",
            f"policy.bandwidth={p.bandwidth} splits a round's band among clients that upload "
            f"together; under protocol.kind={v.protocol.kind} uploads start at different "
            "times on the cell's shared medium: allowed equal",
        )
    deadline = v.round.deadline_s
    for name, value in (("bandwidth", "min-energy"), ("frequency", "deadline"),
                        ("steps", "deadline")):  # fmt: skip
        if getattr(p, name) == value and deadline is None:
            yield f"policy.{name}", f"policy.{name}={value} needs round.deadline_s (got null)"
    if p.select == "oort" and p.oort_round_time_s is None and deadline is None:
        yield (
            "policy.oort_round_time_s",
            "select=oort needs the preferred round time: set policy.oort_round_time_s or "
            "round.deadline_s",
        )
    if p.select != "random" and v.training.participation != "fixed":
        yield (
            "policy.select",
            f"policy.select={p.select} chooses m clients; training.participation must be "
            "fixed (bernoulli participation is select=random's)",
        )
    name = v.algorithm.get("name", "fedavg") if isinstance(v.algorithm, dict) else None
    name = name or getattr(v.algorithm, "name", "fedavg")
    if p.select != "random" and name in DECLARATIONS and DECLARATIONS[name].learnt_selection:
        yield (
            "policy.select",
            f"policy.select={p.select} would replace algorithm.name={name}'s own selection "
            "weights: use select=random with it",
        )
    yield from _policy_physics(v, p)


def band_share_refusal(v) -> str | None:
    """Why a scenario's physics takes no band shares from a policy (None: it does)."""
    channel, traced = v.channel, v.population.capacity_trace is not None or (
        v.channel.trace is not None)  # fmt: skip
    if channel.access != "fdma" or traced:
        got = "a link or capacity trace" if traced else f"channel.access={channel.access}"
        return (
            "sets shares of an FDMA band on the channel model's rates: needs channel.access "
            f"fdma and no trace (got {got})"
        )
    return None


def _policy_physics(v, p) -> Iterator[tuple[str, str]]:
    """The band share needs FDMA and the channel model's rates; the frequency a DVFS range."""
    refusal = band_share_refusal(v)
    if p.bandwidth != "equal" and refusal:
        yield "policy.bandwidth", f"policy.bandwidth={p.bandwidth} {refusal}"
    if p.frequency == "deadline":
        if v.population.capacity_trace is not None:
            yield (
                "policy.frequency",
                "policy.frequency=deadline needs each class's DVFS model; "
                "population.capacity_trace sets the compute time",
            )
        fixed = [c.name for c in v.population.device_classes if not has_dvfs_range(c)]
        if fixed:
            yield (
                "policy.frequency",
                f"policy.frequency=deadline needs a DVFS range in every device class: "
                f"{', '.join(map(repr, fixed))} has none (allowed: compute cpu, or measured "
                "with a dvfs table)",
            )
