"""Tests for the availability models: always on, Bernoulli dropout, Markov on/off."""

import math

import numpy as np
import pytest

from fedjoule.devices.availability import AlwaysOn, BernoulliDropout, MarkovOnOff
from fedjoule.errors import FedjouleError


def test_always_on():
    model = AlwaysOn(5)
    assert model.online(3, 12.0, 0)
    assert model.next_offline_s(3, 12.0, 0) == math.inf
    np.testing.assert_array_equal(model.online_mask(0.0, 0), np.ones(5, dtype=bool))


def test_bernoulli_frequency_and_determinism():
    n_clients, rounds, p_drop = 500, 200, 0.1
    model = BernoulliDropout(p_drop, seed=3, n_clients=n_clients)
    masks = np.array([model.online_mask(0.0, r) for r in range(rounds)])
    n = masks.size
    assert abs(np.mean(~masks) - p_drop) < 4 * np.sqrt(p_drop * (1 - p_drop) / n)
    again = BernoulliDropout(p_drop, seed=3, n_clients=n_clients)
    np.testing.assert_array_equal(again.online_mask(5.0, 7), masks[7])
    assert not np.array_equal(masks[0], masks[1])
    other_seed = BernoulliDropout(p_drop, seed=4, n_clients=n_clients)
    assert not np.array_equal(other_seed.online_mask(0.0, 7), masks[7])


def test_bernoulli_single_queries_match_the_mask_in_any_order():
    model = BernoulliDropout(0.3, seed=9, n_clients=50)
    reference = BernoulliDropout(0.3, seed=9, n_clients=50)
    for r in (4, 1, 4, 0):
        for k in (49, 0, 17):
            online = model.online(k, 0.0, r)
            assert online == reference.online_mask(0.0, r)[k]
            assert model.next_offline_s(k, 2.0, r) == (math.inf if online else 2.0)


def test_markov_stationary_fraction_across_clients():
    n_clients, mean_on_s, mean_off_s = 4000, 1800.0, 600.0
    model = MarkovOnOff(mean_on_s, mean_off_s, seed=1, n_clients=n_clients)
    p = mean_on_s / (mean_on_s + mean_off_s)
    se = np.sqrt(p * (1 - p) / n_clients)
    for time_s in (0.0, 12_345.0):
        assert abs(model.online_mask(time_s, 0).mean() - p) < 4 * se


def test_markov_long_run_fraction_of_one_client():
    mean_on_s, mean_off_s = 30.0, 10.0
    model = MarkovOnOff(mean_on_s, mean_off_s, seed=2, n_clients=1)
    p = mean_on_s / (mean_on_s + mean_off_s)
    horizon_s = 4000 * (mean_on_s + mean_off_s)
    times = np.linspace(0.0, horizon_s, 40_000)
    fraction = np.mean([model.online(0, t, 0) for t in times])
    # variance of a time average of an on/off process: 2 p (1-p) tau / T
    tau_s = mean_on_s * mean_off_s / (mean_on_s + mean_off_s)
    sd = np.sqrt(2 * p * (1 - p) * tau_s / horizon_s)
    assert abs(fraction - p) < 4 * sd


def test_markov_query_order_does_not_matter():
    times = np.random.default_rng(0).uniform(0.0, 50_000.0, 300)
    clients = np.random.default_rng(1).integers(0, 20, 300)
    forward = MarkovOnOff(100.0, 50.0, seed=7, n_clients=20)
    answers = [forward.online(k, t, 0) for k, t in zip(clients, times, strict=True)]
    backward = MarkovOnOff(100.0, 50.0, seed=7, n_clients=20)
    reversed_answers = [
        backward.online(k, t, 0) for k, t in zip(clients[::-1], times[::-1], strict=True)
    ]
    assert answers == reversed_answers[::-1]
    fresh = MarkovOnOff(100.0, 50.0, seed=7, n_clients=20)
    np.testing.assert_array_equal(fresh.online_mask(30_000.0, 3), forward.online_mask(30_000.0, 9))


def test_markov_next_offline_is_a_flip():
    model = MarkovOnOff(100.0, 50.0, seed=5, n_clients=10)
    checked = 0
    for k in range(10):
        for time_s in (0.0, 333.3, 5_000.0):
            t_off = model.next_offline_s(k, time_s, 0)
            if not model.online(k, time_s, 0):
                assert t_off == time_s
                continue
            checked += 1
            assert t_off > time_s
            assert model.online(k, (time_s + t_off) / 2, 0)
            assert model.online(k, np.nextafter(t_off, -np.inf), 0)
            assert not model.online(k, t_off, 0)
    assert checked > 5


def test_bad_parameters_are_user_errors():
    with pytest.raises(FedjouleError):
        BernoulliDropout(1.5, seed=0, n_clients=3)
    with pytest.raises(FedjouleError):
        MarkovOnOff(0.0, 10.0, seed=0, n_clients=3)
