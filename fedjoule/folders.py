"""Output folders: default names <top>/<name>-<date>-<time> (e.g. runs/default-20261121-203000),
made from scenario names safely, and checked before a command writes anything."""

import os
import time
from pathlib import Path

from fedjoule.errors import FedjouleError

NAME_BYTES = 100  # the longest name part of a folder, in UTF-8 bytes (file systems allow 255)
CHECKPOINT = "checkpoint.pt"  # a training run's checkpoint in its folder (simulator/checkpoint.py)


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


# folders a run never writes into (as root it could): the root and the system's own
SYSTEM_FOLDERS = {
    Path(p)
    for p in (
        "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
        "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/usr/bin", "/usr/lib",
        "/usr/local", "/usr/sbin", "/var", "/var/lib", "/home", "/tmp", "/opt", "/mnt",
        "/media",
    )
}  # fmt: skip
PATH_BYTES = 4095  # Linux PATH_MAX less the terminating zero
COMPONENT_BYTES = 255  # NAME_MAX of the usual file systems


def check_path_length(path: Path) -> None:
    """FedjouleError (exit 2) for a path the file system cannot hold: longer than
    PATH_BYTES, or with a name longer than COMPONENT_BYTES, in UTF-8 bytes."""
    text = os.fsencode(str(path))
    longest = max((len(os.fsencode(part)) for part in Path(path).parts), default=0)
    if len(text) > PATH_BYTES or longest > COMPONENT_BYTES:
        raise FedjouleError(
            f"output folder {str(path)[:80]}...: too long a path ({len(text)} bytes, a name "
            f"of {longest}); paths hold at most {PATH_BYTES} bytes and names "
            f"{COMPONENT_BYTES}"
        )


def check_out_folder(path: Path) -> None:
    """FedjouleError, naming `path`, when a command could not create or write its output
    folder there: a file in its place, a folder that is not writable, or a nearest existing
    parent that is not a writable folder. Creates nothing."""
    path = Path(path)
    check_path_length(path)
    system = Path(os.path.realpath(path.absolute()))
    if system in SYSTEM_FOLDERS or system.parent == Path("/proc"):
        raise FedjouleError(
            f"output folder {path}: {system} is a system folder; choose a folder of your own"
        )
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
