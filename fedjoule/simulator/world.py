"""Everything a run holds fixed, built once from the scenario: data, model, devices, cell."""

import os
from dataclasses import dataclass

import numpy as np
import torch

from fedjoule.algorithms.base import Algorithm, RoundSetup
from fedjoule.algorithms.compression import Compressor, payload_bits
from fedjoule.algorithms.dense import DenseGradient
from fedjoule.algorithms.executor import (
    BufferedGradient,
    ClientDraws,
    DrawnTogether,
    LoopGradient,
    SequentialExecutor,
    VectorisedExecutor,
    VmapGradient,
    draws_random_numbers,
)
from fedjoule.algorithms.registry import build_algorithm
from fedjoule.algorithms.work import vector_work
from fedjoule.channel.cell import Cell, build_network
from fedjoule.channel.topology import Topology
from fedjoule.data.federated import FederatedData, build_federated_data
from fedjoule.devices.population import Population, sample_population, step_costs
from fedjoule.errors import FedjouleError
from fedjoule.models import build_model
from fedjoule.models.functional import FlatModel
from fedjoule.scenarios.plausibility import synthetic_data_bytes
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.evaluation import Evaluator
from fedjoule.simulator.system_world import build_availability, local_steps, pick_freeloaders
from fedjoule.simulator.transfers import with_power_control


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
    forward_flops: float = 0.0  # forward FLOPs of one sample (models/flops.py)

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


def make_executor(
    kind: str,
    model: FlatModel,
    data: FederatedData,
    device: torch.device,
    seed: int = 0,
    batch_size: int = 2,
):
    """`vectorised`: all clients in one step loop, with the fastest gradient for the model
    and device (hand-batched for dense models; client by client, by plain autograd, for
    convolutional and recurrent models on a CPU and for models with random layers; vmap
    otherwise); `vmap`: plain vmap(grad), for comparison;
    `compiled`: vmap(grad) through torch.compile (opt-in: on this project's CPU it does
    not pay, benchmarks/RESULTS.md); `sequential`: the reference.

    The model is tried first on a batch of `batch_size` training samples (check_model):
    whether it draws random numbers (then each client draws from its own generator,
    ClientDraws, `seed` being the scenario's), and whether vmap can batch it."""
    buffered_loss = model.loss_and_buffers if model.n_buffers else None
    square_loss = model.loss_buffers_and_square if model.n_buffers else None  # train_loss.py
    random = check_model(model, data, device, batch_size)
    if kind == "sequential":
        return SequentialExecutor(
            model.loss,
            data.x_train,
            data.y_train,
            device,
            buffered_loss,
            model.eval_loss,
            ClientDraws(seed, device) if random else None,
            model.loss_and_square,
            square_loss,
        )
    fast = None
    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in model.module.modules())
    recurrent = any(isinstance(m, torch.nn.RNNBase) for m in model.module.modules())
    # convolutions: client by client on a CPU (vmap's grouped convolution is slower there);
    # LSTMs on every device (vmap has no batching rule for cuDNN's LSTM either: on an H200
    # it fails with "Cannot access data pointer of Tensor that doesn't have storage")
    loop = (has_conv and device.type == "cpu") or recurrent
    per_client = kind == "vectorised" and (loop or random)
    draws = ClientDraws(seed, device, batched=not per_client) if random else None
    randomness = "different" if random else "error"
    if kind == "vectorised":
        fast = None if random else DenseGradient.build(model)
        if fast is None and per_client:
            fast = LoopGradient(model.loss, draws, model.loss_and_square)
    if fast is None:
        compiled = kind == "compiled"
        fast = VmapGradient(model.loss, randomness, compiled, model.loss_and_square)
    if random and not per_client:
        fast = DrawnTogether(fast, draws)
    buffered = (
        BufferedGradient(buffered_loss, per_client, draws, square_loss) if buffered_loss else None
    )
    executor = VectorisedExecutor(
        model.loss,
        data.x_train,
        data.y_train,
        device,
        fast,
        buffered=buffered,
        eval_loss=model.eval_loss,
        draws=draws,
        split=isinstance(fast, DenseGradient),  # no nn.Module (functional_call swaps its tensors)
    )
    if not per_client and kind != "compiled":
        check_vmap(executor, model, data, device, batch_size)
    return executor


