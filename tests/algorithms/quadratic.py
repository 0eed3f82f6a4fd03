"""Heterogeneous least-squares clients f_i(w) = 0.5 mean((X_i w - y_i)^2) (docs/algorithms.md,
the checks that pin the algorithms)."""

import numpy as np
import torch

from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.client_store import ClientStore
from fedjoule.algorithms.executor import SequentialExecutor, VectorisedExecutor
from fedjoule.algorithms.learning import aggregate_arrived, keep_client_state, train_clients
from fedjoule.algorithms.registry import build_algorithm


def squared_loss(w, x, y):
    return 0.5 * torch.mean((x @ w - y) ** 2)


class Quadratics:
    """N clients, n rows each, d parameters; full-batch steps, so every step is exact GD."""

    def __init__(self, n_clients=10, dim=5, rows=20, seed=0, xs=None, ys=None):
        gen = np.random.default_rng(seed)
        if xs is None:
            xs, ys = [], []
            for i in range(n_clients):
                scale = 0.5 + 1.5 * gen.random(dim)  # different curvature per client
                x = gen.normal(size=(rows, dim)) * scale
                w_i = gen.normal(size=dim) * 2 + i * 0.3  # different optimum per client
                xs.append(x)
                ys.append(x @ w_i + 0.1 * gen.normal(size=rows))
        n_clients, dim, rows = len(xs), xs[0].shape[1], xs[0].shape[0]
        assert all(len(x) == rows for x in xs), "equal rows per client (full-batch stacking)"
        self.n_clients, self.dim, self.rows = n_clients, dim, rows
        self.x = torch.tensor(np.concatenate(xs))
        self.y = torch.tensor(np.concatenate(ys))
        self.client_train = [np.arange(i * rows, (i + 1) * rows) for i in range(n_clients)]
        self.hessians = [x.T @ x / rows for x in xs]
        self.optima = [np.linalg.solve(x.T @ x, x.T @ y) for x, y in zip(xs, ys, strict=True)]

    def w_star(self):
        """The global optimum: solves (sum H_i) w = sum H_i w_i*."""
        return np.linalg.solve(
            sum(self.hessians), sum(h @ o for h, o in zip(self.hessians, self.optima, strict=True))
        )

    def fedavg_fixed_point(self, lr, steps):
        """w = mean_i [M_i w + (I - M_i) w_i*] with M_i = (I - lr H_i)^K, solved exactly."""
        eye = np.eye(self.dim)
        ms = [np.linalg.matrix_power(eye - lr * h, steps) for h in self.hessians]
        lhs = eye - sum(ms) / self.n_clients
        rhs = sum((eye - m) @ o for m, o in zip(ms, self.optima, strict=True)) / self.n_clients
        return np.linalg.solve(lhs, rhs)

    def fedprox_fixed_point(self, lr, steps, mu):
        """Local GD on f_i + mu/2 |theta - w|^2 from w: theta_K = A^K w + G (b_i + mu w), with
        A = I - lr (H_i + mu I), G = (H_i + mu I)^-1 (I - A^K), b_i = H_i w_i*; w = mean theta_K."""
        eye = np.eye(self.dim)
        lhs, rhs = eye.copy(), np.zeros(self.dim)
        for h, o in zip(self.hessians, self.optima, strict=True):
            a_k = np.linalg.matrix_power(eye - lr * (h + mu * eye), steps)
            g = np.linalg.solve(h + mu * eye, eye - a_k)
            lhs -= (a_k + mu * g) / self.n_clients
            rhs += g @ (h @ o) / self.n_clients
        return np.linalg.solve(lhs, rhs)

    def executor(self, kind="vectorised"):
        cls = {"vectorised": VectorisedExecutor, "sequential": SequentialExecutor}[kind]
        return cls(squared_loss, self.x, self.y, torch.device("cpu"))

    def run(self, config, rounds, lr, steps, executor=None, on_round=None):
        """Full participation, full-batch local GD; returns the global model after each round."""
        executor = executor or self.executor()
        samples = torch.full((self.n_clients,), self.rows)
        algorithm = build_algorithm(config, self.n_clients, samples, steps, lr)
        state = algorithm.init_state(torch.zeros(self.dim, dtype=torch.float64))
        store = ClientStore(algorithm.client_state, self.dim, torch.float64)
        ids = torch.arange(self.n_clients)
        batch = torch.stack([torch.as_tensor(t) for t in self.client_train])[:, None, :]
        everyone = torch.ones(self.n_clients, dtype=torch.bool)
        history = []
        for r in range(rounds):
            setup = RoundSetup(lr, torch.full((self.n_clients,), steps), r)
            result = train_clients(
                algorithm, executor, state, ids, setup, batch.expand(-1, steps, -1), store
            )
            keep_client_state(store, result, everyone)
            state = aggregate_arrived(algorithm, state, result, everyone)
            if algorithm.needs_probe:  # full-batch losses of every client at the probe model
                w = algorithm.probe_model(state)
                losses = torch.stack([self.loss(i, w) for i in range(self.n_clients)])
                state = algorithm.dual_update(state, ids, losses, setup)
            if on_round:
                on_round(state)
            history.append(state["w"].numpy().copy())
        return history

    def loss(self, i, w):
        rows = torch.as_tensor(self.client_train[i])
        return squared_loss(w, self.x[rows], self.y[rows])
