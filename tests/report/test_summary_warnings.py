"""summary.json's round counts (failed rounds, selected, arrived, drops by cause) equal the
sums over rounds.csv, also after a resume; its `warnings` name failed rounds and dropped
clients past the thresholds; the printed summary shows long times in min / h / d."""

import json

import pytest
from rich.console import Console

from fedjoule import cli_views
from fedjoule.cli import invoke
from fedjoule.cli_views import summary_value
from fedjoule.report.results import (
    DROP_COLUMNS,
    read_rounds,
    round_totals,
    round_warnings,
)
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_run import run_system

TOTALS = {
    "rounds_failed": "failed",
    "selected_total": "selected",
    "arrived_total": "arrived",
    "dropped_total": "dropped",
    **{c: c for c in DROP_COLUMNS},
}
# default's 100 clients need about 5 to 20 ms a round: a 6 ms deadline drops half of them
TIGHT = ["training.rounds=8", "round.deadline_s=0.006"]


def assert_totals_are_the_sums(summary: dict, rows: list[dict]) -> None:
    for key, column in TOTALS.items():
        assert summary[key] == sum(int(r[column]) for r in rows), key
    assert summary["arrived_total"] + summary["dropped_total"] == summary["selected_total"]
    assert summary["dropped_total"] == sum(summary[c] for c in DROP_COLUMNS)


def test_learning_run_totals_equal_the_sums_over_rounds_csv(tmp_path):
    out, summary = run_scenario(
        load_scenario("default-theory", TIGHT), tmp_path / "run", device="cpu"
    )
    rows = read_rounds(out / "rounds.csv")
    assert_totals_are_the_sums(summary, rows)
    assert summary["dropped_deadline"] > 0 and summary["rounds_failed"] > 0  # drops to count
    assert json.loads((out / "summary.json").read_text()) == summary


def test_system_run_totals_equal_the_sums_over_rounds_csv(tmp_path):
    s = load_scenario("default-theory", ["population.size=2000", "model.name=mlp", *TIGHT])
    out, summary = run_system(s, tmp_path / "run")
    rows = read_rounds(out / "rounds.csv")
    assert_totals_are_the_sums(summary, rows)
    assert summary["dropped_deadline"] == summary["selected_total"] == 80  # all too slow
    assert summary["rounds_failed"] == 8 and summary["arrived_total"] == 0
    (warning,) = summary["warnings"]
    assert warning.startswith("8 of 8 rounds failed (100 %; fewer than round.min_clients = 5")
    assert "0 of 80 selected clients arrived, 80 (100 %) were dropped" in warning
    assert "Likely cause: dropped_deadline (80, 100 % of the drops)" in warning
    assert "round.deadline_s = 0.006 s" in warning


def test_resumed_run_has_the_uninterrupted_totals(tmp_path):
    """Stopped after 3 rounds with a 4th row written but not checkpointed (as a kill between
    the two leaves it), then resumed: the totals count every round once."""
    s = load_scenario("default-theory", TIGHT)
    _, full = run_scenario(s, tmp_path / "full", device="cpu")
    out = tmp_path / "stopped"
    run_scenario(s, out, device="cpu", stop_after=3)
    with (out / "rounds.csv").open("a") as f:  # cut back to the checkpoint on resume
        f.write((out / "rounds.csv").read_text().splitlines()[-1] + "\n")
    _, resumed = run_scenario(None, out, device="cpu", resume=True)
    assert len(read_rounds(out / "rounds.csv")) == 8
    for key in [*TOTALS, "warnings"]:
        assert resumed[key] == full[key], key
    assert_totals_are_the_sums(resumed, read_rounds(out / "rounds.csv"))


def rows_of(failed: int, selected: int, arrived: int, rounds: int = 100, **drops) -> list:
    """`rounds` rows: the first `failed` failed; the clients in the first row."""
    rows = [dict(failed=int(r < failed), selected=0, arrived=0, dropped=0) for r in range(rounds)]
    rows[0].update(selected=selected, arrived=arrived, dropped=selected - arrived)
    rows[0].update(drops)
    return rows


def warnings_of(rows) -> list[str]:
    return round_warnings(rows, round_totals(rows), load_scenario("default-theory"))


