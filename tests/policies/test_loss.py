"""The training loss each client reports with its update (docs/policies.md#the-training-loss):
the executors' recorded mean loss against plain torch SGD evaluating the client's model on
its batches, every executor alike; on the learning engine, the observation takes it only
from updates that arrived, power-of-choice and oort select by it, and a resume keeps it."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fedjoule
from fedjoule import rng
from fedjoule.algorithms.base import RoundSetup
from fedjoule.algorithms.dense import DenseGradient
from fedjoule.algorithms.executor import (
    BufferedGradient,
    LoopGradient,
    SequentialExecutor,
    VectorisedExecutor,
)
from fedjoule.algorithms.learning import train_clients
from fedjoule.algorithms.options import FedAvgConfig, FedProxConfig
from fedjoule.algorithms.registry import build_algorithm
from fedjoule.models.functional import FlatModel, cross_entropy, per_sample_losses
from fedjoule.policies.select import oort_exploration, select_oort
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.checkpoint import read_checkpoint
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.world import build_world

CPU = torch.device("cpu")
LR = 0.2
STEPS = (4, 2)  # the two clients' local steps: the second stops early (masked steps)


def small_mlp(dtype=torch.float32) -> FlatModel:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    return FlatModel.wrap(net.to(dtype))


def batch_norm_mlp() -> FlatModel:
    torch.manual_seed(0)
    return FlatModel.wrap(torch.nn.Sequential(
        torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.ReLU(), torch.nn.Linear(5, 3)
    ))  # fmt: skip


def data(dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 6, generator=gen), torch.randint(0, 3, (64,), generator=gen)
    batches = torch.randint(0, 64, (2, max(STEPS), 8), generator=gen)
    return x.to(dtype), y, batches


def plain_sgd_losses(x, y, batches, build=small_mlp) -> tuple[list[float], list[float]]:
    """Each client's mean minibatch loss over its steps, and the root mean square of its
    per-sample losses over all its steps' samples, by nn.Module, torch.optim.SGD and
    F.cross_entropy(reduction="none"): the losses of step k evaluated at the client's model
    of step k, before its update."""
    means, rms = [], []
    for i, steps in enumerate(STEPS):
        net = build().module.to(x.dtype)
        opt = torch.optim.SGD(net.parameters(), lr=LR)
        each = []
        for k in range(steps):
            opt.zero_grad()
            per_sample = F.cross_entropy(net(x[batches[i, k]]), y[batches[i, k]], reduction="none")
            each.append(per_sample.detach())
            per_sample.mean().backward()
            opt.step()
        means.append(sum(e.mean().item() for e in each) / steps)
        rms.append(torch.cat(each).square().mean().sqrt().item())
    return means, rms


def executors(model: FlatModel, x, y) -> dict:
    dense, square = DenseGradient.build(model), model.loss_and_square
    return {
        "sequential": SequentialExecutor(model.loss, x, y, CPU, square_loss=square),
        "vectorised (dense, fused steps)": VectorisedExecutor(model.loss, x, y, CPU, dense),
        "vectorised (dense, chunks of 1)": VectorisedExecutor(
            model.loss, x, y, CPU, dense, memory_budget_mb=1e-6
        ),
        "vectorised (vmap)": VectorisedExecutor(model.loss, x, y, CPU, square_loss=square),
        "vectorised (client by client)": VectorisedExecutor(
            model.loss, x, y, CPU, LoopGradient(model.loss, square_loss=square)
        ),
    }


def test_every_executor_records_the_loss_plain_sgd_evaluates():
    model, (x, y, batches) = small_mlp(), data()
    expected = plain_sgd_losses(x, y, batches)[0]
    algorithm = build_algorithm(FedAvgConfig(), 2, torch.full((2,), 32))
    state = algorithm.init_state(model.flat_parameters())
    ids = torch.arange(2)
    for name, executor in executors(model, x, y).items():
        setup = RoundSetup(LR, torch.tensor(STEPS), 0)
        result = train_clients(algorithm, executor, state, ids, setup, batches, record_loss=True)
        assert result.loss.tolist() == pytest.approx(expected, abs=1e-6), name
        quiet = train_clients(
            algorithm, executor, state, ids, RoundSetup(LR, torch.tensor(STEPS), 0), batches
        )
        assert quiet.loss is None and quiet.loss_rms is None
        assert torch.equal(quiet.uploads["model"], result.uploads["model"]), name  # bit for bit


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_every_executor_reports_the_root_mean_square_of_the_per_sample_losses(dtype, tol):
    """Oort's sqrt(1/|B| sum loss(i)^2) over the samples of every step, as plain SGD and
    F.cross_entropy(reduction="none") compute it; above the mean loss."""
    model, (x, y, batches) = small_mlp(dtype), data(dtype)
    means, expected = plain_sgd_losses(x, y, batches, lambda: small_mlp(dtype))
    algorithm = build_algorithm(FedAvgConfig(), 2, torch.full((2,), 32))
    state = algorithm.init_state(model.flat_parameters())
    for name, executor in executors(model, x, y).items():
        setup = RoundSetup(LR, torch.tensor(STEPS), 0)
        result = train_clients(
            algorithm, executor, state, torch.arange(2), setup, batches, record_loss=True
        )
        assert result.loss_rms.tolist() == pytest.approx(expected, abs=tol), name
        assert result.loss.tolist() == pytest.approx(means, abs=tol), name
        assert (result.loss_rms > result.loss).all(), name  # the losses of a batch differ


def test_a_corrected_step_and_a_freeloader_report_alike_in_every_executor():
    """FedProx (not a fused step): the same losses from every executor; a client without
    steps reports none (nan)."""
    model, (x, y, batches) = small_mlp(), data()
    algorithm = build_algorithm(FedProxConfig(mu=0.5), 2, torch.full((2,), 32))
    state = algorithm.init_state(model.flat_parameters())
    losses = {}
    for name, executor in executors(model, x, y).items():
        setup = RoundSetup(LR, torch.tensor([3, 0]), 0, 0.01)
        result = train_clients(
            algorithm, executor, state, torch.arange(2), setup, batches, record_loss=True
        )
        losses[name] = torch.stack([result.loss, result.loss_rms], dim=1)
    reference = losses.pop("sequential")
    assert torch.isnan(reference[1]).all() and torch.isfinite(reference[0]).all()
    assert reference[0, 1] >= reference[0, 0]
    for name, loss in losses.items():
        assert torch.allclose(loss, reference, atol=1e-6, equal_nan=True), name


def test_per_sample_losses_of_sequences_and_of_a_custom_loss():
    """A sequence's loss is the mean over its positions; a custom loss is taken on each
    sample alone; either way their mean is the batch's loss. Through vmap (a custom loss on
    the vectorised executor) the sequential executor's root mean square."""
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(4, 3, 5, generator=gen, dtype=torch.float64)  # (B, T, C)
    y = torch.randint(0, 5, (4, 3), generator=gen)
    each = per_sample_losses(cross_entropy, logits, y)
    by_position = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (B, T)
    assert torch.allclose(each, by_position.mean(dim=1), rtol=0, atol=1e-12)
    assert each.mean().item() == pytest.approx(cross_entropy(logits, y).item(), abs=1e-12)

    def halved(z, t):  # a custom mean loss
        return 0.5 * F.cross_entropy(z, t)

    z, t = logits[:, 0], y[:, 0]
    expected = 0.5 * F.cross_entropy(z, t, reduction="none")
    assert torch.allclose(per_sample_losses(halved, z, t), expected, rtol=0, atol=1e-12)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    model, (x, y, batches) = FlatModel.wrap(net, halved), data()
    algorithm = build_algorithm(FedAvgConfig(), 2, torch.full((2,), 32))
    state = algorithm.init_state(model.flat_parameters())
    square, rms = model.loss_and_square, []
    for executor in (
        SequentialExecutor(model.loss, x, y, CPU, square_loss=square),
        VectorisedExecutor(model.loss, x, y, CPU, square_loss=square),
    ):
        setup = RoundSetup(LR, torch.tensor(STEPS), 0)
        result = train_clients(
            algorithm, executor, state, torch.arange(2), setup, batches, record_loss=True
        )
        assert (result.loss_rms > result.loss).all()
        rms.append(result.loss_rms)
    assert torch.allclose(rms[0], rms[1], rtol=0, atol=1e-6)


