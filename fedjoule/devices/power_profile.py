"""Reading an Android power_profile.xml as plain data: its CPU cluster tables become a
device class's `dvfs` table (`fedjoule profiles --import FILE`).

The file is read through fedjoule.datafile (a regular file of at most MAX_BYTES["power
profile"]) and parsed by expat with a DOCTYPE refused at its start, so no entity can be
declared or expanded and nothing outside the file is fetched. Only the elements
<device>, <item name=...>, <array name=...> and <value> are read, as numbers.
"""

import hashlib
import math
import xml.parsers.expat

import yaml
from pydantic import ValidationError

from fedjoule.datafile import read_data_file, shown
from fedjoule.devices.dvfs import cores_used, training_cluster
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.schema import DvfsTable

KIND = "power profile"
# the file's voltages of its controllers (mV), the same battery feeding the CPU
VOLTAGE_KEYS = ("modem.controller.voltage", "wifi.controller.voltage",
                "bluetooth.controller.voltage", "gps.voltage")  # fmt: skip


class _Reader:
    """expat callbacks collecting <item> texts and <array> lists by name."""

    def __init__(self, label: str):
        self.label = label
        self.items: dict[str, list[str]] = {}  # name -> every text it was given
        self.arrays: dict[str, list[list[str]]] = {}
        self.stack: list[tuple[str, str]] = []  # (element, name)
        self.text: list[str] = []

    def doctype(self, *_):
        raise FedjouleError(
            f"{self.label}: has a DOCTYPE; a power_profile.xml needs none, and a DOCTYPE "
            "(its entities) is refused"
        )

    def start(self, tag: str, attrs: dict):
        parent = self.stack[-1][0] if self.stack else None
        allowed = {None: ("device",), "device": ("item", "array"), "array": ("value",)}
        if tag not in allowed.get(parent, ()):
            raise FedjouleError(
                f"{self.label}: unexpected element <{tag}>"
                + (f" inside <{parent}>" if parent else "")
                + "; a power_profile.xml has <device> with <item> and <array> of <value>"
            )
        name = attrs.get("name", "")
        if tag == "array":
            self.arrays.setdefault(name, []).append([])
        self.stack.append((tag, name))
        self.text = []

    def end(self, tag: str):
        _, name = self.stack.pop()
        text = "".join(self.text).strip()
        if tag == "item":
            self.items.setdefault(name, []).append(text)
        elif tag == "value":
            self.arrays[self.stack[-1][1]][-1].append(text)
        self.text = []

    def chars(self, data: str):
        self.text.append(data)


def parse(data: bytes, label: str) -> tuple[dict, dict]:
    """({item name: [texts]}, {array name: [[value texts]]}) of a power_profile.xml."""
    reader = _Reader(label)
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = reader.doctype
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.chars
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise FedjouleError(
            f"{label}: not well-formed XML ({xml.parsers.expat.errors.messages[exc.code]}, "
            f"line {exc.lineno})"
        ) from None
    return reader.items, reader.arrays


