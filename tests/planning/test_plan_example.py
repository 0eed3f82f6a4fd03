"""The committed plan example (docs/plan-example) holds what its README says: K* falls
as SNR and bandwidth rise, with at least two distinct K*, and every cell's K* is the
cheapest of its row in plan.csv."""

import json
from pathlib import Path

from fedjoule.report.table import read_table

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "plan-example"


def test_kstar_is_non_increasing_in_snr_and_bandwidth():
    rows = read_table(EXAMPLE / "plan.csv")
    best = {}
    for cell in {(float(r["snr_db"]), float(r["bandwidth_hz"])) for r in rows}:
        mine = [r for r in rows if (float(r["snr_db"]), float(r["bandwidth_hz"])) == cell]
        cheapest = min(mine, key=lambda r: (float(r["E_total_j"]), int(r["K"])))
        assert [int(r["K"]) for r in mine if r["is_best"] == "1"] == [int(cheapest["K"])]
        best[cell] = int(cheapest["K"])
    snrs = sorted({s for s, _ in best})
    bands = sorted({b for _, b in best})
    assert len(set(best.values())) >= 2
    for b in bands:
        column = [best[s, b] for s in snrs]
        assert column == sorted(column, reverse=True), (b, column)
    for s in snrs:
        row = [best[s, b] for b in bands]
        assert row == sorted(row, reverse=True), (s, row)
    plan = json.loads((EXAMPLE / "plan.json").read_text())
    assert plan["breakeven"]["rounds_by_k"] == {
        "1": 167,
        "2": 115,
        "5": 46,
        "10": 43,
        "20": 39,
        "50": 23,
    }  # the R(K) docs/plan.md quotes
    assert (EXAMPLE / "kstar_breakeven.png").exists()
