"""Output folders: default names <top>/<name>-<date>-<time> (e.g. runs/default-20261121-203000),
made from scenario names safely, and checked before a command writes anything."""

import os
import time
from pathlib import Path

from fedjoule.errors import FedjouleError

NAME_BYTES = 100  # the longest name part of a folder, in UTF-8 bytes (file systems allow 255)


def safe_name(name: str) -> str:
    """`name` as one harmless path component: no separators, no control characters, no
    leading dots (hidden, `.`, `..`), at most NAME_BYTES bytes; "run" when nothing is left."""
    text = "".join("_" if c in "/\\" or not c.isprintable() else c for c in name)
    text = text.strip().lstrip(".").strip()
    text = text.encode()[:NAME_BYTES].decode(errors="ignore").rstrip()
    return text or "run"


def stamped_folder(top: str, name: str | None = None) -> Path:
    """A new folder directly under `top`, named after `name` (made safe) and stamped with
    the local time to the second; -2, -3, ... when that folder exists already."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = f"{safe_name(name)}-{stamp}" if name else stamp
    folder, n = Path(top) / base, 1
    while folder.exists():
        n += 1
        folder = Path(top) / f"{base}-{n}"
    return folder


def check_out_folder(path: Path) -> None:
    """FedjouleError, naming `path`, when a command could not create or write its output
    folder there: a file in its place, a folder that is not writable, or a nearest existing
    parent that is not a writable folder. Creates nothing."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise FedjouleError(f"output folder {path}: a file is in its place; choose a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise FedjouleError(f"output folder {path}: the folder is not writable")
        return
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise FedjouleError(f"output folder {path}: cannot create it, {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FedjouleError(f"output folder {path}: cannot create it, {parent} is not writable")
