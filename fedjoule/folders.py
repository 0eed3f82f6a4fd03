"""Default output folders: <top>/<name>-<date>-<time> (e.g. runs/default-20261121-203000)."""

import time
from pathlib import Path


def stamped_folder(top: str, name: str | None = None) -> Path:
    """A new folder name under `top`, stamped with the local time to the second."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(top) / (f"{name}-{stamp}" if name else stamp)
