"""A tracker plug-in for the tests: it keeps what it is given and writes it as JSON."""

import json

from fedjoule.tracking.base import Tracker


class Recorder(Tracker):
    def start(self, name, params, parent, resumed, first_round):
        self.log = {"name": name, "params": params, "rounds": {}, "summary": None, "files": []}
        return {"started_at": first_round}

    def log_round(self, round_, metrics, texts):
        self.log["rounds"][round_] = {**metrics, **texts}

    def log_summary(self, values):
        self.log["summary"] = values

    def log_artifacts(self, files):
        self.log["files"] = sorted(f.name for f in files)

    def finish(self, complete):
        self.log["complete"] = complete
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "recorder.json").write_text(json.dumps(self.log))
