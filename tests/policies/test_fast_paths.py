"""The selectors' and check_decision's fast paths (benchmarks/policies.py) give what the
plain definitions give: top's partial sort, round robin's rotation, the sorted look-up; the
bandwidth solvers' Newton estimates are within ulps of their bisections, which end on the
boundary of their tests; equal-finish's joint Newton gives its bracketed search's shares."""

import numpy as np
import pytest

from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import (
    Uplink,
    bracketed_equal_finish,
    equal_finish_shares,
    equal_shares,
    joint_newton,
    share_estimate,
    share_for_time,
)
from fedjoule.policies.min_energy import (
    marginal_saving,
    share_estimate_at_price,
    shares_at_price,
)
from fedjoule.policies.observation import Decision, check_decision
from fedjoule.policies.select import select_round_robin, top
from tests.policies.helpers import observation


def test_top_equals_the_full_sort_with_ties_and_nan():
    gen = np.random.default_rng(3)
    ids = np.sort(gen.choice(1000, 400, replace=False))
    obs = observation(400, client_id=ids)
    for score in (gen.integers(0, 5, 400).astype(float), gen.random(400),
                  np.where(gen.random(400) < 0.9, np.nan, gen.random(400)),
                  np.where(gen.random(400) < 0.5, 0.0, -0.0)):  # fmt: skip
        for m in (0, 1, 7, 40, 399, 400, 500):
            full = np.sort(ids[np.lexsort((ids, -score))[:m]])
            np.testing.assert_array_equal(top(obs, score, m), full)


def test_round_robin_rotation_equals_the_ring_walk():
    gen = np.random.default_rng(4)
    for ids in (np.sort(gen.choice(100, 60, replace=False)), np.array([5, 2, 9, 40]),
                np.arange(100)):  # fmt: skip
        for r in range(12):
            obs = observation(len(ids), round_index=r, n_clients=100, client_id=ids)
            start = (r * 7) % 100
            walk = ids[np.argsort((ids - start) % 100, kind="stable")[:7]]
            np.testing.assert_array_equal(select_round_robin(obs, 7, None), np.sort(walk))


def test_unknown_or_repeated_clients_first_in_the_decisions_order():
    candidates = np.array([9, 3, 5, 8])
    cases = (([3, 5, 4, 5], "client 4, which is not among the round's 4"),
             ([8, 9, 8, 4], "client 8 more than once"),
             ([3.0, np.nan], "client nan, which is not among"),
             (np.array([3, None], dtype=object), "client None, which is not"))  # fmt: skip
    for chosen, message in cases:
        with pytest.raises(FedjouleError, match=message):
            check_decision(Decision(np.asarray(chosen)), "p", candidates)
    ranges = (np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.5, 2.5, 3.5, 4.5]))
    ok = Decision(np.array([5, 9]), cpu_freq_hz=np.array([3.2, 1.2]))
    check_decision(ok, "p", candidates, ranges)
    with pytest.raises(FedjouleError, match="client 8's CPU frequency 3.2 Hz"):
        check_decision(Decision(np.array([8]), cpu_freq_hz=np.array([3.2])), "p", candidates,
                       ranges)  # fmt: skip


def uplinks():
    """Uplinks of 60 clients at -20 to 50 dB on the whole band, and at a fixed SNR."""
    gen = np.random.default_rng(5)
    noise_w_per_hz, band_hz = 2e-20, 1e6
    rx_w = 10 ** (gen.uniform(-20, 50, 60) / 10) * noise_w_per_hz * band_hz
    bits, power_w = gen.uniform(1e4, 1e7, 60), gen.uniform(0.01, 0.2, 60)
    return (
        Uplink(bits, power_w, band_hz, rx_power_w=rx_w, noise_psd_w_per_hz=noise_w_per_hz),
        Uplink(bits, power_w, band_hz, snr=10 ** (gen.uniform(-20, 50, 60) / 10)),
    )


@pytest.mark.parametrize("uplink", uplinks(), ids=["snr-over-share", "fixed-snr"])
def test_share_for_time_is_the_tests_boundary_and_the_estimate_within_ulps(uplink):
    for time_s in np.geomspace(1e-3, 1e3, 13):
        shares = share_for_time(uplink, time_s)
        ok = np.isfinite(shares)
        shares_ok = np.where(ok, shares, 1.0)
        assert np.all(uplink.upload_time_s(shares_ok)[ok] <= time_s)
        assert not np.any(uplink.upload_time_s(np.nextafter(shares_ok, 0))[ok] <= time_s)
        assert np.all(uplink.upload_time_s(np.ones(60))[~ok] > time_s)
        estimate = share_estimate(uplink, time_s)[ok]
        np.testing.assert_allclose(estimate, shares[ok], rtol=1e-12)


@pytest.mark.parametrize("uplink", uplinks(), ids=["snr-over-share", "fixed-snr"])
def test_shares_at_price_is_the_tests_boundary_and_the_estimate_within_ulps(uplink):
    least = np.full(60, 1e-4)
    cheapest = marginal_saving(uplink, np.ones(60)).min()
    for price in np.geomspace(cheapest / 10, marginal_saving(uplink, least).max() * 10, 13):
        shares = shares_at_price(uplink, least, price)
        worth = marginal_saving(uplink, shares) > price
        assert np.all((shares == least) | worth)
        above = np.nextafter(shares, np.inf)
        assert not np.any((above < 1) & (marginal_saving(uplink, above) > price))
        estimate = share_estimate_at_price(uplink, least, price)
        np.testing.assert_allclose(estimate, shares, rtol=1e-12)


def spread_uplinks():
    """uplinks()' first, and 2, 100 and 1000 clients at -15 to 65 dB on the whole band."""
    gen, noise_w_per_hz = np.random.default_rng(6), 4e-21
    spread = [uplinks()[0]]
    for m in (2, 100, 1000):
        rx_w = 10 ** (gen.uniform(-15, 65, m) / 10) * noise_w_per_hz * 1e6
        spread.append(Uplink(np.full(m, 6e3), np.full(m, 0.2), 1e6, rx_power_w=rx_w,
                             noise_psd_w_per_hz=noise_w_per_hz))  # fmt: skip
    return spread


@pytest.mark.parametrize("uplink", spread_uplinks(), ids=["60", "2", "100", "1000"])
def test_equal_finish_newton_gives_the_bracketed_search_shares(uplink):
    assert joint_newton(uplink) is not None  # the fast path, not its fallback
    shares, searched = equal_finish_shares(uplink), bracketed_equal_finish(uplink)
    assert shares.sum() <= 1.0 and shares.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(shares, searched, rtol=1e-10)
    times = uplink.upload_time_s(shares)
    np.testing.assert_allclose(times, uplink.upload_time_s(searched), rtol=1e-12)
    assert times.max() / times.min() - 1 <= 1e-12


@pytest.mark.parametrize("m", [2, 7, 100])
def test_equal_finish_of_identical_clients_is_equal_on_both_paths(m):
    uplink = Uplink(np.full(m, 1e6), np.full(m, 0.1), 1e6, rx_power_w=np.full(m, 1e-12))
    equal = equal_shares(uplink)
    assert equal_finish_shares(uplink).tolist() == equal.tolist()
    np.testing.assert_allclose(bracketed_equal_finish(uplink), equal, rtol=1e-15)