def test_running_statistics_models_report_alike_batched_client_by_client_and_sequentially():
    """Batch norm (BufferedGradient, vmap and client by client): the sequential losses,
    and plain SGD's (nn.Module in training mode) root mean square of per-sample losses."""
    model, (x, y, batches) = batch_norm_mlp(), data()
    algorithm = build_algorithm(FedAvgConfig(), 2, torch.full((2,), 32))
    state = algorithm.init_state(model.flat_parameters())
    buffered, square = model.loss_and_buffers, model.loss_buffers_and_square
    runs = {
        "sequential": SequentialExecutor(
            model.loss, x, y, CPU, buffered, buffered_square_loss=square
        ),
        "vmap": VectorisedExecutor(
            model.loss, x, y, CPU, buffered=BufferedGradient(buffered, square_loss=square)
        ),
        "client by client": VectorisedExecutor(model.loss, x, y, CPU, buffered=BufferedGradient(
            buffered, per_client=True, square_loss=square
        )),
    }  # fmt: skip
    losses = {}
    for name, executor in runs.items():
        buffers = model.flat_buffers().expand(2, -1).clone()
        setup = RoundSetup(LR, torch.tensor(STEPS), 0)
        result = train_clients(
            algorithm, executor, state, torch.arange(2), setup, batches, buffers=buffers,
            record_loss=True,
        )  # fmt: skip
        losses[name] = torch.stack([result.loss, result.loss_rms], dim=1)
    assert torch.isfinite(losses["sequential"]).all()
    means, rms = plain_sgd_losses(x, y, batches, batch_norm_mlp)
    assert losses["sequential"].T.tolist() == [pytest.approx(means), pytest.approx(rms)]
    for name in ("vmap", "client by client"):
        assert torch.allclose(losses[name], losses["sequential"], atol=1e-6), name


