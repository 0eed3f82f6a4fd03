"""What a system-only run holds fixed, built without any data: devices, cells, backhaul,
availability, local steps, step costs and payload sizes (docs/system-engine.md)."""

import math
from dataclasses import dataclass

import numpy as np

from fedjoule import rng
from fedjoule.algorithms.declarations import DECLARATIONS, AlgorithmDeclaration
from fedjoule.algorithms.message_bits import payload_bits
from fedjoule.algorithms.work import vector_work
from fedjoule.channel.cell import Cell, place_cell
from fedjoule.channel.trace import trace_path
from fedjoule.data.shapes import client_sample_counts, dataset_shape, input_dtype
from fedjoule.devices.availability import (
    AlwaysOn,
    BernoulliDropout,
    Diurnal,
    MarkovOnOff,
    TraceReplay,
)
from fedjoule.devices.fedscale import BehaviourReplay, is_fedscale_file
from fedjoule.devices.population import Population, sample_population, step_costs
from fedjoule.model_sizes import template_size
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.transfers import with_power_control


class CellBackhaul:
    """Each cell's backhaul link to the server (capacity, latency), without a graph: the
    path server - base station - client crosses exactly one backhaul edge."""

    def __init__(self, section, serving_cell: np.ndarray) -> None:
        n_cells = section.n_cells

        def per_cell(value, default: float) -> np.ndarray:
            if value is None:
                return np.full(n_cells, default)
            if isinstance(value, list):
                return np.array([default if v is None else v for v in value], dtype=float)
            return np.full(n_cells, float(value))

        self.capacity_bps = per_cell(section.backhaul_capacity_bps, math.inf)
        self.latency_s = per_cell(section.backhaul_latency_s, 0.0)
        self.serving_cell = serving_cell

    @property
    def n_cells(self) -> int:
        return len(self.capacity_bps)

    def cell_delay_s(self, cells: np.ndarray, bits: float) -> np.ndarray:
        """Backhaul time of a transfer of `bits` into each of `cells`: latency + bits/capacity."""
        # store-and-forward on the one wired link (topology.py, Topology.backhaul_delay_s)
        return self.latency_s[cells] + bits / self.capacity_bps[cells]

    def backhaul_delay_s(self, client: int, bits: float) -> float:
        """The SimPy engine's interface (channel/topology.py, Topology.backhaul_delay_s)."""
        c = int(self.serving_cell[client])
        return 0.0 + float(self.latency_s[c] + bits / self.capacity_bps[c])


class NoLearning:
    """Stands in for the algorithm when nothing is trained: uniform selection, no probe set,
    no freeloader detection."""

    needs_probe = False

    def selection_weights(self, state):
        return None

    def detected(self, state):
        return None


@dataclass
class SystemWorld:
    scenario: Scenario
    population: Population
    cell: Cell
    topology: CellBackhaul
    availability: object  # the SimPy engine's availability model
    algorithm: NoLearning
    client_steps: np.ndarray  # (N,) local steps per round
    client_samples: np.ndarray | None  # (N,) training samples; only with local_epochs
    freeloader: np.ndarray  # (N,) bool
    step_time_s: np.ndarray  # (N,)
    step_energy_j: np.ndarray  # (N,)
    n_params: int
    forward_flops: float  # one sample's forward pass
    uplink_bits: float
    downlink_bits: float
    # the scenario's algorithm's facts (algorithm_declaration): its vectors, stated FLOPs
    algorithm_cls: AlgorithmDeclaration | type = NoLearning
    vector_work: float = 0.0  # its vector FLOPs per step, in steps (algorithms/work.py)
    gradient_counts: tuple = ((1,),)  # evaluations per step, rounds 0, 1, ... (declared)

    @property
    def serving_cell(self) -> np.ndarray:
        if self.cell.serving_cell is None:
            return np.zeros(self.population.size, dtype=int)
        return self.cell.serving_cell


def most_steps(scenario, client_steps: np.ndarray) -> int:
    """The most local steps a client may run in a round: its scenario steps, or
    policy.max_steps under policy.steps=deadline."""
    most = int(client_steps.max())
    policy = scenario.policy
    if policy.steps == "deadline" and policy.max_steps is not None:
        most = max(most, policy.max_steps)
    return most


def gradients_of_round(world: SystemWorld, r: int) -> list[int]:
    """Round r's gradient evaluations per local step from the dry count (later rounds
    repeat the last round counted)."""
    counts = world.gradient_counts
    return list(counts[min(r, len(counts) - 1)])


def algorithm_declaration(section) -> AlgorithmDeclaration:
    """What the engines without training know of a scenario's algorithm: a built-in's
    declaration (no torch), or a plug-in's facts read off its class, its gradient
    evaluations counted by training a toy problem (learning.dry_count)."""
    if section.name in DECLARATIONS:  # (a built-in name is never replaced)
        return DECLARATIONS[section.name]
    # deferred: torch (a plug-in algorithm's class and its dry count)
    from fedjoule.algorithms.learning import counted_declaration

    return counted_declaration(section)