def _number(label: str, field: str, text: str, whole: bool = False) -> float:
    """A finite, non-negative number (a whole one when asked) or a FedjouleError."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < int(whole) or (whole and value != int(value)):
        what = "a whole number of at least 1" if whole else "a finite number of at least 0"
        raise FedjouleError(f"{label}: field {field}: value {text[:40]!r} is not {what}")
    return value


def _one(label: str, table: dict, field: str) -> list | None:
    entries = table.get(field)
    if entries is not None and len(entries) > 1:
        raise FedjouleError(f"{label}: field {field}: given {len(entries)} times; give it once")
    return entries[0] if entries else None


def clusters_of(label: str, items: dict, arrays: dict) -> tuple[float, list[dict]]:
    """(cpu.active mA, the clusters as dvfs table mappings) of a parsed file."""
    cores = _one(label, arrays, "cpu.clusters.cores")
    if cores is None:
        legacy = "cpu.speeds.cluster0" in arrays or "cpu.speeds" in arrays
        raise FedjouleError(
            f"{label}: field cpu.clusters.cores: missing; fedjoule reads the cluster form "
            "(cpu.clusters.cores, cpu.core_speeds.clusterN, cpu.core_power.clusterN)"
            + ("; this file has the older cpu.speeds form" if legacy else "")
        )
    clusters = []
    for k, text in enumerate(cores):
        speeds_key, power_key = f"cpu.core_speeds.cluster{k}", f"cpu.core_power.cluster{k}"
        speeds, power = _one(label, arrays, speeds_key), _one(label, arrays, power_key)
        for key, values in ((speeds_key, speeds), (power_key, power)):
            if not values:
                raise FedjouleError(f"{label}: field {key}: missing or empty")
        if len(speeds) != len(power):
            raise FedjouleError(
                f"{label}: field {power_key}: value has {len(power)} entries, {speeds_key} "
                f"{len(speeds)}; one current per speed"
            )
        cluster_key = f"cpu.cluster_power.cluster{k}"
        cluster_ma = _one(label, items, cluster_key)
        clusters.append({
            "cores": int(_number(label, "cpu.clusters.cores", text, whole=True)),
            "core_speeds_khz": [_number(label, speeds_key, t) for t in speeds],
            "core_power_ma": [_number(label, power_key, t) for t in power],
            "cluster_power_ma": 0.0 if cluster_ma is None
            else _number(label, cluster_key, cluster_ma),
        })  # fmt: skip
    active = _one(label, items, "cpu.active")
    return (0.0 if active is None else _number(label, "cpu.active", active)), clusters


def file_voltage_v(label: str, items: dict) -> float | None:
    """The voltage the file gives its controllers (V), when its non-zero ones agree."""
    given = {_number(label, key, _one(label, items, key)) for key in VOLTAGE_KEYS if items.get(key)}
    given.discard(0.0)
    return given.pop() / 1000 if len(given) == 1 else None


def _checked(label: str, table: dict):
    """The table validated as a scenario's dvfs field (a DvfsTable), with the training
    cluster and its cores filled in; the first problem names the field."""
    try:
        checked = DvfsTable.model_validate(table)
        return checked.model_copy(
            update={"cluster": training_cluster(checked), "cores_used": cores_used(checked)}
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise FedjouleError(f"{label}: field dvfs.{where}: {error['msg']}") from None


def import_table(path, voltage_v: float | None = None) -> str:
    """The device class fields (`dvfs`, and `battery_j` when the file gives
    battery.capacity) of a power_profile.xml, as YAML with its source in comments."""
    label = shown(path)
    data = read_data_file(path, "", KIND)
    items, arrays = parse(data, label)
    active_ma, clusters = clusters_of(label, items, arrays)
    from_file = file_voltage_v(label, items)
    if voltage_v is None and from_file is None:
        raise FedjouleError(
            f"{label}: field {VOLTAGE_KEYS[0]}: missing or 0, as are the other controller "
            "voltages; give the voltage of the phone's battery with --voltage-v"
        )
    volts = from_file if voltage_v is None else voltage_v
    why = "--voltage-v" if voltage_v is not None else "the file's controller voltage"
    table = _checked(label, {"voltage_v": volts, "active_ma": active_ma, "clusters": clusters})
    fields: dict = {"dvfs": table.model_dump()}
    capacity = _one(label, items, "battery.capacity")
    lines = [
        f"# from {label} (SHA-256 {hashlib.sha256(data).hexdigest()})",
        f"# power = current x {volts:g} V ({why}); cluster: the highest top speed, all cores",
    ]
    if capacity is not None:
        mah = _number(label, "battery.capacity", capacity)
        fields["battery_j"] = round(mah * volts * 3.6, 6)  # mAh x V x 3600 s / 1000
        lines.append(f"# battery_j = battery.capacity {mah:g} mAh x {volts:g} V x 3.6")
    body = yaml.safe_dump(fields, sort_keys=False, default_flow_style=None, width=88)
    return "\n".join(lines) + "\n" + body


def import_command(name: str | None, path: str | None, voltage_v: float | None) -> str:
    """`fedjoule profiles --import FILE [--voltage-v V]`: the YAML, or a FedjouleError for
    a misuse of the options."""
    if path is None:
        raise FedjouleError("--voltage-v goes with --import FILE")
    if name is not None:
        raise FedjouleError(f"--import reads a file; give no profile name with it (got {name!r})")
    if voltage_v is not None and not (math.isfinite(voltage_v) and 0 < voltage_v <= 100):
        raise FedjouleError(f"--voltage-v {voltage_v!r}: give a voltage above 0 and at most 100 V")
    return import_table(path, voltage_v)
