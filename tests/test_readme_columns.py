"""docs/outputs.md (the page the README points to for the run files) lists every column
rounds.csv has, in order (what a user reads is what the file holds)."""

import csv
import json
import re
from pathlib import Path

from fedjoule.report.results import ROUND_COLUMNS
from fedjoule.report.table import read_table

OUTPUTS = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"


def test_readme_lists_every_rounds_csv_column():
    text = OUTPUTS.read_text()
    section = text[text.index("## rounds.csv") :]
    listed = re.search(r"`([^`]*)`", section)[1]
    assert [c.strip() for c in listed.split(",")] == ROUND_COLUMNS


def readme_columns() -> list[str]:
    text = OUTPUTS.read_text()
    listed = re.search(r"`([^`]*)`", text[text.index("## rounds.csv") :])[1]
    return [c.strip() for c in listed.split(",")]


TACO = {  # no freeloaders; a low kappa makes TACO suspect benign clients at once
    "population.size": 10,
    "training.clients_per_round": 10,
    "availability.kind": "always",
    "round.deadline_s": None,
    "round.min_clients": 1,
    "algorithm.name": "taco",
    "algorithm.kappa": 0.25,
    "algorithm.zeta": 0,
    "training.rounds": 2,
}


def test_written_headers_are_the_readme_list_and_taco_reports_its_expulsions(tmp_path):
    """The header a default run and a TACO run write is docs/outputs.md's list; TACO's
    expulsions are reported without freeloaders: rounds.csv (so far, all benign) =
    summary.json = clients.csv's flagged clients (issue 22)."""
    import fedjoule

    tiny = {"training.rounds": 1, "population.size": 10, "round.min_clients": 1}
    fedjoule.run("default-theory", tmp_path / "d", overrides=tiny)
    fedjoule.run("default-theory", tmp_path / "t", overrides=TACO)
    for run in ("d", "t"):
        with (tmp_path / run / "rounds.csv").open() as f:
            assert next(csv.reader(f)) == readme_columns(), run
    rows = read_table(tmp_path / "t" / "rounds.csv")
    expelled = [int(r["expelled"]) for r in rows]
    assert expelled == [2, 6]  # (seed 0) clients expelled so far, after rounds 0 and 1
    assert [int(r["expelled_benign"]) for r in rows] == expelled  # no freeloaders: all benign
    assert {r["detection_tpr"] for r in rows} == {""}  # rates need freeloaders
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    flagged = sum(int(c["flagged"]) for c in read_table(tmp_path / "t" / "clients.csv"))
    assert (summary["expelled_clients"], summary["expelled_benign"]) == (6, 6) == (flagged, 6)
    assert summary["expelled_freeloaders"] == 0
    assert summary["warnings"][0] == (
        "freeloader detection expelled 6 benign clients of 10 (6 expelled in all); "
        "they are never selected again"
    )
    # two more rounds: every client is expelled, and the failed rounds say why
    fedjoule.run("default-theory", tmp_path / "all", overrides={**TACO, "training.rounds": 5})
    warnings = json.loads((tmp_path / "all" / "summary.json").read_text())["warnings"]
    assert warnings[0].endswith(
        "every client was expelled by round 2, later rounds trained nobody"
    )
    assert warnings[1].endswith("Likely cause: freeloader detection expelled every client "
                                "(see the warning before)")
    # fedavg expels nobody: the columns are empty, summary.json has no such fields
    assert {r["expelled"] for r in read_table(tmp_path / "d" / "rounds.csv")} == {""}
    assert "expelled_clients" not in json.loads((tmp_path / "d" / "summary.json").read_text())


def test_docs_list_every_clients_csv_column():
    """docs/outputs.md's clients.csv list is the columns clients.csv is written with."""
    from fedjoule.report.results import CLIENT_COLUMNS

    text = OUTPUTS.read_text()
    listed = re.search(r"`([^`]*)`", text[text.index("## clients.csv") :])[1]
    assert [c.strip() for c in listed.split(",")] == CLIENT_COLUMNS