def _first_batch(data: FederatedData, device: torch.device, batch_size: int):
    """The first `batch_size` training samples (repeated when there are fewer)."""
    idx = torch.arange(batch_size) % len(data.y_train)
    return data.x_train[idx].to(device), data.y_train[idx].to(device)


def check_model(model: FlatModel, data: FederatedData, device: torch.device, batch_size: int):
    """Whether the model draws random numbers when training (dropout and the like: its loss
    runs once on a training batch, and torch's generators are compared before and after).
    A model that draws in evaluation mode is refused: evaluation would not be reproducible."""
    x, y = _first_batch(data, device, batch_size)
    w = model.flat_parameters().to(device)
    b = model.flat_buffers().to(device)

    def train_loss():
        if model.n_buffers:
            return model.loss_and_buffers(w, b, x, y)
        return model.loss(w, x, y)

    with torch.no_grad():
        try:
            random = draws_random_numbers(train_loss, device)
            random_in_eval = draws_random_numbers(lambda: model.eval_loss(w, x, y, b), device)
        except Exception as exc:
            raise FedjouleError(
                f"model {model_name(model)}: its loss fails on a batch of {batch_size} training "
                f"samples of shape {tuple(x.shape[1:])}: {type(exc).__name__}: "
                f"{first_line(exc)}"
            ) from None
    if random_in_eval:
        raise FedjouleError(
            f"model {model_name(model)} draws random numbers in evaluation mode (e.g. "
            "F.dropout(x, training=True) or torch.rand in forward): test accuracy and loss "
            "would change from one evaluation to the next; draw only in training mode "
            "(nn.Dropout, or F.dropout(x, training=self.training))"
        )
    return random


def check_vmap(
    executor: VectorisedExecutor,
    model: FlatModel,
    data: FederatedData,
    device: torch.device,
    batch_size: int,
) -> None:
    """Refuse, before the run's folder exists, a model whose gradient torch.func.vmap cannot
    batch over clients (one gradient of two clients is taken)."""
    x, y = _first_batch(data, device, batch_size)
    xs, ys = torch.stack([x, x]), torch.stack([y, y])
    w = model.flat_parameters().to(device).expand(2, -1).clone()
    if executor.draws is not None:
        executor.draws.begin(RoundSetup(0.0, torch.ones(2, dtype=torch.long)), 2)
    try:
        if executor.buffered is not None:
            b = model.flat_buffers().to(device).expand(2, -1).clone()
            executor.buffered(w, b, xs, ys, torch.ones((2, 1), dtype=w.dtype, device=device))
        else:
            executor.batched_grad(w, xs, ys)
    except Exception as exc:
        raise FedjouleError(
            f"model {model_name(model)} cannot be trained by the vectorised executor, which "
            "batches the clients with torch.func.vmap: "
            f"{type(exc).__name__}: {first_line(exc)}. Run it with --executor sequential "
            "(one client at a time; the API's executor='sequential'), or make its forward "
            "pass a function of its parameters and input (docs/learning-models.md, the "
            "contract)"
        ) from None


def model_name(model: FlatModel) -> str:
    return type(model.module).__name__


def first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def check_protocol_model(kind: str, model: FlatModel) -> None:
    """async and buffered do not carry running statistics (batch norm) yet: refused when
    the world is built, so that validate says what run says."""
    if kind in ("async", "buffered") and model.flat_buffers().numel():
        raise FedjouleError(
            f"protocol.kind={kind} does not run models with running statistics (batch norm) "
            "yet; use protocol.kind=sync or hierarchical, or a model without batch norm"
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
    check_protocol_model(scenario.protocol.kind, model)
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
    population = with_power_control(scenario, population, cell)
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
        executor=make_executor(
            executor, model, data, torch_device, seed, scenario.training.batch_size
        ),
        evaluator=Evaluator(model, data.x_test, data.y_test, data.client_test, torch_device),
        client_steps=client_steps,
        freeloader=pick_freeloaders(scenario.population.freeloaders.fraction, n, seed),
        step_time_s=step_time_s,
        step_energy_j=step_energy_j,
        uplink_bits=uplink_bits,
        downlink_bits=downlink_bits,
        compressor=Compressor.build(scenario, w0.to(torch_device)),
        vector_work=vector_work(type(algorithm), model.n_params, flops, training.batch_size),
        forward_flops=flops,
    )
