"""Persistent per-client vectors (SCAFFOLD c_i, FedDyn g_i, ...), kept off the device.

Rows are allocated lazily: a client that never trained costs nothing and reads as
zeros. Only the selected clients' rows travel to the compute device. Past a memory
budget the store spills: rows live in an append-only file (the run folder's
`client_state.bin`) and only the most recently used ones stay in memory. A
checkpoint flushes the rows in memory and records the file's index and length, so
a resumed run truncates the file to that length and sees exactly the rows of the
checkpoint. Reads and writes are positioned file I/O rather than a memory map, so
the page cache is not charged to the process's resident memory.
"""

import os
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch


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
        self.spilling = False
        self._file = None

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
            self._file = open(self.spill_path, "a+b")  # noqa: SIM115 (kept open for the run)
        return self._file

    def _append(self, name: str, k: int, value: torch.Tensor) -> None:
        f = self._open()
        offset = f.seek(0, os.SEEK_END)
        f.write(value.numpy().tobytes())
        self.index[name][k] = offset
        self.dirty.discard((name, k))

    def _read(self, offset: int) -> torch.Tensor:
        f = self._open()
        f.flush()
        data = os.pread(f.fileno(), self.row_bytes, offset)
        return torch.from_numpy(np.frombuffer(data, dtype=_numpy_dtype(self.dtype)).copy())

    def flush(self) -> None:
        """Write every changed row in memory to the file (they stay cached)."""
        for name, k in sorted(self.dirty):
            f = self._open()
            offset = f.seek(0, os.SEEK_END)
            f.write(self.cache[name][k].numpy().tobytes())
            self.index[name][k] = offset
        self.dirty.clear()
        if self._file is not None:
            self._file.flush()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        if not self.spilling:
            return {"rows": {n: dict(c) for n, c in self.cache.items()}}
        self.flush()
        return {
            "index": {n: dict(i) for n, i in self.index.items()},
            "length": self._open().seek(0, os.SEEK_END),
        }

    def load_state_dict(self, saved: dict) -> None:
        self.cache = {n: OrderedDict() for n in self.names}
        self.dirty.clear()
        if "rows" in saved:
            for name, rows in saved["rows"].items():
                self.cache[name].update(rows)
            self.index = {n: {} for n in self.names}
            self.spilling = False
            return
        self.spilling = True
        self.index = {n: dict(i) for n, i in saved["index"].items()}
        with open(self.spill_path, "r+b") as f:  # drop rows written after the checkpoint
            f.truncate(saved["length"])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _numpy_dtype(dtype: torch.dtype):
    return torch.empty((), dtype=dtype).numpy().dtype
