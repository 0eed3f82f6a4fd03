"""Persistent per-client vectors (SCAFFOLD c_i, FedDyn g_i, ...), kept off the device.

Rows are allocated lazily: a client that never trained costs nothing and reads as
zeros. Only the selected clients' rows travel to the compute device. Past a memory
budget the store spills: rows live in an append-only file (the run folder's
`client_state.bin`) and only the most recently used ones stay in memory. A
checkpoint appends the rows changed since the last one and records the file's index
and length, so a resumed run truncates the file to that length and sees exactly the
rows of the checkpoint; a checkpoint costs the changed rows, not the whole store.
When superseded rows fill more than half of the file, the current rows are copied
into a new file (`client_state-1.bin`, ...), which bounds the file at twice the
live rows. Reads and writes are positioned file I/O rather than a memory map, so
the page cache is not charged to the process's resident memory.
"""

import os
import zlib
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from fedjoule.errors import FedjouleError
from fedjoule.storage import file_crc32


class ClientStore:
    """Named stores of (P,) rows, one per client that has written one."""

    def __init__(
        self,
        names: tuple[str, ...],
        n_params: int,
        dtype=torch.float32,
        budget_bytes: float | None = None,
        spill_path: Path | None = None,
    ):
        self.names = names
        self.n_params = n_params
        self.dtype = dtype
        self.row_bytes = n_params * torch.empty((), dtype=dtype).element_size()
        self.budget_bytes = budget_bytes
        self.spill_path = Path(spill_path) if spill_path else None
        self.cache: dict[str, OrderedDict[int, torch.Tensor]] = {n: OrderedDict() for n in names}
        self.dirty: set[tuple[str, int]] = set()
        self.index: dict[str, dict[int, int]] = {n: {} for n in names}  # client -> file offset
        self.spilling = False  # rows have been evicted from memory to the file
        self._file = None
        self._path = self.spill_path  # the current file (a new one after each compaction)
        self._generation = 0
        self._superseded: list[Path] = []
        self._crc32 = 0  # CRC-32 of the current file's content (checked on resume)

    # ------------------------------------------------------------------ rows
    def get(self, name: str, client_ids: torch.Tensor, device) -> torch.Tensor:
        """(m, P) rows of the given clients on `device` (zeros for clients never written)."""
        out = torch.zeros((len(client_ids), self.n_params), dtype=self.dtype)
        cache = self.cache[name]
        for row, k in enumerate(client_ids.tolist()):
            if k in cache:
                cache.move_to_end(k)
                out[row] = cache[k]
            elif k in self.index[name]:
                out[row] = self._read(self.index[name][k])
        return out.to(device)

    def set(self, name: str, client_ids: torch.Tensor, values: torch.Tensor) -> None:
        values = values.detach().to("cpu", self.dtype)
        cache = self.cache[name]
        for row, k in enumerate(client_ids.tolist()):
            cache[k] = values[row].clone()
            cache.move_to_end(k)
            self.dirty.add((name, k))
        self._enforce_budget()

    @property
    def cached_bytes(self) -> int:
        return sum(len(c) for c in self.cache.values()) * self.row_bytes

    # ------------------------------------------------------------------ spilling
    def _enforce_budget(self) -> None:
        if self.budget_bytes is None or self.spill_path is None:
            return
        while self.cached_bytes > self.budget_bytes:
            self.spilling = True
            name = max(self.cache, key=lambda n: len(self.cache[n]))
            k, value = self.cache[name].popitem(last=False)  # least recently used
            if (name, k) in self.dirty:
                self._append(name, k, value)

    def _open(self):
        if self._file is None:
            self._file = open(self._path, "a+b")  # noqa: SIM115 (kept open for the run)
        return self._file

    def _append(self, name: str, k: int, value: torch.Tensor) -> None:
        f = self._open()
        self.index[name][k] = f.seek(0, os.SEEK_END)
        data = value.numpy().tobytes()
        f.write(data)
        self._crc32 = zlib.crc32(data, self._crc32)
        self.dirty.discard((name, k))

    def _read(self, offset: int) -> torch.Tensor:
        f = self._open()
        f.flush()
        data = os.pread(f.fileno(), self.row_bytes, offset)
        return torch.from_numpy(np.frombuffer(data, dtype=_numpy_dtype(self.dtype)).copy())

    def flush(self) -> None:
        """Append every changed row in memory to the file (they stay cached) and make it
        durable."""
        for name, k in sorted(self.dirty):
            self._append(name, k, self.cache[name][k])
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    @property
    def file_bytes(self) -> int:
        return self._open().seek(0, os.SEEK_END) if self.spill_path else 0

    @property
    def live_bytes(self) -> int:
        """Bytes of the file's rows that are still current."""
        return sum(len(i) for i in self.index.values()) * self.row_bytes

    def _compact(self) -> None:
        """Copy the current rows into a new file (the next generation); the old file stays
        until the checkpoint that names the new one is saved (`commit`)."""
        self._generation += 1
        new_path = _generation_path(self.spill_path, self._generation)
        rows = sorted((off, name, k) for name, i in self.index.items() for k, off in i.items())
        index: dict[str, dict[int, int]] = {n: {} for n in self.names}
        crc = 0
        with open(new_path, "wb") as new:
            for offset, name, k in rows:
                index[name][k] = new.tell()
                cached = self.cache[name].get(k)
                data = cached.numpy().tobytes() if cached is not None else self._raw(offset)
                new.write(data)
                crc = zlib.crc32(data, crc)
            new.flush()
            os.fsync(new.fileno())
        self.close()
        self._crc32 = crc
        self._superseded.append(self._path)
        self._path, self.index = new_path, index

    def _raw(self, offset: int) -> bytes:
        return os.pread(self._open().fileno(), self.row_bytes, offset)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Without a file: a copy of every row. With one: the rows changed since the last
        checkpoint are appended to it and the checkpoint records where each row is and
        the file's length; when dead rows fill more than half of the file, the current
        rows are first compacted into a new one."""
        if self.spill_path is None or not self.names:  # (no file for stateless algorithms)
            return {"rows": {n: dict(c) for n, c in self.cache.items()}}
        self.flush()
        if self.file_bytes > 2 * self.live_bytes:
            self._compact()
        return {
            "file": self._path.name,
            "index": {n: dict(i) for n, i in self.index.items()},
            "length": self.file_bytes,
            "crc32": self._crc32,
        }

    def commit(self) -> None:
        """The checkpoint from the last `state_dict` is saved: older files can go."""
        for path in self._superseded:
            path.unlink(missing_ok=True)
        self._superseded.clear()

    def load_state_dict(self, saved: dict) -> None:
        self.close()
        self.cache = {n: OrderedDict() for n in self.names}
        self.dirty.clear()
        self.index = {n: {} for n in self.names}
        if "rows" in saved:
            for name, rows in saved["rows"].items():
                self.cache[name].update(rows)
            return
        self.index = {n: dict(i) for n, i in saved["index"].items()}
        name = str(saved["file"])
        generation = _generation_of(self.spill_path, Path(name)) if "/" not in name else None
        if generation is None:
            raise FedjouleError(
                f"the checkpoint names the client-state file {name[:80]!r}, not one of this "
                f"run's ({self.spill_path.name}, {self.spill_path.stem}-N{self.spill_path.suffix})"
            )
        self._path, self._generation = self.spill_path.with_name(name), generation
        self._check_file(saved)
        for stale in self.spill_path.parent.glob(
            f"{self.spill_path.stem}*{self.spill_path.suffix}"
        ):
            if stale != self._path and _generation_of(self.spill_path, stale) is not None:
                stale.unlink()  # a later run's files, not named by this checkpoint
        with open(self._path, "ab") as f:  # drop rows written after the checkpoint
            f.truncate(saved["length"])
            os.fsync(f.fileno())
        self._crc32 = int(saved["crc32"])

    def _check_file(self, saved: dict) -> None:
        """The file holds at least the checkpoint's length, with the content it recorded."""
        length = int(saved["length"])
        have = self._path.stat().st_size if self._path.exists() else 0
        if have < length:
            raise FedjouleError(
                f"{self._path}: {have} bytes, but the checkpoint relies on {length}; the "
                "client-state file was truncated or removed, so the run cannot be resumed"
            )
        if length and file_crc32(self._path, length) != int(saved["crc32"]):
            raise FedjouleError(
                f"{self._path}: its content differs from what the checkpoint recorded "
                "(CRC-32); the client-state file was changed, so the run cannot be resumed"
            )
        rows_end = max((o for i in saved["index"].values() for o in i.values()), default=-1)
        if rows_end + self.row_bytes > length and rows_end >= 0:
            raise FedjouleError(
                f"{self._path}: the checkpoint names rows past the file's recorded length; "
                "it does not belong to this run"
            )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _generation_path(base: Path, generation: int) -> Path:
    """client_state.bin, client_state-1.bin, client_state-2.bin, ..."""
    return base if generation == 0 else base.with_name(f"{base.stem}-{generation}{base.suffix}")


def _generation_of(base: Path, path: Path) -> int | None:
    if path.name == base.name:
        return 0
    tail = path.name.removeprefix(f"{base.stem}-").removesuffix(base.suffix)
    same = path.name.startswith(f"{base.stem}-") and path.name.endswith(base.suffix)
    return int(tail) if same and tail.isdigit() else None


def _numpy_dtype(dtype: torch.dtype):
    return torch.empty((), dtype=dtype).numpy().dtype