# ---------------------------------------------------------------- on the learning engine
def played(policy: dict, size: int, m: int, rounds: int, deadline_s: float):
    """A small default-theory run with `policy`, round by round: the clients that trained
    and the losses they sent, each client's outcome, the observation after each row, and
    the root mean squares of per-sample losses the clients sent."""
    overrides = [
        f"population.size={size}", f"training.clients_per_round={m}", "round.min_clients=1",
        "availability.kind=always", f"round.deadline_s={deadline_s}", "training.local_steps=5",
        *(f"policy.{k}={v}" for k, v in policy.items()),
    ]  # fmt: skip
    sim = Simulation(build_world(load_scenario("default-theory", overrides), device="cpu"))
    step, rounds_seen = sim.policy_step, []
    sent, sent_rms = {}, {}
    trained = step.trained

    def spy(clients, loss, r, loss_rms):  # what the clients sent, as the engine hands it over
        sent.update(zip(np.asarray(clients).tolist(), loss.tolist(), strict=True))
        sent_rms.update(zip(np.asarray(clients).tolist(), loss_rms.tolist(), strict=True))
        trained(clients, loss, r, loss_rms)

    step.trained = spy
    before = [step.observer.loss.copy()]

    def on_round(row):
        outcome = {rec.client: rec.outcome for rec in sim.last_records}
        obs = step.observer
        rounds_seen.append((dict(sent), outcome, before[0], obs.loss.copy(), obs.state_dict(),
                            dict(sent_rms)))  # fmt: skip
        before[0] = obs.loss.copy()
        sent.clear(), sent_rms.clear()

    sim.run(rounds, on_round)
    return sim, rounds_seen


def test_the_observation_takes_the_loss_of_arrived_updates_only_and_power_of_choice_ranks_by_it():
    """Power-of-choice with d = every client: the next round's clients are the m highest
    losses the server holds (never reported first, ties to the lower id); a client whose
    update missed the deadline keeps the loss it had."""
    n, m = 12, 6
    sim, seen = played({"select": "power-of-choice", "choice_d": n}, n, m, 6, 0.01)
    dropped = 0
    for r, (sent, outcome, before, after, *_) in enumerate(seen):
        assert sorted(sent) == sorted(outcome) and len(sent) == m
        for k, loss in sent.items():
            if outcome[k] == "arrived":
                assert after[k] == loss and np.isfinite(loss)
            else:
                dropped += 1
                assert after[k] == before[k] or np.isnan(after[k]) and np.isnan(before[k])
        untouched = np.setdiff1d(np.arange(n), list(sent))
        np.testing.assert_array_equal(after[untouched], before[untouched])
        if r + 1 < len(seen):
            score = np.where(np.isnan(after), np.inf, after)
            expected = np.lexsort((np.arange(n), -score))[:m]
            assert sorted(seen[r + 1][0]) == sorted(expected.tolist())
    assert dropped > 0  # the deadline cut some updates