@pytest.mark.parametrize(("failed", "warned"), [(25, False), (26, True)])
def test_failed_rounds_warn_past_a_quarter(failed, warned):
    rows = rows_of(failed, selected=1000, arrived=1000)
    for row in rows[1:]:
        row["selected"] = 10  # failed with clients to select: not for want of them
    assert bool(warnings_of(rows)) == warned
    if warned:
        (text,) = warnings_of(rows)
        assert text.startswith("26 of 100 rounds failed (26 %;")


@pytest.mark.parametrize(("arrived", "warned"), [(500, False), (499, True)])
def test_dropped_clients_warn_past_half_of_the_selected(arrived, warned):
    rows = rows_of(0, 1000, arrived, dropped_outage=1000 - arrived - 100, dropped_offline=100)
    assert bool(warnings_of(rows)) == warned
    if warned:
        (text,) = warnings_of(rows)
        assert "rounds failed" not in text
        assert "499 of 1,000 selected clients arrived, 501 (50 %) were dropped" in text
        assert "Likely cause: dropped_outage (401, 80 % of the drops)" in text


def test_over_commit_drops_do_not_warn():
    """round.overcommit > 1 selects clients to be dropped: those drops are not a problem."""
    assert warnings_of(rows_of(0, 1000, 400, dropped_overcommit=600)) == []
    (text,) = warnings_of(rows_of(0, 1000, 300, dropped_overcommit=100, dropped_battery=600))
    assert "600 (60 %) were dropped (over-commit drops not counted)" in text
    assert "dropped_battery (600, 100 % of the drops)" in text


def test_rounds_without_clients_name_availability():
    rows = rows_of(40, 10, 10)  # rounds 1..39 failed with nobody selected
    (text,) = warnings_of(rows)
    assert "40 of 100 rounds failed" in text
    assert "in 39 failed rounds fewer clients than round.min_clients were online" in text


def test_no_rounds_no_warning():
    assert warnings_of([]) == [] and round_totals([])["selected_total"] == 0


def test_the_cli_prints_the_totals_and_the_warning_in_yellow(tmp_path, monkeypatch, capsys):
    recorded = Console(record=True, force_terminal=True, width=400)
    monkeypatch.setattr(cli_views, "errors", recorded)
    sets = [a for s in ["model.name=mlp", *TIGHT] for a in ("--set", s)]
    # (default-theory: the measured phones of `default` also warn of downloads faster than
    # their radios' measured range)
    args = ["run", "default-theory", "--no-train", "-q", "--set", "population.size=2000", *sets]
    assert invoke([*args, "--out", str(tmp_path / "tight")]) == 0
    out = capsys.readouterr().out
    assert "rounds_failed" in out and "dropped_deadline" in out and "selected_total" in out
    assert "\x1b[33mwarning:\x1b[0m 8 of 8 rounds failed" in recorded.export_text(
        styles=True, clear=False
    )
    summary = json.loads((tmp_path / "tight" / "summary.json").read_text())
    assert summary["warnings"] and summary["warnings"][0] in recorded.export_text()
    # no deadline: every client arrives, no warning, an empty list
    assert invoke([*args, "--set", "round.deadline_s=null", "--out", str(tmp_path / "ok")]) == 0
    assert "warning" not in recorded.export_text() + capsys.readouterr().out
    assert json.loads((tmp_path / "ok" / "summary.json").read_text())["warnings"] == []


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("sim_time_s", 25_000.0, "25,000 (6.9 h)"),
        ("sim_time_s", 90.0, "90 (1.5 min)"),
        ("sim_time_s", 59.5, "59.5"),
        ("sim_time_s", 3.749, "3.749"),
        ("time_to_target_s", 3600.0, "3,600 (1.0 h)"),
        ("wall_time_s", 172_800.0, "172,800 (2.0 d)"),
        ("sim_time_s", 100_000.0, "100,000 (27.8 h)"),
        ("energy_total_j", 25_000.0, "25,000"),  # not a time
        ("energy_total_j", 0.01234, "0.01234"),
        ("selected_total", 1000, "1,000"),
        ("time_to_target_s", None, "—"),
        ("engine", "numpy", "numpy"),
    ],
)
def test_summary_values_as_printed(key, value, text):
    assert summary_value(key, value) == text
