"""The files of a run: rounds.csv appended as rounds finish, clients.csv, summary.json.

CSV cells: an empty cell is a value that does not exist (a round that was not evaluated,
a column that does not apply); a number that is not finite is written as the token
`nan`, `inf` or `-inf` (rounds.csv then says why in its `diverged` column), never as an
empty cell or a number. summary.json holds no NaN or inf (JSON has none): such a value
is null there.
"""

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from fedjoule.devices.radio import theory_radio_note
from fedjoule.energy_kinds import END_OF_RUN_TAIL, ENERGY_FIELDS, Derived
from fedjoule.report.fairness import fairness, policy_summary
from fedjoule.report.table import ROUND_COLUMNS, cell
from fedjoule.simulator import protocols
from fedjoule.storage import AppendLog, write_text_atomically

# (Derived: a registered energy kind joins ENERGY_FIELDS; fedjoule/energy_kinds.py)
CLIENT_COLUMNS = Derived(
    lambda: [
        "client",
        "device_class",
        "train_samples",
        "cell",
        "distance_m",
        "mean_uplink_snr_db",
        "cpu_freq_hz",
        "tx_power_w",
        "selected",
        "arrived",
        *ENERGY_FIELDS,
        "energy_total_j",
        END_OF_RUN_TAIL,
        "battery_initial_j",
        "battery_left_j",
        "freeloader",
        "flagged",
    ]
)


class RoundsFile:
    """rounds.csv: one row per round, appended and fsynced as soon as the round ends; its
    length and CRC-32 go into every checkpoint (fedjoule.storage.AppendLog)."""

    def __init__(self, path: Path, extra: tuple | list = ()):
        """`extra`: columns after ROUND_COLUMNS (a protocol's, docs/protocols.md)."""
        self.path = Path(path)
        self.log = AppendLog(self.path)
        self.columns = [*ROUND_COLUMNS, *extra]

    def append(self, row: dict) -> None:
        text = io.StringIO()
        writer = csv.writer(text)
        if self.log.length == 0:
            writer.writerow(self.columns)
        writer.writerow([cell(row.get(c)) for c in self.columns])
        self.log.append(text.getvalue().encode())


def _number(text: str | None, missing=math.nan):
    """A rounds.csv cell as a float (nan, inf, -inf as such; empty: `missing`); text
    such as '3;1;0' stays text."""
    if text == "" or text is None:  # None: a row shorter than the header
        return missing
    try:
        return float(text)
    except ValueError:
        return text


def read_rounds(path: Path, missing=math.nan) -> list[dict]:
    """rounds.csv as dicts of floats; per-cell lists stay text. Non-finite values come
    back as float nan / inf / -inf; empty cells (no value: not evaluated, not applicable)
    as `missing`: NaN by default, so that `x == x` picks the evaluated rounds for a plot;
    pass missing=None to tell a value that does not exist from a NaN result (the
    `diverged` column says which rounds diverged)."""
    with Path(path).open() as f:
        return [{k: _number(v, missing) for k, v in r.items()} for r in csv.DictReader(f)]


def write_clients(path: Path, rows: list[dict], extra: tuple | list = ()) -> None:
    """clients.csv; `extra`: columns after CLIENT_COLUMNS (a protocol's)."""
    text = io.StringIO()
    writer = csv.writer(text)
    columns = [*CLIENT_COLUMNS, *extra]
    if rows and "mean_uplink_sinr_db" in rows[0]:  # channel.interference=cochannel
        at = columns.index("mean_uplink_snr_db") + 1
        columns[at:at] = ["mean_uplink_sinr_db", "p5_uplink_sinr_db"]
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(row[c]) for c in columns])
    write_text_atomically(path, text.getvalue())


