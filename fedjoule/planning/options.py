"""The options of sweep, plan and capacity and their checks, light to import (no
matplotlib, torch or schema): the command line and the API build them before the planners
load (planning/sweep.py, plan.py, capacity.py)."""

import math
from dataclasses import dataclass, field

from fedjoule.arguments import DEVICES, ArgumentError, grid_cell, shown
from fedjoule.errors import FedjouleError

BACKENDS = ("local", "ray")  # where a sweep's runs execute (planning/backends.py)
ACCURACIES = ("final_accuracy", "best_accuracy", "worst_client_accuracy", "client_accuracy_p10")
# kind -> (total cost column, cost-to-target column, axis label)
COSTS = {
    "energy": ("energy_total_j", "energy_to_target_j", "energy (J)"),
    "time": ("sim_time_s", "time_to_target_s", "simulated time (s)"),
}
SEARCHES = ("clients_per_round", "uplink_bandwidth_hz", "concurrency", "none")  # capacity
OVER = ("clients", "rounds")  # what capacity's time quantile is over

Cell = tuple[float, float]  # (snr_db, bandwidth_hz)


@dataclass(frozen=True)
class Objective:
    """Which summary columns a front compares: an accuracy, and total or to-target costs."""

    accuracy: str = "final_accuracy"
    to_target: bool = False

    def __post_init__(self) -> None:
        if self.accuracy not in ACCURACIES:
            raise FedjouleError(
                f"--pareto-accuracy {self.accuracy!r}: expected one of {', '.join(ACCURACIES)}"
            )

    def cost(self, kind: str) -> str:
        total, to_target, _ = COSTS[kind]
        return to_target if self.to_target else total


@dataclass
class SweepOptions:
    """How to run a sweep (everything but the scenario and its grid)."""

    backend: str = "local"
    address: str | None = None
    workers: int | None = None
    threads_per_run: int = 1
    device: str = "cpu"
    data_dir: str | None = None
    objective: Objective = field(default_factory=Objective)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise FedjouleError(f"--backend {self.backend!r}: expected {' or '.join(BACKENDS)}")
        if self.address and self.backend != "ray":
            raise FedjouleError("--address is the Ray cluster's address; it needs --backend ray")
        if self.threads_per_run < 1 or (self.workers is not None and self.workers < 1):
            raise FedjouleError("--workers and --threads-per-run must be at least 1")
        if self.device not in DEVICES:
            raise FedjouleError(f"--device {self.device!r}: expected auto, cpu or cuda")


def parse_numbers(option: str, text: str, kind: type, minimum: float | None = None) -> list:
    """`1,2,5` as numbers of `kind`, distinct, each >= minimum; errors name the option."""
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = kind(float(item)) if kind is float else int(item)
        except ValueError:
            raise ArgumentError(
                f"{option} {shown(text)}: {item!r} is not "
                f"{'an integer' if kind is int else 'a number'}; give comma-separated "
                f"values, e.g. {option} 1,2,5"
            ) from None
        if minimum is not None and value < minimum:
            raise ArgumentError(
                f"{option} {shown(text)}: {item} is below the allowed minimum {minimum}"
            )
        if kind is float and not math.isfinite(value):
            raise ArgumentError(f"{option} {shown(text)}: {item} is not finite")
        values.append(value)
    if len(set(values)) != len(values):
        raise ArgumentError(f"{option} {shown(text)}: a value is repeated")
    return values


def parse_cells(text: str, snrs: list[float], bandwidths: list[float]) -> list[Cell]:
    """`--cells SNR:BW,...`: cells of the grid to draw in energy_vs_k.png."""
    cells = []
    for item in text.split(","):
        snr, sep, bw = item.partition(":")
        try:
            cell = (float(snr), float(bw))
        except ValueError:
            cell = None
        if not sep or cell is None:
            raise FedjouleError(f"--cells {item!r}: expected SNR_DB:BANDWIDTH_HZ, e.g. 0:1e5")
        cells.append(grid_cell(f"--cells {item!r}", *cell, snrs, bandwidths))
    return cells


@dataclass
class PlanOptions:
    """The grid and how its learning runs execute."""

    k_values: list[int] = field(default_factory=lambda: [1, 2, 5, 10, 20, 50])
    snr_db: list[float] = field(default_factory=lambda: [0.0, 10.0, 20.0, 30.0])
    bandwidth_hz: list[float] = field(default_factory=lambda: [1e5, 1e6, 1e7])
    max_rounds: int | None = None  # default: the scenario's training.rounds
    plot_cells: list[Cell] | None = None  # default: the grid's corners
    per_cell: bool = False  # run every (K, cell) even where repricing is valid
    sweep: SweepOptions = field(default_factory=SweepOptions)
    seeds: list[int] | None = None  # repeat every learning run per seed (--seeds)

    def __post_init__(self) -> None:
        for name, values in (
            ("--k", self.k_values),
            ("--snr-db", self.snr_db),
            ("--bandwidth-hz", self.bandwidth_hz),
        ):
            if not values:
                raise FedjouleError(f"{name}: give at least one value")
        if min(self.k_values) < 1:
            raise FedjouleError(f"--k {self.k_values}: local steps must be at least 1")
        if min(self.bandwidth_hz) <= 0:
            raise FedjouleError(f"--bandwidth-hz {self.bandwidth_hz}: must be > 0 Hz")
        if self.max_rounds is not None and self.max_rounds < 1:
            raise FedjouleError(f"--max-rounds {self.max_rounds}: must be at least 1")
        self.k_values = sorted(self.k_values)
        self.snr_db = sorted(self.snr_db)
        self.bandwidth_hz = sorted(self.bandwidth_hz)

    @property
    def cells(self) -> list[Cell]:
        return [(s, b) for s in self.snr_db for b in self.bandwidth_hz]

    @property
    def corners(self) -> list[Cell]:
        s, b = self.snr_db, self.bandwidth_hz
        return list(dict.fromkeys([(s[0], b[0]), (s[0], b[-1]), (s[-1], b[0]), (s[-1], b[-1])]))
