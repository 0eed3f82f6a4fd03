"""The policy step's cheap paths give what the plain definitions give: the lazy observation
a built-in selector reads, each built-in selection against the selector on the plain
observation, the deadline allocators against their formulas step by step, an
allocation's check, and the round's fading drawn once for the engine and the observer."""

import threading

import numpy as np
import pytest

from fedjoule import rng
from fedjoule.channel.cell import round_fading, uplink_fading
from fedjoule.channel.fading import fading_power
from fedjoule.errors import FedjouleError
from fedjoule.policies.deadline import compute_time_s, deadline_frequency_hz, deadline_steps
from fedjoule.policies.observation import Decision, Observation, check_decision
from fedjoule.policies.select import SELECTORS, spectral_efficiency
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema.policy import LOSS_DRIVEN
from fedjoule.simulator.checkpoint import plain
from fedjoule.simulator.policy_step import PolicyStep
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_world import build_system_world

SMALL = ["population.size=60", "training.clients_per_round=8", "training.rounds=50"]


def engine_after(rounds: int, *policy: str) -> SystemEngine:
    sets = SMALL + [f"policy.{p}" for p in policy]
    engine = SystemEngine(build_system_world(load_scenario("default-theory", sets)))
    engine.run(rounds, lambda row: None)
    return engine


@pytest.mark.parametrize("csi", ["none", "last", "oracle"])
def test_the_lazy_observation_holds_the_observers_arrays_at_the_candidates(csi):
    engine = engine_after(3, "select=age", f"csi={csi}")
    step, r = engine.policy_step, 3
    observer, world = step.observer, engine.world
    candidates = np.flatnonzero(np.arange(60) % 3 != 1)
    lazy = observer.lazy_observation(r, candidates, step.n_samples)
    plain = observer.observation(r, candidates, step.n_samples)
    assert type(plain) is Observation and isinstance(lazy, Observation)
    direct = {
        "n_samples": step.n_samples[candidates],
        "battery_fraction": observer.battery_fraction[candidates],
        "upload_rate_bps": observer.upload_rate_bps[candidates],
        "round_time_s": observer.round_time_s[candidates],
        "loss": observer.loss[candidates],
        "participations": observer.participations[candidates],
        "age_rounds": r - observer.last_selected[candidates],
        "staleness_rounds": observer.staleness_rounds[candidates],
    }
    if csi != "none":  # this round's SNR (oracle), its last upload's (last), the mean
        channel, seed = world.scenario.channel, world.scenario.seed
        up = fading_power(rng.stream(seed, "fading", r), channel.fading, 60)
        now_db = observer.mean_sinr_db + 10 * np.log10(up)
        sinr_db = now_db if csi == "oracle" else observer.last_sinr_db
        direct["sinr_db"], direct["mean_sinr_db"] = sinr_db[candidates], observer.mean_sinr_db[
            candidates]  # fmt: skip
        assert np.isfinite(plain.sinr_db).sum() >= (len(candidates) if csi == "oracle" else 1)
    for name, value in direct.items():
        for obs in (lazy, plain):
            assert type(getattr(obs, name)) is np.ndarray
            np.testing.assert_array_equal(getattr(obs, name), value, err_msg=name)
    assert (plain.sinr_db is None) == (csi == "none") == (lazy.mean_sinr_db is None)
    np.testing.assert_array_equal(plain.client_id, candidates)
    assert (plain.round_index, plain.n_clients) == (lazy.round_index, lazy.n_clients) == (r, 60)
    if csi != "none":
        kept = lazy.mean_spectral_efficiency
        np.testing.assert_array_equal(kept, spectral_efficiency(plain.mean_sinr_db))


SELECTING = [s for s in SELECTORS if s not in LOSS_DRIVEN and s != "random"]