def test_oort_exploits_the_reported_losses():
    """Each round's clients are select_oort over the observation the previous row left
    (its losses those the arrived clients sent), drawn from the round's selection stream;
    from round 1 on, part of them are exploited by utility n_samples x the root mean square
    of their per-sample losses (above their mean loss)."""
    n, m, rounds = 16, 10, 4
    sim, seen = played({"select": "oort"}, n, m, rounds, 0.2)
    step, seed = sim.policy_step, sim.world.scenario.seed
    for r in range(1, rounds):
        step.observer.load_state_dict(seen[r - 1][4])  # the server's knowledge then
        obs = step.observer.observation(r, np.arange(n), step.n_samples)
        arrived = [k for k, o in seen[r - 1][1].items() if o == "arrived"]
        np.testing.assert_array_equal(obs.loss[arrived], [seen[r - 1][0][k] for k in arrived])
        rms = [seen[r - 1][5][k] for k in arrived]
        np.testing.assert_array_equal(obs.loss_rms[arrived], rms)
        assert (obs.loss_rms[arrived] > obs.loss[arrived]).all()
        assert int(m * (1 - oort_exploration(r))) >= 1  # some exploited by their loss
        gen = rng.stream(seed, "selection", r)
        chosen = select_oort(obs, m, gen, **step.selector_parameters())
        assert chosen.tolist() == sorted(seen[r][0])


def test_a_resumed_run_keeps_the_losses_and_selects_as_the_uninterrupted_one(tmp_path):
    """Cut after round 0: the 6 clients that reported keep their losses, so round 1 takes
    the 6 never seen (with every loss forgotten it would take clients 0-5 again)."""
    overrides = {
        "training.rounds": 3, "population.size": 12, "training.clients_per_round": 6,
        "round.min_clients": 1, "availability.kind": "always", "training.local_steps": 5,
        "policy.select": "power-of-choice", "policy.choice_d": 12, "output.events": True,
    }  # fmt: skip
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    fedjoule.run("default-theory", whole, overrides=overrides, quiet=True)
    fedjoule.run("default-theory", cut, overrides=overrides, quiet=True, on_round=lambda row: False)
    saved = read_checkpoint(cut / "checkpoint.pt")["simulation"]["policy"]
    assert np.isfinite(np.asarray(saved["loss"])).tolist() == [True] * 6 + [False] * 6
    fedjoule.run(None, cut, resume=True, quiet=True)

    def selections(folder):
        events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
        return sorted({(e["round"], e["client"]) for e in events if e["outcome"] != "outside"})

    assert selections(cut) == selections(whole)
    assert {k for r, k in selections(cut) if r == 1} == set(range(6, 12))


def test_a_resumed_oort_run_keeps_the_root_mean_squares_and_selects_as_the_uninterrupted_one(
    tmp_path,
):
    overrides = {
        "training.rounds": 4, "population.size": 12, "training.clients_per_round": 6,
        "round.min_clients": 1, "availability.kind": "always", "training.local_steps": 3,
        "policy.select": "oort", "output.events": True,
    }  # fmt: skip
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    fedjoule.run("default-theory", whole, overrides=overrides, quiet=True)
    stop = iter([True, False])
    fedjoule.run("default-theory", cut, overrides=overrides, quiet=True,
                 on_round=lambda row: next(stop))  # fmt: skip
    assert len((cut / "rounds.csv").read_text().splitlines()) == 1 + 2  # cut after round 1
    saved = read_checkpoint(cut / "checkpoint.pt")["simulation"]["policy"]
    loss, rms = np.asarray(saved["loss"]), np.asarray(saved["loss_rms"])
    assert np.isfinite(loss).sum() >= 6 and (np.isfinite(rms) == np.isfinite(loss)).all()
    assert (rms[np.isfinite(rms)] > loss[np.isfinite(loss)]).all()
    fedjoule.run(None, cut, resume=True, quiet=True)
    for name in ("events.jsonl", "rounds.csv"):
        a, b = ((folder / name).read_text().splitlines() for folder in (whole, cut))
        if name == "rounds.csv":  # the wall time differs
            a, b = ([line.split(",")[:-1] for line in lines] for lines in (a, b))
        assert a == b, name
