"""What the trackers are given: a scenario as flat hyper-parameters, a round's row and the
summary as numbers, each value exactly as the run's files hold it."""

import re
from typing import Any

from fedjoule.report.table import cell

_INT = re.compile(r"-?[0-9]+")


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys ({"training": {"rounds": 5}} -> {"training.rounds":
    5}); a list stays one value, written as text (its YAML-like form)."""
    if isinstance(data, dict):
        flat: dict[str, Any] = {}
        for key, value in data.items():
            flat.update(flatten(value, f"{prefix}{key}."))
        return flat if flat or not prefix else {prefix.rstrip("."): "{}"}
    if isinstance(data, list | tuple):
        return {prefix.rstrip("."): str(list(data))}
    return {prefix.rstrip("."): data}


def params(scenario_data: dict) -> dict[str, str | int | float | bool | None]:
    """A resolved scenario (model_dump(mode="json")) as hyper-parameters, dotted keys."""
    return flatten(scenario_data)


def row_values(row: dict, columns: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """A round's row as rounds.csv holds it: numeric cells (whole numbers as int, bools as
    0/1, nan and the infinities as such) and text cells (per-cell counts '3;1;0'); empty
    cells are left out (not evaluated this round, or not applicable). The values depend
    only on each cell's text (report.table.cell), so the live row and the same row read
    back from rounds.csv as text give the same values, types included (a resumed run
    logging the rounds its trackers missed: tracking/session.py start_run)."""
    metrics: dict[str, float] = {}
    texts: dict[str, str] = {}
    for column in columns:
        text = cell(row.get(column))
        if text == "":
            continue
        if text in ("True", "False"):
            metrics[column] = float(text == "True")
            continue
        try:
            metrics[column] = int(text) if _INT.fullmatch(text) else float(text)
        except ValueError:
            texts[column] = text
    return metrics, texts


def summary_numbers(summary: dict) -> dict[str, float]:
    """summary.json's numeric fields (bools as 0/1; nested ones with dotted keys); text,
    lists and empty fields are left out."""
    numbers: dict[str, float] = {}
    for key, value in flatten(summary).items():
        if isinstance(value, bool):
            numbers[key] = float(value)
        elif isinstance(value, int | float):
            numbers[key] = float(value)
    return numbers
