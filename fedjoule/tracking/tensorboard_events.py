"""The tensorboard tracker: TensorBoard event files (torch.utils.tensorboard's writer).

Under <tracking folder>/tensorboard/<run name>/ (a sweep's runs in folders under its
parent's, so `tensorboard --logdir` shows the sweep and each run): the scenario as
hyper-parameters (the HParams tab) and as a text table, every numeric rounds.csv column
as the scalar rounds/<column> at step = round, text columns as text, summary.json's
numbers as summary/<field> and the plots as images (plots/<file>). Scalars are stored as
32-bit floats (TensorBoard's format).
"""

from pathlib import Path

from fedjoule.tracking.base import Params, Tracker


def _hparam(value):
    return value if isinstance(value, bool | int | float | str) else str(value)


class TensorBoardTracker(Tracker):
    """A TensorBoard run folder per tracked run."""

    requires = ("tensorboard", "torch.utils.tensorboard")
    extra = "tensorboard"

    def start(self, name, params: Params, parent, resumed, first_round) -> dict:
        # deferred: TensorBoard (optional tracker; torch's writer, 1.1 s)
        from torch.utils.tensorboard import SummaryWriter, summary

        base = Path(parent["folder"]) if parent else self.folder / "tensorboard"
        self.dir = base / name
        self.name = name
        # a resumed run: events of steps from first_round on (logged before the last
        # note of an interrupted run) are dropped when TensorBoard reads the folder
        purge = first_round if resumed else None
        self.writer = SummaryWriter(str(self.dir), purge_step=purge)
        self.last_step = max(first_round - 1, 0)
        if not resumed:
            values = {k: _hparam(v) for k, v in params.items()}
            for event in summary.hparams(values, {}):
                self.writer.file_writer.add_summary(event)
            table = "\n".join(f"| {k} | {v} |" for k, v in params.items())
            self.writer.add_text("scenario", "| key | value |\n|---|---|\n" + table, 0)
        return {"dir": str(self.dir)}

    def reference(self) -> dict:
        return {"folder": str(self.dir)}

    def log_round(self, round_, metrics, texts) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(f"rounds/{key}", value, round_)
        for key, value in texts.items():
            self.writer.add_text(f"rounds/{key}", value, round_)
        self.last_step = round_
        self.writer.flush()

    def log_summary(self, values) -> None:
        for key, value in values.items():
            self.writer.add_scalar(f"summary/{key}", value, self.last_step)

    def log_artifacts(self, files) -> None:
        import matplotlib.image  # deferred: matplotlib (only to read the plots it logs)

        for file in files:
            if Path(file).suffix.lower() == ".png":
                image = matplotlib.image.imread(file)  # height x width x channels in [0, 1]
                tag = f"plots/{Path(file).stem}"
                self.writer.add_image(tag, image, self.last_step, dataformats="HWC")

    def finish(self, complete) -> None:
        self.writer.close()
