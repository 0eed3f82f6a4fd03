"""Scenarios: built-ins validate, overrides apply, bad input gets a message naming the field."""

import subprocess
import sys

import pytest

from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import builtin_names, load_scenario
from fedjoule.scenarios.reference import reference_markdown


@pytest.mark.parametrize("name", builtin_names())
def test_builtins_validate(name):
    assert load_scenario(name).name == name


def test_required_builtins_exist():
    assert {"default", "default-theory", "mnist-dirichlet"} <= set(builtin_names())
    default = load_scenario("default-theory")
    assert default.population.size >= 50 and default.training.clients_per_round >= 10
    assert default.dataset.name == "synthetic" and default.algorithm.name == "fedavg"


def test_overrides_are_parsed_as_yaml():
    s = load_scenario(
        "default-theory",
        [
            "training.local_steps=20",
            "channel.snr_db=5.5",
            "round.deadline_s=null",
            "algorithm.name=fedprox",
            "algorithm.mu=0.5",
        ],
    )
    assert s.training.local_steps == 20 and s.channel.snr_db == 5.5
    assert s.round.deadline_s is None and s.algorithm.mu == 0.5


def test_misspelled_field_is_named_with_a_suggestion(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("training:\n  local_step: 5\n")
    with pytest.raises(FedjouleError) as err:
        load_scenario(path)
    text = str(err.value)
    assert str(path) in text and "training.local_step" in text and "local_steps" in text


def test_out_of_range_value_names_field_value_and_bound(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("channel:\n  uplink_bandwidth_hz: -5\n")
    with pytest.raises(FedjouleError) as err:
        load_scenario(path)
    text = str(err.value)
    assert "channel.uplink_bandwidth_hz" in text and "-5" in text and "greater than 0" in text


def test_unknown_algorithm_lists_the_valid_ones():
    with pytest.raises(FedjouleError) as err:
        load_scenario("default-theory", ["algorithm.name=fedsgd"])
    assert "'fedavg'" in str(err.value) and "'fedprox'" in str(err.value)


def test_unknown_scenario_name_lists_builtins():
    with pytest.raises(FedjouleError, match="mnist-dirichlet"):
        load_scenario("no-such-scenario")


def test_cli_prints_error_without_traceback_and_exits_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("population:\n  size: 0\n")
    proc = subprocess.run(
        [sys.executable, "-m", "fedjoule.cli", "validate", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "population.size" in proc.stderr and "Traceback" not in proc.stderr


def test_reference_page_is_up_to_date():
    """docs/scenario-reference.md is generated; regenerate with `make reference`."""
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "scenario-reference.md"
    assert page.read_text() == reference_markdown()


def test_every_field_is_documented():
    from pydantic import BaseModel

    from fedjoule.scenarios.schema import Scenario

    def walk(model):
        for name, info in model.model_fields.items():
            annotation = info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from walk(annotation)
            elif name != "algorithm":
                yield model.__name__, name, info.description

    missing = [(m, n) for m, n, d in walk(Scenario) if not d]
    assert not missing


@pytest.mark.parametrize(
    ("override", "hint"),
    [
        ("channel.fading=rayliegh", "(did you mean 'rayleigh'?)"),
        ("availability.kind=markv", "(did you mean 'markov'?)"),
        ("population.device_classes=[{radio: {model: ltee}}]", "(did you mean 'lte'?)"),
        ("algorithm.name=fedavgg", "unknown algorithm 'fedavgg' (did you mean 'fedavg'?)"),
        ("population.device_classes=[{profile: phone-5gg}]", "(did you mean 'phone-5g'?)"),
    ],
)
def test_a_misspelt_choice_names_the_closest_allowed_value(override, hint):
    with pytest.raises(FedjouleError) as info:
        load_scenario("default", [override])
    assert hint in str(info.value)


def test_a_far_off_choice_gets_no_guess():
    with pytest.raises(FedjouleError) as info:
        load_scenario("default", ["channel.fading=zzzzzz"])
    assert "did you mean" not in str(info.value) and "'rician'" in str(info.value)


def test_relative_data_files_are_found_from_the_scenario_folder(tmp_path, monkeypatch):
    """channel.trace and availability.trace_file resolve as plug-ins do: from the scenario
    file's folder, then the working folder; a missing one names every place looked at."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "on.csv").write_text("client,start_s,end_s\n0,0,1000\n")
    (folder / "up.csv").write_text("t,mbps\n0,5\n1,6\n")
    scenario = folder / "s.yaml"
    scenario.write_text(
        "availability: {kind: trace, trace_file: on.csv}\n"
        "channel: {trace: {uplink: {file: up.csv, column: mbps, time_column: t}}}\n"
    )
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    s = load_scenario(str(scenario))
    assert s.availability.trace_file == str(folder / "on.csv")
    assert s.channel.trace.uplink.file == str(folder / "up.csv")
    with pytest.raises(FedjouleError) as info:
        load_scenario(str(scenario), ["availability.trace_file=gone.csv"])
    assert (
        f"field 'availability.trace_file' (--set): gone.csv not found (looked at "
        f"{folder / 'gone.csv'}, {tmp_path / 'gone.csv'})"
    ) in str(info.value)
