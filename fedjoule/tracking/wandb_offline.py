"""The wandb tracker: Weights & Biases in offline mode (nothing needs a network or a login).

Each tracked run is an offline run folder, <tracking folder>/wandb/offline-run-<time>-<id>
(`wandb sync` uploads it later): the scenario as its config (dotted keys), every rounds.csv
column in its history at step = round, summary.json's numbers in its summary as
summary/<field> and the plots as images (plots/<file>). A sweep's or plan's runs share
the W&B group named after it, beside a parent run of job type `sweep`. A resumed run
reopens the same run id (resume="allow"); W&B writes the rounds after the resume to a
second offline folder of that id, which `wandb sync` adds to the same run.
"""

import os
import time
import uuid
from pathlib import Path

from fedjoule.tracking.base import Params, Tracker

# no network, no login, no prompts, no console capture, nothing but what is logged
ENVIRONMENT = {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "WANDB_DISABLE_GIT": "true",
    "WANDB_DISABLE_CODE": "true",
    "WANDB_ERROR_REPORTING": "false",
}


def _next_second(folder_name: str) -> None:
    """W&B names an offline run's folder by the second it starts (offline-run-<local
    time>-<id>): a resume within the second its run stopped would reuse that folder and
    overwrite its file, so it waits for the next second."""
    while time.strftime("%Y%m%d_%H%M%S") in folder_name:
        time.sleep(0.02)


def _wandb():
    """The wandb package, imported after ENVIRONMENT is set (offline, silent)."""
    for key, value in ENVIRONMENT.items():
        os.environ[key] = value
    import wandb  # deferred: W&B (optional tracker, 0.4 s)

    return wandb


class WandbTracker(Tracker):
    """An offline W&B run per tracked run."""

    requires = ("wandb",)
    extra = "wandb"

    def start(self, name, params: Params, parent, resumed, first_round) -> dict:
        wandb = _wandb()
        self.folder.mkdir(parents=True, exist_ok=True)
        run_id = resumed["id"] if resumed else uuid.uuid4().hex[:12]
        if resumed:
            _next_second(Path(resumed["dir"]).name)
        self.group = parent["group"] if parent else name
        settings = wandb.Settings(
            mode="offline",
            silent=True,
            console="off",
            x_disable_stats=True,
            x_disable_meta=True,
            disable_git=True,
            save_code=False,
        )
        self.run = wandb.init(
            project=self.experiment,
            dir=str(self.folder),
            name=name,
            id=run_id,
            group=self.group,
            job_type="run" if parent else "sweep",
            config=None if resumed else dict(params),
            resume="allow" if resumed else None,
            settings=settings,
            reinit="create_new",
        )
        self.last_step = max(first_round - 1, 0)
        return {"id": run_id, "dir": str(Path(self.run.dir).parent)}

    def reference(self) -> dict:
        return {"group": self.group}

    def log_round(self, round_, metrics, texts) -> None:
        self.run.log({**metrics, **texts}, step=round_)
        self.last_step = round_

    def log_summary(self, values) -> None:
        for key, value in values.items():
            self.run.summary[f"summary/{key}"] = value

    def log_artifacts(self, files) -> None:
        wandb = _wandb()
        images = {
            f"plots/{Path(f).stem}": wandb.Image(str(f))
            for f in files
            if Path(f).suffix.lower() == ".png"
        }
        if images:
            self.run.log(images, step=self.last_step)

    def finish(self, complete) -> None:
        self.run.finish(exit_code=0 if complete else 1)
