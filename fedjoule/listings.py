"""What the command line lists and converts of the device data: the built-in scenarios
(`fedjoule scenarios`), the device profiles with every value's source (`fedjoule
profiles`, and `--import` of an Android power_profile.xml) and FedScale traces as JSON
(`fedjoule traces convert`). The command line imports this module when such a command
runs: it loads the scenario schema, which `fedjoule --help` goes without."""

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fedjoule.devices import radio
from fedjoule.devices.dvfs import table_rows
from fedjoule.devices.fedscale import to_json_text
from fedjoule.devices.library import load_profile, profile_names, unknown_profile_message
from fedjoule.devices.power_profile import import_command
from fedjoule.errors import FedjouleError
from fedjoule.scenarios import loading
from fedjoule.scenarios.schema import DeviceClass

__all__ = ["import_command", "print_profiles", "print_scenarios", "to_json_text"]


def print_scenarios(console: Console) -> None:
    """The built-in scenarios and their descriptions, as a table."""
    table = Table(show_header=True)
    table.add_column("name")
    table.add_column("description")
    for name in loading.builtin_names():  # (through the module: one place to look them up)
        table.add_row(name, loading.load_scenario(name).description)
    console.print(table)


def print_profiles(console: Console, name: str | None) -> None:
    """The library's profiles as a table (name None), or one profile's every value with
    its source; an unknown name is a FedjouleError."""
    if name is None:
        table = Table(show_header=True)
        for column in ("name", "description", "compute", "radio"):
            table.add_column(column, overflow="fold")
        for entry in profile_names():
            profile = load_profile(entry)
            resolved = DeviceClass.model_validate({"profile": entry})
            table.add_row(entry, profile.description, resolved.compute, resolved.radio.model)
        console.print(table)
        return
    if name not in profile_names():
        raise FedjouleError(unknown_profile_message(name))
    profile = load_profile(name)
    console.print(
        Text.assemble(Text(name, style="bold"), f"  {profile.description}"), soft_wrap=True
    )
    table = Table(show_header=True, box=None, padding=(0, 1, 0, 2))
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    resolved = DeviceClass.model_validate({"profile": name})
    for field, value, source in profile_rows(profile, resolved):
        shown = f"{value:.10g}" if isinstance(value, float) else f"{value}"
        table.add_row(Text(field), Text(shown), Text(source))
    console.print(table)


# The DeviceClass fields each compute kind uses (fedjoule/devices/population.py)
COMPUTE_FIELDS = {
    "cpu": (
        "cpu_freq_min_hz",
        "cpu_freq_max_hz",
        "kappa",
        "flops_per_cycle",
        "cpu_freq_hz",
        "dvfs",
    ),
    "accelerator": ("peak_flops", "efficiency", "active_power_w", "compute_spread_sigma"),
    "efficiency": ("flops_per_s", "flops_per_joule", "compute_spread_sigma"),
    "measured": (
        "reference_seconds_per_sample",
        "reference_flops_per_sample",
        "measured_power_w",
        "compute_spread_sigma",
        "cpu_freq_hz",
        "dvfs",
    ),
}


def profile_rows(profile, resolved) -> list[tuple[str, object, str]]:
    """(field, value, source) of every value a run on the profile uses, after defaults:
    the compute kind's fields, the radio's resolved parameters (fedjoule/devices/radio.py),
    the battery's; a source is the profile's, else the default's."""
    model = resolved.radio.model
    every = set().union(*COMPUTE_FIELDS.values())
    skipped = {"profile", "share", "radio", "dvfs"} | (
        every - set(COMPUTE_FIELDS[resolved.compute])
    )
    if model in radio.MEASURED:
        skipped.add("rx_power_w")  # (receiving draws base_power_w)
    if resolved.cpu_freq_hz is None:
        skipped.add("cpu_freq_hz")  # (unset: drawn, or the dvfs table's top speed)
    rows = []
    for field, info in type(resolved).model_fields.items():
        if field in skipped:
            continue
        source = profile.sources.get(field) or (
            "the name of the profile" if field == "name" else f"default: {info.description}"
        )
        rows.append((field, getattr(resolved, field), source))
    if resolved.dvfs is not None and "dvfs" in COMPUTE_FIELDS[resolved.compute]:
        rows += table_rows(resolved.dvfs, profile.sources)
    rows.append(("radio.model", model, profile.sources.get("radio.model", "default")))
    params = radio.resolve(resolved.radio, 0.0, 0.0)
    for field in radio.PARAMETERS:
        given = getattr(resolved.radio, field) is not None
        if field in radio.parameters_used(model) or given:
            source = profile.sources.get(f"radio.{field}") if given else None
            source = source or radio.default_source(model, field)
            rows.append((f"radio.{field}", getattr(params, field), source))
    return rows
