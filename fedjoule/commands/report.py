"""`report`: compare finished runs (report/compare.py): their curves, report.csv with
their summaries, the Pareto fronts, and over repeated seeds aggregate.csv/json."""

from pathlib import Path
from typing import Any

from fedjoule.folders import check_out_folder


def report(run_dirs: list[Path], out: Path | None, objective: Any, ci: str = "t") -> Any:
    """Compare the runs in `run_dirs` (run folders, or sweep folders for all their runs)
    into `out` (default reports/<time>) on `objective` (planning.pareto.Objective), with
    `ci` (t or bootstrap) intervals over seeds. Returns report.compare.Comparison."""
    # deferred: the comparison's plots (matplotlib)
    from fedjoule.report.compare import compare_runs, default_report_dir

    out = out or default_report_dir()
    check_out_folder(out)
    return compare_runs(run_dirs, out, objective, ci)