def finite_or_none(value):
    """A number for JSON, which has no NaN or inf: such a float becomes None, other floats
    plain floats; anything else stays as it is."""
    if isinstance(value, float | np.floating):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def write_json(path: Path, data: dict) -> None:
    write_text_atomically(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")


# ------------------------------------------------------------------ summary.json's counts
DROP_COLUMNS = (
    "dropped_deadline",
    "dropped_offline",
    "dropped_outage",
    "dropped_battery",
    "dropped_overcommit",
)
# summary.json's `warnings` (printed in yellow by `fedjoule run`): more than this share of
# the rounds played failed, or of the selected clients were dropped (over-committed clients
# not counted: round.overcommit > 1 selects them to be dropped)
FAILED_ROUNDS_WARN = 0.25
DROPPED_WARN = 0.5

# the likely cause a warning names: what each drop means, with the scenario fields to change
_CAUSES = {
    "dropped_deadline": "the clients' rounds (download, local steps, upload) outlast "
    "round.deadline_s{deadline}; raise it, or shorten the work (a smaller model, fewer "
    "training.local_steps, more channel bandwidth)",
    "dropped_offline": "clients go offline before their upload ends (availability.kind = "
    "{availability}); shorter rounds, or clients that stay online longer",
    "dropped_outage": "uploads fail 1 + channel.max_retx times (outage: low SNR at the cell "
    "edge, low tx power)",
    "dropped_battery": "clients' batteries run down to their threshold (battery_j, charging)",
    "dropped_overcommit": "over-committed clients are dropped once training.clients_per_round "
    "arrived (round.overcommit)",
}


def round_totals(rows: list[dict]) -> dict:
    """summary.json's counts over rounds.csv's rows (read_rounds): failed rounds, selected,
    arrived and dropped clients, and the drops by cause (each the sum of its column)."""

    def total(column: str) -> int:
        return int(sum(row.get(column) or 0 for row in rows))

    return {
        "rounds_failed": total("failed"),
        "selected_total": total("selected"),
        "arrived_total": total("arrived"),
        "dropped_total": total("dropped"),
        **{column: total(column) for column in DROP_COLUMNS},
    }


def round_warnings(rows: list[dict], totals: dict, scenario=None) -> list[str]:
    """A warning when more than FAILED_ROUNDS_WARN of the rounds failed or more than
    DROPPED_WARN of the selected clients were dropped (over-commit drops, which are meant,
    not counted): the numbers and the likely cause. `scenario` (optional) names the values
    of the fields to change."""
    expelled = expulsion_warnings(rows, scenario)
    played, failed = len(rows), totals["rounds_failed"]
    selected, arrived = totals["selected_total"], totals["arrived_total"]
    dropped = totals["dropped_total"] - totals["dropped_overcommit"]
    many_failed = played > 0 and failed > FAILED_ROUNDS_WARN * played
    many_dropped = selected > 0 and dropped > DROPPED_WARN * selected
    if not (many_failed or many_dropped):
        return expelled
    parts = []
    if many_failed:
        min_clients = f" = {scenario.round.min_clients}" if scenario is not None else ""
        parts.append(
            f"{failed:,} of {played:,} rounds failed ({_percent(failed, played)}; fewer than "
            f"round.min_clients{min_clients} uploads arrived)"
        )
    parts.append(
        f"{arrived:,} of {selected:,} selected clients arrived, {dropped:,} "
        f"({_percent(dropped, selected)}) were dropped"
        + (" (over-commit drops not counted)" if totals["dropped_overcommit"] else "")
    )
    cause = _likely_cause(rows, totals, scenario)
    return [*expelled, "; ".join(parts) + f". Likely cause: {cause}"]


def expulsion_warnings(rows: list[dict], scenario=None) -> list[str]:
    """A warning when freeloader detection (TACO) expelled benign clients, and when it
    expelled every client (the rounds after that train nobody): rounds.csv's `expelled`
    and `expelled_benign` columns, cumulative."""
    last = rows[-1] if rows else {}
    benign, expelled = last.get("expelled_benign") or 0, last.get("expelled") or 0
    if not benign:
        return []
    size = scenario.population.size if scenario is not None else None
    of = f" of {size:,}" if size else ""
    text = (
        f"freeloader detection expelled {int(benign):,} benign clients{of} "
        f"({int(expelled):,} expelled in all); they are never selected again"
    )
    if size and expelled >= size:
        first = next(int(r["round"]) for r in rows if (r.get("expelled") or 0) >= size)
        text += f"; every client was expelled by round {first}, later rounds trained nobody"
    return [text]


def _likely_cause(rows: list[dict], totals: dict, scenario) -> str:
    """The largest drop cause; or, when most failed rounds had fewer clients to select than
    they need, that."""
    need = scenario.round.min_clients if scenario is not None else 1
    starved = sum(1 for row in rows if row.get("failed") and (row.get("selected") or 0) < need)
    size = scenario.population.size if scenario is not None else None
    if starved and size and rows and (rows[-1].get("expelled") or 0) >= size:
        return "freeloader detection expelled every client (see the warning before)"
    if starved and 2 * starved >= totals["rounds_failed"]:
        return (
            f"in {starved:,} failed rounds fewer clients than round.min_clients were online "
            "to select (availability, training.clients_per_round)"
        )
    meant = "dropped_overcommit"  # not a problem: round.overcommit selects them to be dropped
    column = max((c for c in DROP_COLUMNS if c != meant), key=lambda c: totals[c])
    if not totals[column]:
        return "too few clients selected a round (training.clients_per_round)"
    fields = {"deadline": "", "availability": "?"}
    if scenario is not None:
        fields = {
            "deadline": f" = {scenario.round.deadline_s:g} s"
            if scenario.round.deadline_s is not None
            else "",
            "availability": scenario.availability.kind,
        }
    share = _percent(totals[column], totals["dropped_total"] - totals[meant])
    return f"{column} ({totals[column]:,}, {share} of the drops): " + _CAUSES[column].format(
        **fields
    )


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "0 %"


# What a rounds.csv row (training.rounds, rounds_completed, rounds_to_target) counts
# under each built-in protocol.kind (docs/protocols.md#what-the-files-say)
ROUND_COUNTS = {kind: d.round_counts for kind, d in protocols.DECLARATIONS.items()}


def with_round_totals(summary: dict, rounds_csv: Path, scenario=None, ledger=None) -> dict:
    """`summary` with round_totals over rounds.csv (as it stands: a resumed run's rounds
    all there) after its rounds_completed (with the protocol and what its rows count,
    `round_counts`, and the `policy`), Jain's fairness indices over the per-client
    `ledger` (report/fairness.py) after the totals, the model notes (a radiated radio: the
    theory papers' energy), a list, as `notes`, and the round_warnings, a list, as
    `warnings`."""
    rows = read_rounds(rounds_csv, missing=None) if Path(rounds_csv).exists() else []
    totals = round_totals(rows)
    fair = fairness(ledger) if ledger is not None else {}
    out = {}
    protocol = {}
    if scenario is not None:
        kind = scenario.protocol.kind
        # (a registered kind's too: protocols.register)
        protocol = {
            "protocol": kind,
            "round_counts": protocols.DECLARATIONS[kind].round_counts,
            "policy": policy_summary(scenario),
        }
    for key, value in summary.items():
        out[key] = value
        if key == "rounds_completed":
            out.update(protocol)
            out.update(totals)
            out.update(fair)
    out.update(totals)  # (no rounds_completed: at the end; order kept otherwise)
    out.update(fair)
    note = scenario and theory_radio_note(scenario.population.device_classes)
    out["notes"] = [note] if note else []
    out["warnings"] = round_warnings(rows, totals, scenario)
    return out