@pytest.mark.parametrize("name", SELECTING)
def test_each_builtin_selection_is_its_selector_on_the_plain_observation(name):
    extra = ["csi=oracle"] if name in ("best-channel", "proportional-fair") else []
    engine = engine_after(4, f"select={name}", *extra)
    step = engine.policy_step
    scenario = engine.world.scenario
    for r, candidates in ((4, np.arange(60)), (5, np.flatnonzero(np.arange(60) % 4 != 0))):
        chosen = step.select(candidates, r, None)
        obs = step.observer.observation(r, candidates, step.n_samples)
        gen = rng.stream(scenario.seed, "selection", r)
        expected = SELECTORS[name](obs, 8, gen, **step.selector_parameters())
        np.testing.assert_array_equal(chosen, expected)
        assert len(chosen) == 8


def plain_deadline_frequency_hz(c, b, k, comm_s, deadline_s, low, high, cores=1):
    """The definition step by step: K c B / (n (deadline - comm)) within [low, high],
    then a float up while late, down while one lower fits."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (c, b, k, comm_s, deadline_s, low)))
    low = np.broadcast_to(np.asarray(low, dtype=float), shape)
    high = np.broadcast_to(np.asarray(high, dtype=float), shape)
    slack_s = np.asarray(deadline_s, dtype=float) - np.asarray(comm_s, dtype=float)
    work = compute_time_s(c, b, k, 1.0, cores)
    with np.errstate(divide="ignore", invalid="ignore"):
        freq = np.where(slack_s > 0, work / slack_s, np.inf)
    freq = np.minimum(np.maximum(freq, low), high)

    def late(f):
        return (comm_s + compute_time_s(c, b, k, f, cores) > deadline_s) & (f < high)

    for _ in range(16):
        lower = np.maximum(np.nextafter(freq, 0), low)
        up, down = late(freq), (lower < freq) & ~late(lower) & (freq < high)
        if not np.any(up | down):
            break
        freq = np.where(up, np.minimum(np.nextafter(freq, np.inf), high), freq)
        freq = np.where(down & ~up, lower, freq)
    return freq[()]


def plain_deadline_steps(step_s, comm_s, deadline_s, max_steps):
    """floor(slack / step), nan and -inf as 1 and +inf as max_steps, corrected by one."""
    slack_s = deadline_s - np.asarray(comm_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.floor(slack_s / step_s)
    k = np.clip(np.nan_to_num(k, nan=1.0, posinf=max_steps, neginf=1.0), 0, max_steps)
    k = np.where(k * step_s > slack_s, k - 1, k)
    k = np.where((k + 1) * step_s <= slack_s, k + 1, k)
    return np.clip(k, 1, max_steps).astype(int)[()]


def test_the_deadline_allocators_equal_their_definitions_bit_for_bit():
    gen = np.random.default_rng(5)
    n = 400
    comm_s = gen.uniform(0, 2.5, n)
    comm_s[:6] = [np.nan, np.inf, -np.inf, 2.0, 0.0, 1.9999999999999998]
    step_s = gen.uniform(1e-4, 0.3, n)
    step_s[6:10] = [0.0, np.nan, np.inf, 1e-300]
    for max_steps in (1, 7, 50):
        with np.errstate(invalid="ignore"):  # 0 x inf: both warn
            np.testing.assert_array_equal(
                deadline_steps(step_s, comm_s, 2.0, max_steps),
                plain_deadline_steps(step_s, comm_s, 2.0, max_steps),
            )
    cycles = gen.uniform(1e4, 1e6, n)
    steps = gen.integers(1, 30, n)
    low, high = gen.uniform(2e8, 1e9, n), gen.uniform(1e9, 3e9, n)
    for cores in (1, 4, np.full(n, 2)):
        for args in ((cycles, 10.0, steps, comm_s, 2.0, low, high),
                     (cycles[0], 10, steps, comm_s, 2.0, 5e8, 2e9),
                     (1.3e5, 20, 3, 0.5, 1.7, 1e6, 1e10)):  # fmt: skip
            np.testing.assert_array_equal(
                deadline_frequency_hz(*args, cores=cores),
                plain_deadline_frequency_hz(*args, cores=cores),
            )


def test_an_allocations_check_refuses_as_any_decisions():
    sel = np.array([3, 8, 11])
    ranges = (np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.5, 3.5]))
    check_decision(Decision(sel, None, np.array([1.5, 2.0, 3.2]), np.array([1, 4, 2])), "p",
                   sel, ranges)  # fmt: skip
    cases = (
        (sel, np.array([1.2, 2.6, 3.0]), None, "client 8's CPU frequency 2.6 Hz is outside "
         "its DVFS range, 2 to 2.5 Hz"),
        (sel, None, np.array([1, 0, 2]), "client 8's local steps are 0; allowed: a whole"),
        (sel, None, np.array([1.0, 2.0, 1.5]), "client 11's local steps are 1.5; allowed"),
        (np.array([3, 3, 11]), None, np.array([1, 2, 3]), "selected client 3 more than once"),
    )  # fmt: skip
    for ids, freq_hz, steps, message in cases:
        with pytest.raises(FedjouleError, match=message):
            check_decision(Decision(ids, None, freq_hz, steps), "p", ids, ranges)


def test_a_rounds_fading_is_drawn_once_for_the_engine_and_the_observer():
    channel = load_scenario("default-theory").channel
    gen = rng.stream(7, "fading", 3)
    up, down = fading_power(gen, "rayleigh", 50), fading_power(gen, "rayleigh", 50)
    first = uplink_fading(channel, 50, 7, 3)  # the observer's, before the engine's
    np.testing.assert_array_equal(first, up)
    both = round_fading(channel, 50, 7, 3)
    assert both[0] is first
    np.testing.assert_array_equal(both[1], down)
    assert round_fading(channel, 50, 7, 3)[1] is both[1]
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1.0
    other = {}  # another thread's round does not replace this thread's
    thread = threading.Thread(target=lambda: other.update(up=uplink_fading(channel, 50, 7, 4)))
    thread.start()
    thread.join()
    assert uplink_fading(channel, 50, 7, 3) is first
    np.testing.assert_array_equal(other["up"], fading_power(rng.stream(7, "fading", 4),
                                                            "rayleigh", 50))  # fmt: skip
    again = round_fading(channel, 40, 7, 3)  # another population: drawn again
    np.testing.assert_array_equal(again[0], up[:40])


@pytest.mark.parametrize("kept", [{}, {0: ([3, 5], [0.5, 0.25]), 2: ([1], [2.0]),
                                      3: ([4, 6, 7], [1.0, np.nan, 3.0])}])  # fmt: skip
def test_the_losses_kept_by_dispatch_come_back_from_a_checkpoint(kept):
    """Async and buffered keep each dispatch's sent losses for the replay: the checkpoint's
    rows (as saved, tensors) give back the same dict, also before any dispatch trained
    (where the split by dispatch raised a ValueError on an empty checkpoint)."""
    import torch

    world = build_system_world(load_scenario("default-theory", ["population.size=20",
                                                                "policy.select=oort"]))  # fmt: skip
    step, back = PolicyStep(world), PolicyStep(world)
    step.keep_sent_losses(), back.keep_sent_losses()
    for r, (clients, loss) in kept.items():
        step.trained(np.array(clients), torch.tensor(loss, dtype=torch.float64), r)
    back.load_state_dict(plain(step.state_dict()))
    assert list(back.sent_by_dispatch) == list(kept)
    for r, (clients, loss) in kept.items():
        np.testing.assert_array_equal(back.sent_by_dispatch[r][0], clients)
        np.testing.assert_array_equal(back.sent_by_dispatch[r][1], loss)
        back.resend(r)
        np.testing.assert_array_equal(back.observer.sent_loss[clients], loss)
