"""Everything a run holds fixed, built once from the scenario: data, model, devices, cell."""

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad, vmap

from fedjoule import rng
from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.compression import Compressor, payload_bits
from fedjoule.algorithms.dense import DenseGradient
from fedjoule.algorithms.executor import (
    BufferedGradient,
    LoopGradient,
    SequentialExecutor,
    VectorisedExecutor,
)
from fedjoule.algorithms.registry import build_algorithm
from fedjoule.algorithms.work import vector_work
from fedjoule.channel.cell import Cell, build_network
from fedjoule.channel.topology import Topology
from fedjoule.data.federated import FederatedData, build_federated_data
from fedjoule.devices.availability import (
    AlwaysOn,
    BernoulliDropout,
    Diurnal,
    MarkovOnOff,
    TraceReplay,
)
from fedjoule.devices.population import Population, sample_population, step_costs
from fedjoule.errors import FedjouleError
from fedjoule.models import build_model
from fedjoule.models.functional import FlatModel
from fedjoule.scenarios.plausibility import synthetic_data_bytes
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.evaluation import Evaluator


@dataclass
class World:
    scenario: Scenario
    device: torch.device
    data: FederatedData
    model: FlatModel
    w0: torch.Tensor
    b0: torch.Tensor  # (B,) initial running statistics (batch norm); (0,) for none
    population: Population
    cell: Cell
    topology: Topology
    availability: object
    algorithm: Algorithm
    executor: object
    evaluator: Evaluator
    client_steps: np.ndarray  # (N,) local steps of each client per round
    freeloader: np.ndarray  # (N,) bool
    step_time_s: np.ndarray  # (N,) one local step
    step_energy_j: np.ndarray  # (N,)
    uplink_bits: float  # per participating client
    downlink_bits: float
    compressor: Compressor | None = None  # None: the uploads go as they are
    vector_work: float = 0.0  # the algorithm's vector FLOPs per step, in steps (work.py)

    @property
    def n_params(self) -> int:
        return self.model.n_params

    @property
    def algorithm_cls(self) -> type[Algorithm]:
        return type(self.algorithm)


def pick_device(name: str) -> torch.device:
    """`auto` picks CUDA when present."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise FedjouleError("--device cuda: no CUDA device is available here; use cpu or auto")
    if name not in ("cpu", "cuda"):
        raise FedjouleError(f"--device {name!r}: expected auto, cpu or cuda")
    return torch.device(name)


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
        from fedjoule.channel.trace import trace_path
        from fedjoule.devices.fedscale import BehaviourReplay, is_fedscale_file

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


def make_executor(kind: str, model: FlatModel, data: FederatedData, device: torch.device):
    """`vectorised`: all clients in one step loop, with the fastest gradient for the model
    and device (hand-batched for dense models; client by client, by plain autograd, for
    convolutional and recurrent models on a CPU; vmap otherwise); `vmap`: plain
    vmap(grad), for comparison;
    `compiled`: vmap(grad) through torch.compile (opt-in: on this project's CPU it does
    not pay, benchmarks/RESULTS.md); `sequential`: the reference."""
    buffered_loss = model.loss_and_buffers if model.n_buffers else None
    if kind == "sequential":
        return SequentialExecutor(
            model.loss, data.x_train, data.y_train, device, buffered_loss, model.eval_loss
        )
    fast = None
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in model.module.modules())
    recurrent = any(isinstance(m, torch.nn.RNNBase) for m in model.module.modules())
    per_client = kind == "vectorised" and (has_conv or recurrent) and device.type == "cpu"
    if kind == "compiled":
        fast = torch.compile(vmap(grad(model.loss)))
    if kind == "vectorised":
        fast = DenseGradient.build(model)
        if fast is None and per_client:
            fast = LoopGradient(model.loss)
    buffered = BufferedGradient(buffered_loss, per_client) if buffered_loss else None
    return VectorisedExecutor(
        model.loss,
        data.x_train,
        data.y_train,
        device,
        fast,
        buffered=buffered,
        eval_loss=model.eval_loss,
    )


def check_data_fits(scenario: Scenario) -> None:
    """Refuse a synthetic dataset larger than this machine's memory, before making it
    (10 million clients x 200 samples would otherwise end in the kernel's OOM killer)."""
    need_bytes = synthetic_data_bytes(scenario)
    memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need_bytes > memory_bytes:
        n, values = scenario.population.size, scenario.dataset.synthetic.dim + 1
        samples = need_bytes / (4 * n * values)
        raise FedjouleError(
            f"dataset.synthetic: {n:,} clients x about {samples:,.0f} samples x {values} "
            f"values x 4 bytes = {need_bytes / 1e9:.3g} GB of data, more than this machine's "
            f"{memory_bytes / 1e9:.3g} GB of memory; reduce population.size or "
            "dataset.synthetic.avg_samples (`run --no-train` needs no data)"
        )


def build_world(
    scenario: Scenario, data_dir=None, device: str = "auto", executor: str = "vectorised"
) -> World:
    seed, n = scenario.seed, scenario.population.size
    torch_device = pick_device(device)
    check_data_fits(scenario)
    data = build_federated_data(scenario.dataset, n, seed, data_dir)
    model, w0 = build_model(scenario.model, data.input_shape, data.n_classes, seed)
    model.module.to(torch_device)
    population = sample_population(scenario.population, seed)
    flops = scenario.model.forward_flops_per_sample or model.forward_flops_per_sample(
        data.x_train[:1].to(torch_device)
    )
    step_time_s, step_energy_j = step_costs(
        scenario.population, population, flops, scenario.training.batch_size
    )
    samples = torch.as_tensor(data.client_samples)
    training = scenario.training
    client_steps, nominal_steps = local_steps(training, data.client_samples)
    algorithm = build_algorithm(scenario.algorithm, n, samples, nominal_steps, training.lr, seed)
    uplink_bits, downlink_bits = payload_bits(scenario, type(algorithm), model.n_params)
    cell, topology = build_network(scenario.channel, n, seed, scenario.topology)
    return World(
        scenario=scenario,
        device=torch_device,
        data=data,
        model=model,
        w0=w0.to(torch_device),
        b0=model.flat_buffers().to(torch_device),
        population=population,
        cell=cell,
        topology=topology,
        availability=build_availability(scenario.availability, n, seed),
        algorithm=algorithm,
        executor=make_executor(executor, model, data, torch_device),
        evaluator=Evaluator(model, data.x_test, data.y_test, data.client_test, torch_device),
        client_steps=client_steps,
        freeloader=pick_freeloaders(scenario.population.freeloaders.fraction, n, seed),
        step_time_s=step_time_s,
        step_energy_j=step_energy_j,
        uplink_bits=uplink_bits,
        downlink_bits=downlink_bits,
        compressor=Compressor.build(scenario, w0.to(torch_device)),
        vector_work=vector_work(type(algorithm), model.n_params, flops, training.batch_size),
    )
