"""The README lists every column rounds.csv has, in order (what a user reads is what the
file holds)."""

import re
from pathlib import Path

from fedjoule.report.results import ROUND_COLUMNS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_lists_every_rounds_csv_column():
    text = README.read_text()
    section = text[text.index("## rounds.csv") :]
    listed = re.search(r"`([^`]*)`", section)[1]
    assert [c.strip() for c in listed.split(",")] == ROUND_COLUMNS
