"""Persistent per-client vectors (SCAFFOLD c_i, FedDyn g_i, ...), kept on the host.

Rows are allocated lazily: a client that never trained costs nothing and reads as
zeros. Only the rows of the selected clients travel to the compute device.
"""

import torch


class ClientStore:
    """Named stores of (P,) rows, one per client that has written one."""

    def __init__(self, names: tuple[str, ...], n_params: int, dtype=torch.float32):
        self.n_params = n_params
        self.dtype = dtype
        self.rows: dict[str, dict[int, torch.Tensor]] = {name: {} for name in names}

    def get(self, name: str, client_ids: torch.Tensor, device) -> torch.Tensor:
        """(m, P) rows of the given clients on `device` (zeros for clients never written)."""
        store = self.rows[name]
        out = torch.zeros((len(client_ids), self.n_params), dtype=self.dtype)
        for row, k in enumerate(client_ids.tolist()):
            if k in store:
                out[row] = store[k]
        return out.to(device)

    def set(self, name: str, client_ids: torch.Tensor, values: torch.Tensor) -> None:
        values = values.detach().to("cpu", self.dtype)
        for row, k in enumerate(client_ids.tolist()):
            self.rows[name][k] = values[row].clone()

    def state_dict(self) -> dict:
        return {name: dict(rows) for name, rows in self.rows.items()}

    def load_state_dict(self, saved: dict) -> None:
        self.rows = {name: dict(rows) for name, rows in saved.items()}
