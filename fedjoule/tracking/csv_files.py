"""The csv tracker: plain CSV files, no extra dependency.

Under <tracking folder>/csv/<run name>/ (a sweep's run: under its parent's folder):
params.csv (name, value: the scenario's dotted keys), metrics.csv (step, name, value: every
rounds.csv cell of every round, step = round), summary.csv (name, value), run.json (name,
parent, status) and artifacts/ (copies of the plots).
"""

import csv
import io
import json
import shutil
from pathlib import Path

from fedjoule.storage import write_text_atomically
from fedjoule.tracking.base import Params, Tracker


def _value_text(value) -> str:
    return repr(value) if isinstance(value, float) else "" if value is None else str(value)


class CsvTracker(Tracker):
    """Tracked runs as CSV files (a folder per run; a sweep's runs inside its parent's)."""

    def start(self, name, params: Params, parent, resumed, first_round) -> dict:
        base = Path(parent["folder"]) if parent else self.folder / "csv"
        self.dir = base / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.info = {"name": name, "parent": (parent or {}).get("name"), "status": "running"}
        self._table("params.csv", ["name", "value"], sorted(params.items()), "w")
        metrics = self.dir / "metrics.csv"
        if resumed and metrics.is_file():  # drop rounds logged after the last note
            with metrics.open(newline="") as f:
                rows = [r for r in csv.reader(f)][1:]
            # (a line cut by a kill has fewer fields, or is of a round >= first_round)
            kept = [r for r in rows if len(r) == 3 and r[0].isdigit() and int(r[0]) < first_round]
            self._table("metrics.csv", ["step", "name", "value"], kept, "w")
        else:
            self._table("metrics.csv", ["step", "name", "value"], [], "w")
        self._info()
        return {"dir": str(self.dir)}

    def reference(self) -> dict:
        return {"folder": str(self.dir), "name": self.info["name"]}

    def _table(self, file: str, header: list[str], rows, mode: str) -> None:
        text = io.StringIO()
        writer = csv.writer(text)
        if mode == "w":
            writer.writerow(header)
        writer.writerows([[_value_text(v) for v in row] for row in rows])
        if mode == "w":
            write_text_atomically(self.dir / file, text.getvalue())
        else:
            with (self.dir / file).open("a", newline="") as f:
                f.write(text.getvalue())

    def _info(self) -> None:
        write_text_atomically(self.dir / "run.json", json.dumps(self.info, indent=1) + "\n")

    def log_round(self, round_, metrics, texts) -> None:
        rows = [(round_, k, v) for k, v in {**metrics, **texts}.items()]
        self._table("metrics.csv", [], rows, "a")

    def log_summary(self, values) -> None:
        self._table("summary.csv", ["name", "value"], sorted(values.items()), "w")

    def log_artifacts(self, files) -> None:
        (self.dir / "artifacts").mkdir(exist_ok=True)
        for file in files:
            shutil.copyfile(file, self.dir / "artifacts" / Path(file).name)

    def finish(self, complete) -> None:
        self.info["status"] = "finished" if complete else "stopped"
        self._info()
