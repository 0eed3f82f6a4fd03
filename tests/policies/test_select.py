"""The selectors on hand-worked cases: random is today's draw bit for bit, round robin
visits everyone once in N/m rounds, and the channel, age, Oort, power-of-choice and
battery rules pick what their formulas say."""

import math

import numpy as np
import pytest

from fedjoule import rng
from fedjoule.policies.select import (
    oort_exploration,
    oort_utility,
    select_age,
    select_battery,
    select_best_channel,
    select_oort,
    select_power_of_choice,
    select_proportional_fair,
    select_random,
    select_round_robin,
)
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.round_rules import select_clients, selection_size
from tests.policies.helpers import observation


@pytest.mark.parametrize("overrides", [[], ["round.overcommit=1.3"]])
def test_random_is_round_rules_draw_bit_for_bit(overrides):
    s = load_scenario("default-theory", overrides)
    candidates = np.array([0, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47])
    weights = np.arange(100, dtype=float) % 7  # 0 excludes, as DRFA's lambda or TACO
    for seed in range(5):
        s = s.model_copy(update={"seed": seed})
        for r in (0, 1, 9):
            obs = observation(len(candidates), r, 100, client_id=candidates)
            m = selection_size(s.training.clients_per_round, s.round.overcommit, 16)
            ours = select_random(obs, m, rng.stream(seed, "selection", r))
            assert np.array_equal(ours, select_clients(candidates, s, r))
            kept = int(np.count_nonzero(weights[candidates]))
            m = selection_size(s.training.clients_per_round, s.round.overcommit, kept)
            ours = select_random(obs, m, rng.stream(seed, "selection", r, 4), weights[candidates])
            assert np.array_equal(ours, select_clients(candidates, s, r, weights, key=(4,)))


