"""The device-profile library: every profile loads and has a source for every value it sets;
a device class names one and overrides any field; `fedjoule profiles`; a run of a
built-in scenario on a profile spends the closed-form compute energy per step."""

import csv

import pytest
import yaml

from fedjoule import cli
from fedjoule.devices.library import load_profile, merged_class, profile_names
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario, scenario_yaml, validate
from fedjoule.scenarios.schema import DeviceClass, DvfsTable, RadioSection

ISSUE_PROFILES = {
    "phone-lte-highend",
    "phone-lte-midrange",
    "phone-lte-lowend",
    "phone-5g",
    "rpi4-wifi",
    "jetson-edge",
    "nbiot-sensor",
}
STATUS = ("verified", "modelling choice")  # every source says how far it was checked


def test_the_library_has_the_issues_profiles():
    assert ISSUE_PROFILES <= set(profile_names())


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_loads_validates_and_sources_every_value(name):
    profile = load_profile(name)
    assert profile.name == name
    assert profile.description and "\n" not in profile.description.strip()
    resolved = DeviceClass.model_validate({"profile": name})
    assert resolved.name == name and resolved.profile == name
    leaves = profile.leaves()
    assert leaves, "a profile sets values"
    assert set(profile.sources) == set(leaves), "one source per value, and no other"
    for field, source in profile.sources.items():
        assert len(source) > 20, field
        assert any(word in source.lower() for word in STATUS), (field, source)
    for field, value in leaves.items():  # the resolved class holds the profile's values
        section, _, key = field.rpartition(".")
        holder = {"radio": resolved.radio, "dvfs": resolved.dvfs}.get(section, resolved)
        held = getattr(holder, key)
        if key == "clusters":  # (a dvfs table's clusters: sections, compared as mappings)
            held = [cluster.model_dump() for cluster in held]
        assert held == value, field
    assert set(profile.values) <= set(DeviceClass.model_fields)
    assert set(profile.values.get("radio", {})) <= set(RadioSection.model_fields)
    assert set(profile.values.get("dvfs", {})) <= set(DvfsTable.model_fields)


def test_a_class_field_overrides_the_profile_and_radio_merges_field_by_field():
    c = DeviceClass.model_validate(
        {
            "profile": "phone-lte-highend",
            "name": "flagship",
            "share": 0.5,
            "measured_power_w": 3.3,
            "radio": {"downlink_w_per_mbps": 0.02},
        }
    )
    assert c.name == "flagship" and c.share == 0.5
    assert c.measured_power_w == 3.3  # the class wins
    profile = load_profile("phone-lte-highend")
    assert c.reference_seconds_per_sample == profile.values["reference_seconds_per_sample"]
    assert c.radio.model == "lte"  # from the profile
    assert c.radio.uplink_w_per_mbps == profile.values["radio"]["uplink_w_per_mbps"]
    assert c.radio.downlink_w_per_mbps == 0.02  # the class's radio field wins


def test_merged_class_leaves_a_class_without_profile_alone():
    data = {"name": "x", "share": 1.0}
    assert merged_class(data) is data


def test_an_unknown_profile_lists_the_available_ones():
    with pytest.raises(FedjouleError) as info:
        load_scenario("default-theory", ["population.device_classes=[{profile: phone-x}]"])
    text = str(info.value)
    assert "unknown device profile 'phone-x'" in text
    for name in profile_names():
        assert name in text


def test_scenario_yaml_records_the_resolved_class_and_reloads_the_same():
    s = load_scenario(
        "urban-macro",
        [
            "population.device_classes=[{profile: phone-lte-midrange, share: 0.6}, "
            "{profile: rpi4-wifi, share: 0.4, measured_power_w: 5.0}]"
        ],
    )
    recorded = yaml.safe_load(scenario_yaml(s))
    classes = recorded["population"]["device_classes"]
    assert [c["profile"] for c in classes] == ["phone-lte-midrange", "rpi4-wifi"]
    assert classes[0]["reference_seconds_per_sample"] == 0.45
    assert classes[1]["measured_power_w"] == 5.0
    assert set(classes[0]) == set(DeviceClass.model_fields)  # every field resolved
    assert validate(recorded, "scenario.yaml") == s


def test_cross_checks_see_the_profile_in_a_partly_invalid_file():
    """With another error in the file, the device class's checks run on the raw values with
    its profile merged in: a measured profile is not reported as missing its figures."""
    with pytest.raises(FedjouleError) as info:
        load_scenario(
            "default-theory",
            ["population.device_classes=[{profile: rpi4-wifi}]", "training.rounds=0"],
        )
    text = str(info.value)
    assert "training.rounds" in text
    assert "needs" not in text


