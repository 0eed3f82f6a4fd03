"""The device sections: compute, radio, CPU frequency tables, device classes and the
population."""

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fedjoule.channel.trace import trace_path
from fedjoule.devices.dvfs import cpu_power_w, freq_range_hz, out_of_table, training_cluster
from fedjoule.devices.fedscale import check_file
from fedjoule.devices.library import merged_class, unknown_profile_message
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.schema.base import MAX_CLIENTS, MAX_DB, MAX_TIME_S, Int, Invalid, Section
from fedjoule.scenarios.schema.learning import _data_file


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