def test_round_robin_selects_every_client_once_in_n_over_m_rounds():
    n, m = 12, 3
    for first in (0, 4, 7):
        seen = np.concatenate([
            select_round_robin(observation(n, r), m, None) for r in range(first, first + n // m)
        ])  # fmt: skip
        assert np.array_equal(np.sort(seen), np.arange(n))
    assert select_round_robin(observation(n, 1), m, None).tolist() == [3, 4, 5]
    offline = observation(7, 1, n, client_id=np.array([0, 1, 2, 4, 6, 7, 8]))  # 3 and 5 off
    assert select_round_robin(offline, m, None).tolist() == [4, 6, 7]  # the next met


def test_best_channel_picks_the_m_highest_snr():
    sinr_db = np.array([3.0, 12.0, -4.0, 12.0, 7.5, 20.0])
    obs = observation(6, sinr_db=sinr_db)
    assert select_best_channel(obs, 3, None).tolist() == [1, 3, 5]
    assert select_best_channel(obs, 2, None).tolist() == [1, 5]  # a tie: the lower id


def test_proportional_fair_picks_the_highest_instantaneous_over_average_rate():
    # log2(1 + SINR) / log2(1 + mean SINR), SINR in dB: client 0: log2(11)/log2(101) = 0.520,
    # 1: log2(2)/log2(1 + 10^-0.5) = 2.523, 2: 1, 3: log2(1 + 10^0.3)/log2(2) = 1.583
    obs = observation(
        4, sinr_db=np.array([10.0, 0.0, 20.0, 3.0]), mean_sinr_db=np.array([20.0, -5.0, 20.0, 0.0])
    )
    assert select_proportional_fair(obs, 2, None).tolist() == [1, 3]
    assert select_proportional_fair(obs, 3, None).tolist() == [1, 2, 3]


def test_age_picks_the_oldest_updates_and_weighs_them_by_the_channel():
    ages = np.array([3, 1, 5, 2])
    assert select_age(observation(4, 6, age_rounds=ages), 2, None).tolist() == [0, 2]
    # priorities 3 x 1, 1 x log2(1001) = 9.97, 5 x 1, 2 x log2(1 + 10) = 6.92
    obs = observation(4, 6, age_rounds=ages, sinr_db=np.array([0.0, 30.0, 0.0, 10.0]))
    assert select_age(obs, 2, None).tolist() == [1, 3]


def test_age_with_csi_last_counts_an_unknown_sinr_at_its_mean():
    """csi last: a client never heard from has no measured SINR (nan). It counts at its
    mean SINR, so with every mean equal the ranking is csi none's, ages only (the oldest,
    never heard, first); a known SINR weighs its age as before."""
    ages, nan = np.array([3, 1, 7, 7, 2]), np.nan
    by_age = select_age(observation(5, 6, age_rounds=ages), 2, None).tolist()
    assert by_age == [2, 3]
    unknown = observation(5, 6, age_rounds=ages, sinr_db=np.full(5, nan),
                          mean_sinr_db=np.full(5, 10.0))  # fmt: skip
    assert select_age(unknown, 2, None).tolist() == by_age
    # priorities 3 log2(11) = 10.38, 1 x 9.97, 7 log2(2) = 7 (mean 0 dB), 7 log2(11) = 24.2,
    # 2 log2(1 + 10^0.3) = 3.17
    obs = observation(5, 6, age_rounds=ages, sinr_db=np.array([10.0, 30.0, nan, nan, 3.0]),
                      mean_sinr_db=np.array([10.0, 30.0, 0.0, 10.0, 3.0]))  # fmt: skip
    assert select_age(obs, 2, None).tolist() == [0, 3]
    assert select_age(obs, 3, None).tolist() == [0, 1, 3]


def test_best_channel_and_proportional_fair_count_an_unknown_sinr_at_its_mean():
    """csi last: a client never heard from (nan) ranks at its mean SINR, not last (else it
    would never be chosen, nor measured)."""
    nan = np.nan
    obs = observation(3, 6, sinr_db=np.array([nan, 10.0, 0.0]),
                      mean_sinr_db=np.array([20.0, 5.0, 5.0]))  # fmt: skip
    assert select_best_channel(obs, 2, None).tolist() == [0, 1]  # 20 (its mean), 10; not 0 dB
    # log2(1 + SINR) / log2(1 + mean): 1 (unknown), log2(11) / log2(1 + 10^0.5) = 1.68,
    # log2(2) / 2.06 = 0.49 (ranked last, the unknown one would have made it [1, 2])
    assert select_proportional_fair(obs, 2, None).tolist() == [0, 1]
    assert select_proportional_fair(obs, 1, None).tolist() == [1]


def test_oort_utility_and_exploration_by_hand():
    assert oort_exploration(0) == 0.9
    assert oort_exploration(10) == pytest.approx(0.9 * 0.98**10)
    assert oort_exploration(100) == 0.2  # 0.9 x 0.98^100 = 0.12, below the floor
    obs = observation(
        3, 100, n_samples=np.array([100, 100, 40]), loss=np.array([0.5, 0.5, np.nan]),
        participations=np.array([2, 1, 0]), age_rounds=np.array([10, 10, 101]),
        round_time_s=np.array([8.0, 20.0, np.nan]),
    )  # fmt: skip
    # |B| loss + sqrt(0.1 ln R / L), R = 101, L = 101 - 10 = 91; (T/t)^2 = 1/4 for t = 20 > T
    fresh = 50 + math.sqrt(0.1 * math.log(101) / 91)
    utility = oort_utility(obs, preferred_round_time_s=10.0)
    assert utility[:2] == pytest.approx([fresh, fresh / 4], rel=1e-15)
    assert np.isnan(utility[2])  # never explored


def test_oort_utility_takes_the_root_mean_square_of_the_per_sample_losses():
    """|B_k| x loss_rms (Lai et al., OSDI 2021), + the same exploration term and penalty;
    the mean loss only where the root mean square is not known."""
    obs = observation(
        4, 100, n_samples=np.array([100, 100, 40, 30]), loss=np.array([0.5, 0.5, 0.4, np.nan]),
        loss_rms=np.array([0.75, 0.75, np.nan, np.nan]), participations=np.array([2, 1, 1, 0]),
        age_rounds=np.array([10, 10, 10, 101]), round_time_s=np.array([8.0, 20.0, 5.0, np.nan]),
    )  # fmt: skip
    bonus = math.sqrt(0.1 * math.log(101) / 91)
    utility = oort_utility(obs, preferred_round_time_s=10.0)
    assert utility[:3] == pytest.approx([75 + bonus, (75 + bonus) / 4, 16 + bonus], rel=1e-15)
    assert np.isnan(utility[3])  # never explored
    without = observation(2, 100, n_samples=np.array([100, 40]), loss=np.array([0.5, 0.4]),
                          participations=np.ones(2, dtype=int),
                          age_rounds=np.full(2, 10))  # fmt: skip
    assert without.loss_rms is None  # an Observation made without it: the mean loss
    assert oort_utility(without, 10.0) == pytest.approx([50 + bonus, 16 + bonus], rel=1e-15)


def test_oort_exploits_the_high_utilities_and_explores_the_rest():
    # round 100: eps = 0.2, so m = 5 exploits 4 and explores 1. Explored clients 0..5 with
    # utilities 100 |B|-scaled losses; the 4th highest is 60, the cut-off 0.9 x 60 = 54
    # admits exactly 0, 1, 2, 3; one of the unexplored 6, 7, 8 is explored.
    loss = np.array([1.0, 0.9, 0.8, 0.6, 0.3, 0.2, np.nan, np.nan, np.nan])
    obs = observation(
        9, 100, loss=loss, participations=np.array([1] * 6 + [0] * 3),
        age_rounds=np.array([1] * 6 + [101] * 3), round_time_s=np.full(9, 1.0),
    )  # fmt: skip
    explored = set()
    for seed in range(20):
        chosen = select_oort(obs, 5, np.random.default_rng(seed), preferred_round_time_s=2.0)
        assert set(chosen[:4]) == {0, 1, 2, 3} and chosen[4] in (6, 7, 8)
        explored.add(int(chosen[4]))
    assert explored == {6, 7, 8}
    # nothing left to explore: the next highest utility fills the place
    some = observation(6, 100, loss=loss[:6], participations=np.ones(6, dtype=int),
                       age_rounds=np.ones(6, dtype=int))  # fmt: skip
    assert select_oort(some, 5, np.random.default_rng(0), 2.0).tolist() == [0, 1, 2, 3, 4]


def test_power_of_choice_takes_the_highest_loss_among_d_sampled():
    loss = np.array([0.1, 0.9, np.nan, 0.5, 0.7])
    obs = observation(5, loss=loss, n_samples=np.array([10, 20, 30, 40, 100]))
    # d = all: the never-reported loss (nan) counts as highest, then 0.9
    assert select_power_of_choice(obs, 2, np.random.default_rng(0), d=5).tolist() == [1, 2]
    for seed in range(5):
        sampled = np.random.default_rng(seed).choice(5, 3, replace=False, p=obs.n_samples / 200)
        best = sampled[np.argsort(-np.nan_to_num(loss[sampled], nan=np.inf))[:2]]
        chosen = select_power_of_choice(obs, 2, np.random.default_rng(seed), d=3)
        assert chosen.tolist() == sorted(best.tolist())


def test_battery_prefers_the_most_charge():
    level = np.array([0.2, 0.0, 0.95, 0.5, 0.95])
    obs = observation(5, battery_fraction=level)
    assert select_battery(obs, 3, None).tolist() == [2, 3, 4]
    for seed in range(10):  # weighted: in proportion to the charge, never an empty one
        gen = np.random.default_rng(seed)
        chosen = select_battery(obs, 4, gen, weighted=True)
        assert chosen.tolist() == [0, 2, 3, 4]
        again = np.random.default_rng(seed).choice(
            [0, 2, 3, 4], 2, replace=False, p=np.array([0.2, 0.95, 0.5, 0.95]) / 2.6
        )
        assert set(select_battery(obs, 2, np.random.default_rng(seed), True)) == set(again)
