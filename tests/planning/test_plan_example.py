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


def test_the_5g_phone_plans_keep_kstar_50_with_x_above_the_last_breakpoint():
    """docs/plan-example/README.md, "The same study on 5G phones": K* = 50 in every cell
    for phone-5g and phone-5g-sa, each the cheapest of its cell, and every cell's x above
    the breakpoint 40 (the RRC promotion and tail keep communication expensive)."""
    for profile in ("phone-5g", "phone-5g-sa"):
        folder = EXAMPLE / "5g-phones" / profile
        rows = read_table(folder / "plan.csv")
        cells = {(r["snr_db"], r["bandwidth_hz"]) for r in rows}
        assert len(cells) == 16
        for cell in cells:
            mine = [r for r in rows if (r["snr_db"], r["bandwidth_hz"]) == cell]
            cheapest = min(mine, key=lambda r: float(r["E_total_j"]))
            assert int(cheapest["K"]) == 50 and cheapest["is_best"] == "1", (profile, cell)
        breakeven = json.loads((folder / "plan.json").read_text())["breakeven"]
        assert breakeven["rounds_by_k"] == {"1": 167, "5": 46, "50": 23}
        assert breakeven["breakpoints"][-1]["x_low"] == 40.0
        assert min(c["x"] for c in breakeven["cells"]) > 1400
        assert {c["K_star"] for c in breakeven["cells"]} == {50}
