"""The command layer (fedjoule/commands/): run, sweep, plan, capacity, validate and report
as functions of typed options under both the command line and the API; nothing in the
library imports the command line."""

import ast
from pathlib import Path

import pytest

import fedjoule
from fedjoule.commands.capacity import CapacityOptions, capacity
from fedjoule.commands.common import API_WORDS, CLI_WORDS, check_resume, check_tracking
from fedjoule.commands.validate import ValidateOptions, validate
from fedjoule.errors import FedjouleError
from fedjoule.planning.capacity import plan_capacity
from fedjoule.scenarios.plausibility import plausibility_warnings
from fedjoule.simulator.system_world import build_system_world

PACKAGE = Path(fedjoule.__file__).parent
SMALL = {"population.size": 40, "training.clients_per_round": 4, "round.min_clients": 1}


def imported(path: Path) -> set[str]:
    """The modules a source file imports, inside functions too."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def test_nothing_in_the_library_imports_the_command_line():
    shell = ("cli.py", "cli_options.py", "cli_views.py")
    library = [p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.name not in shell]
    assert len(library) > 50
    cli = {f"fedjoule.{name[:-3]}" for name in shell} | {"fedjoule.cli"}
    importers = [str(p) for p in library if imported(p) & cli]
    assert importers == []


def test_validate_returns_the_checked_scenario_and_its_warnings():
    sets = ["population.size=40", "channel.uplink_bandwidth_hz=1e12"]
    checked = validate(ValidateOptions("default-theory", sets, no_train=True))
    assert (checked.scenario.name, checked.scenario.population.size) == ("default-theory", 40)
    assert not checked.unchecked
    assert checked.warnings == plausibility_warnings(checked.scenario)
    assert checked.warnings == [
        "channel.uplink_bandwidth_hz = 1e+12: above 10 GHz of bandwidth; was it given in bit/s?"
    ]


def test_capacity_over_seeds_needs_no_world_of_its_own(tmp_path):
    """With seeds every seed builds its own world: the command builds none beforehand, and
    its figures equal those planned with the scenario's world given."""
    scenario = fedjoule.load_scenario("default-theory", SMALL)
    options = CapacityOptions(search="none", rounds=3, seeds=[0, 1])
    done = capacity(scenario, tmp_path / "c", options)
    given = plan_capacity(
        scenario, build_system_world(scenario), search="none", rounds=3, seeds=[0, 1]
    )
    assert done.figures == given
    assert (tmp_path / "c" / "capacity.json").is_file()


def test_a_run_s_resume_and_tracking_checks_are_one_and_say_each_caller_s_words():
    """commands.common checks a resumed or tracked run for the command line and the API,
    each message in its caller's words (the flags, or the arguments)."""
    cases = [
        (
            lambda w: check_tracking(True, True, False, w),
            "--track: a resumed run keeps the tracking it started with (its scenario.yaml), "
            "and a --no-train run is not tracked",
            "track=: a resumed run keeps the tracking it started with (its scenario.yaml)",
        ),
        (
            lambda w: check_resume(True, True, "out", w),
            "--resume continues a run as it was; --set cannot change it",
            "resume=True continues a run as it was; overrides cannot change it",
        ),
        (
            lambda w: check_resume(True, False, None, w),
            "--resume needs the run folder to continue: --out DIR",
            "resume=True needs the run folder to continue: out=...",
        ),
    ]
    for check, cli_said, api_said in cases:
        for words, said in ((CLI_WORDS, cli_said), (API_WORDS, api_said)):
            with pytest.raises(FedjouleError) as caught:
                check(words)
            assert str(caught.value) == said
    with pytest.raises(FedjouleError, match="a --no-train run is not tracked"):
        check_tracking(True, False, True, CLI_WORDS)
    check_tracking(False, True, True, CLI_WORDS)  # nothing tracked: nothing refused
    check_tracking(True, False, False, API_WORDS)  # a new training run may be tracked
    check_resume(False, True, None, CLI_WORDS)  # a new run may change its scenario
    check_resume(True, False, "out", API_WORDS)