def test_the_population_checks_see_the_profiles_names_in_a_partly_invalid_file():
    """Classes named by their profiles alone are not all taken for the default `phone`
    when another field is wrong; the same profile twice is still a repeated name."""
    two = "[{profile: phone-lte-midrange, share: 0.5}, {profile: rpi4-wifi, share: 0.5}]"
    with pytest.raises(FedjouleError) as info:
        load_scenario("default-theory", [f"population.device_classes={two}", "training.rounds=0"])
    assert "training.rounds" in str(info.value) and "unique" not in str(info.value)
    same = two.replace("rpi4-wifi", "phone-lte-midrange")
    with pytest.raises(FedjouleError) as info:
        load_scenario("default-theory", [f"population.device_classes={same}", "training.rounds=0"])
    assert "repeated: ['phone-lte-midrange']" in str(info.value)


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = cli.invoke(["profiles", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)


def test_cli_lists_the_profiles(capsys, wide):
    code, out, _ = run_cli(capsys)
    assert code == 0
    listed = [name for name in profile_names() if name in out]
    assert len(listed) >= 6 and set(listed) == set(profile_names())
    assert "measured" in out and "efficiency" in out  # compute kinds
    assert "lte" in out and "wifi" in out and "nbiot" in out  # radio models
    assert load_profile("rpi4-wifi").description in out


def test_cli_shows_a_profiles_fields_values_and_sources(capsys, wide):
    code, out, _ = run_cli(capsys, "rpi4-wifi")
    assert code == 0
    assert "reference_seconds_per_sample" in out and "0.6825" in out
    assert "federated-embedded-vision" in out  # the source of that value
    assert "radio.model" in out and "wifi" in out
    assert "default: Charging power while plugged in" in out  # a field the profile leaves unset
    assert "kappa" not in out  # (the cpu compute kind's, not used by compute: measured)


def test_cli_shows_the_resolved_radio_defaults_with_their_sources(capsys, wide):
    """phone-lte-midrange sets radio.model: lte, its slopes and its range; every other lte
    parameter is shown with the value the run uses (radio.resolve) and the paper it comes
    from, none as null; the ones it sets, with the profile's value and source."""
    from fedjoule.devices.radio import DEFAULTS, default_source

    code, out, _ = run_cli(capsys, "phone-lte-midrange")
    assert code == 0 and "null" not in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    profile = load_profile("phone-lte-midrange")
    own = profile.values["radio"]
    assert set(own) == {"model", "uplink_w_per_mbps", "downlink_w_per_mbps",
                        "uplink_max_mbps", "downlink_max_mbps"}  # fmt: skip
    for name, value in DEFAULTS["lte"].items():
        if name in own:
            assert f" {own[name]:.10g} " in lines[f"radio.{name}"], name
            assert profile.sources[f"radio.{name}"][:60] in " ".join(out.split()), name
            continue
        assert f" {value:.10g} " in lines[f"radio.{name}"], name
        assert default_source("lte", name) in " ".join(out.split()), name
    assert "radio.tail_s" in lines and " 11.576 " in lines["radio.tail_s"]
    assert "Huang et al., MobiSys 2012, Table 3" in lines["radio.tail_s"]
    assert " 1.2 " in lines["radio.uplink_base_power_w"]  # = base_power_w for lte


def test_cli_unknown_profile_exits_2(capsys):
    code, out, err = run_cli(capsys, "no-such-device")
    assert code == 2
    assert "unknown device profile 'no-such-device'" in err
    assert "rpi4-wifi" in err


def test_urban_macro_on_a_profile_spends_the_closed_form_per_step(tmp_path, capsys):
    """All of urban-macro's clients on phone-lte-midrange, 2 rounds: each client's compute
    energy is (rounds selected) x K x P x s_ref x (F / F_ref) x B."""
    from fedjoule.simulator.system_world import model_size

    overrides = [
        "population.device_classes=[{profile: phone-lte-midrange}]",
        "population.size=20",
        "training.rounds=2",
        "training.clients_per_round=5",
        "training.local_steps=3",
        "availability.kind=always",
        "round.deadline_s=null",
        "round.overcommit=1.0",
        "round.min_clients=1",
        "output.timeline_rounds=[]",
    ]
    args = ["run", "urban-macro", "--out", str(tmp_path / "run"), "-q", "--device", "cpu"]
    for item in overrides:
        args += ["--set", item]
    assert cli.invoke(args) == 0
    capsys.readouterr()

    s = load_scenario("urban-macro", overrides)
    _, forward = model_size(s)
    profile = load_profile("phone-lte-midrange").values
    step_j = (
        profile["measured_power_w"]
        * profile["reference_seconds_per_sample"]
        * forward
        / profile["reference_flops_per_sample"]
        * s.training.batch_size
    )
    with (tmp_path / "run" / "clients.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["selected"]) for r in rows) == 2 * 5
    for row in rows:
        assert row["device_class"] == "phone-lte-midrange"
        expected = int(row["selected"]) * 3 * step_j
        assert float(row["energy_compute_j"]) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    recorded = yaml.safe_load((tmp_path / "run" / "scenario.yaml").read_text())
    (cls,) = recorded["population"]["device_classes"]
    assert cls["profile"] == "phone-lte-midrange" and cls["measured_power_w"] == 4.0
