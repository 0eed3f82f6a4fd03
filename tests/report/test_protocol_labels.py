"""Under async a "round" is a server version (issue 26): summary.json says what a round
counts, plots name the protocol and their round axis, tables add a protocol column."""

import io

from rich.console import Console

from fedjoule.report import figures
from fedjoule.report.figures import PlotContext
from fedjoule.report.results import ROUND_COUNTS, with_round_totals
from fedjoule.report.summary_tables import summary_table
from fedjoule.scenarios.loading import load_scenario


def test_summary_says_the_protocol_and_what_its_rounds_count(tmp_path):
    for kind, extra in (("sync", []), ("async", ["round.deadline_s=null"])):
        scenario = load_scenario("default-theory", [f"protocol.kind={kind}", *extra])
        summary = with_round_totals({"rounds_completed": 0}, tmp_path / "none.csv", scenario)
        assert (summary["protocol"], summary["round_counts"]) == (kind, ROUND_COUNTS[kind])
    assert ROUND_COUNTS["async"].startswith("server versions (one per aggregated update")


def test_plots_name_a_protocol_other_than_sync():
    sync, asynchronous = PlotContext("s", "fedavg", protocol="sync"), PlotContext(
        "s", "fedavg", protocol="async"
    )
    assert figures.plot_title("x", sync) == "x\nscenario s · algorithm fedavg"
    assert figures.plot_title("x", asynchronous) == (
        "x\nscenario s · algorithm fedavg · protocol async"
    )
    assert figures.plot_title("x", [sync, asynchronous]).endswith("protocols async, sync")
    assert [figures.round_label(c) for c in ([sync], [asynchronous], [sync, asynchronous])] == [
        "round",
        "server version",
        "round or version",
    ]


def test_tables_add_a_protocol_column_when_one_is_not_sync():
    def shown(rows) -> str:
        console = Console(file=io.StringIO(), width=200, record=True)
        console.print(summary_table(rows))
        return console.export_text()

    row = {"run": "a", "final_accuracy": 0.5, "energy_total_j": 1.0, "sim_time_s": 2.0}
    assert "protocol" not in shown([{**row, "protocol": "sync"}])
    text = shown([{**row, "protocol": "sync"}, {**row, "run": "b", "protocol": "async"}])
    assert "protocol" in text and "async" in text and "│ b " in text