def build_availability(section, n_clients: int, seed: int):
    if section.kind == "always":
        return AlwaysOn(n_clients)
    if section.kind == "bernoulli":
        return BernoulliDropout(section.p_drop, seed, n_clients)
    if section.kind == "diurnal":
        return Diurnal(
            section.diurnal_mean,
            section.diurnal_amplitude,
            section.diurnal_phase_h,
            section.diurnal_phase_spread_h,
            section.charging_from_h,
            section.charging_to_h,
            seed,
            n_clients,
        )
    if section.kind == "trace":
        path = trace_path(section.trace_file)
        if is_fedscale_file(path):  # FedScale's behaviour trace format
            return BehaviourReplay(path, n_clients)
        return TraceReplay(section.trace_file, n_clients, section.trace_period_s)
    return MarkovOnOff(section.mean_on_s, section.mean_off_s, seed, n_clients)


def local_steps(training, client_samples: np.ndarray) -> tuple[np.ndarray, int]:
    """Steps of each client per round, and the nominal K (FedDC's K-bar): local_steps, or
    with local_epochs E, ceil(E n_i / B) (each batch holds B samples, so this covers E
    epochs; the reference code's smaller last batch is not used)."""
    if training.local_epochs is None:
        k = training.local_steps
        return np.full(len(client_samples), k), k
    steps = np.ceil(training.local_epochs * client_samples / training.batch_size).astype(int)
    nominal = int(np.ceil(training.local_epochs * client_samples.mean() / training.batch_size))
    return np.maximum(steps, 1), max(nominal, 1)


def pick_freeloaders(fraction: float, n_clients: int, seed: int) -> np.ndarray:
    """round(fraction N) clients chosen at random are freeloaders."""
    mask = np.zeros(n_clients, dtype=bool)
    count = int(round(fraction * n_clients))
    mask[rng.stream(seed, "freeloader").choice(n_clients, count, replace=False)] = True
    return mask


def model_size(scenario: Scenario) -> tuple[int, float]:
    """Parameters and forward FLOPs per sample of the scenario's model, from the template and
    the dataset's known input shape (no data): counted without torch for the built-in
    templates (model_sizes.py), else by building the model; a stated
    model.forward_flops_per_sample replaces the FLOPs."""
    shape, classes = dataset_shape(scenario.dataset)
    config = scenario.model
    counted = template_size(config, shape, classes, scenario.dataset.name == "text")
    if counted is None:
        return _built_model_size(scenario, shape, classes)
    n_params, flops = counted
    return n_params, config.forward_flops_per_sample or flops


def _built_model_size(scenario: Scenario, shape, classes: int) -> tuple[int, float]:
    """model_size of a model this package cannot count by arithmetic (torchvision, custom,
    initial weights): built with torch, one sample's forward pass counted."""
    from fedjoule.models import build_model  # deferred: torch (the model, built)

    model, w0 = build_model(scenario.model, shape, classes, scenario.seed)
    if scenario.model.forward_flops_per_sample:
        return model.n_params, scenario.model.forward_flops_per_sample
    # one sample of zeros on the CPU (w0's device), of the input's dtype
    example = w0.new_zeros((1, *shape), dtype=input_dtype(scenario.dataset))
    return model.n_params, model.forward_flops_per_sample(example)


def build_system_world(scenario: Scenario) -> SystemWorld:
    """The fixed parts of a run without data or model training; arrays over the N clients."""
    seed, n = scenario.seed, scenario.population.size
    training = scenario.training
    n_params, flops = model_size(scenario)
    population = sample_population(scenario.population, seed)
    step_time_s, step_energy_j = step_costs(
        scenario.population, population, flops, training.batch_size
    )
    samples = None
    if training.local_epochs is None:
        client_steps = np.full(n, training.local_steps)
    else:  # epochs need each client's sample count: drawn as the loaders draw it
        samples = client_sample_counts(scenario.dataset, n, seed)
        client_steps, _ = local_steps(training, samples)
    cell, _ = place_cell(scenario.channel, n, seed, scenario.topology)
    population = with_power_control(scenario, population, cell)
    serving = cell.serving_cell if cell.serving_cell is not None else np.zeros(n, dtype=int)
    algorithm = algorithm_declaration(scenario.algorithm)
    uplink_bits, downlink_bits = payload_bits(scenario, algorithm, n_params)
    return SystemWorld(
        scenario=scenario,
        population=population,
        cell=cell,
        topology=CellBackhaul(scenario.topology, serving),
        availability=build_availability(scenario.availability, n, seed),
        algorithm=NoLearning(),
        client_steps=client_steps,
        client_samples=samples,
        freeloader=pick_freeloaders(scenario.population.freeloaders.fraction, n, seed),
        step_time_s=step_time_s,
        step_energy_j=step_energy_j,
        n_params=n_params,
        forward_flops=flops,
        uplink_bits=uplink_bits,
        downlink_bits=downlink_bits,
        algorithm_cls=algorithm,
        vector_work=vector_work(algorithm, n_params, flops, training.batch_size),
        # (up to policy.max_steps when the policy sets the steps)
        gradient_counts=tuple(algorithm.gradient_counts(most_steps(scenario, client_steps))),
    )
