"""Crash-consistent files: atomic replacement, fsynced appends with a running checksum,
and the lock that keeps a second process out of a run folder.

A rewrite goes to a temporary file beside the target, is fsynced, replaces the target
with `os.replace` (atomic on POSIX) and the folder is fsynced, so a kill at any
instant leaves either the old file or the new one, never a mix. Appended files (rounds.csv,
events.jsonl) keep their length and a CRC-32 of their content, which a checkpoint records:
a resumed run cuts them back to that length and refuses a file whose content differs.
"""

import errno
import fcntl
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from fedjoule.errors import FedjouleError

CHUNK_BYTES = 1 << 20


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write `path` through `write(file)` into a temporary file, then swap it in."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def write_bytes_atomically(path: Path, data: bytes) -> None:
    replace_atomically(path, lambda f: f.write(data))


def write_text_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode())


def save_figure(fig, path: Path, **savefig_options) -> Path:
    """A matplotlib figure saved atomically (the format from the path's suffix)."""
    path = Path(path)
    fmt = path.suffix.lstrip(".") or "png"
    replace_atomically(path, lambda f: fig.savefig(f, format=fmt, **savefig_options))
    return path


def file_crc32(path: Path, length: int) -> int:
    """CRC-32 of the first `length` bytes of a file."""
    crc, left = 0, length
    with open(path, "rb") as f:
        while left > 0:
            chunk = f.read(min(CHUNK_BYTES, left))
            if not chunk:
                break
            crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    return crc


class AppendLog:
    """A file only ever appended to (fsynced each time), with its length and CRC-32."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.length = self.path.stat().st_size if self.path.exists() else 0
        self._crc32: int | None = None if self.length else 0  # read when first needed

    @property
    def crc32(self) -> int:
        if self._crc32 is None:  # a file that was there before: its content so far
            self._crc32 = file_crc32(self.path, self.length)
        return self._crc32

    def append(self, data: bytes) -> None:
        crc = self.crc32
        with open(self.path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self.length += len(data)
        self._crc32 = zlib.crc32(data, crc)

    def mark(self) -> dict:
        """What a checkpoint records of this file."""
        return {"bytes": self.length, "crc32": self.crc32}

    def restore(self, mark: dict, label: str) -> None:
        """Cut the file back to a checkpoint's mark (the rows written after it), through a
        temporary copy; a file shorter than the mark or with other content is an error."""
        want = int(mark["bytes"])
        have = self.path.stat().st_size if self.path.exists() else 0
        if have < want:
            raise FedjouleError(
                f"{self.path}: {have} bytes, but the checkpoint was written when it held "
                f"{want}; the file was truncated or replaced, so {label} cannot be resumed"
            )
        if want and file_crc32(self.path, want) != int(mark["crc32"]):
            raise FedjouleError(
                f"{self.path}: its first {want} bytes differ from those the checkpoint "
                f"recorded; the file was edited or belongs to another run, so {label} "
                "cannot be resumed"
            )
        if have > want:

            def copy_prefix(out: BinaryIO) -> None:
                with open(self.path, "rb") as f:
                    left = want
                    while left > 0:
                        chunk = f.read(min(CHUNK_BYTES, left))
                        out.write(chunk)
                        left -= len(chunk)

            replace_atomically(self.path, copy_prefix)
        self.length, self._crc32 = want, int(mark["crc32"])


class FolderLock:
    """An exclusive lock on a run folder (`.lock`, flock'ed): one process at a time.

    The kernel drops the lock when the process dies, so a killed run never leaves the
    folder locked; the file itself stays and means nothing on its own.
    """

    NAME = ".lock"

    def __init__(self, folder: Path):
        self.path = Path(folder) / self.NAME
        self._fd: int | None = None

    def acquire(self) -> "FolderLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                holder = self.path.read_text().strip() or "another process"
                raise FedjouleError(
                    f"{self.path.parent} is in use by another fedjoule process ({holder}); "
                    "wait for it to finish or stop it, then try again"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
