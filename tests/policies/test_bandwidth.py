"""The bandwidth allocators on the channel's rate model: equal-finish ends every upload at
the same instant and never after equal's longest; min-energy spends no more than equal
under the same deadline, matches the square-root closed form at a fixed SNR and a brute-force
grid search where the SNR falls with the share, and refuses an infeasible deadline."""

import numpy as np
import pytest

from fedjoule.channel.link import NOISE_PSD_W_PER_HZ, Link
from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import Uplink, equal_finish_shares, equal_shares, share_for_time
from fedjoule.policies.min_energy import InfeasibleAllocation, marginal_saving, min_energy_shares

W_HZ = 1e6
BITS = np.array([1e6, 2e6, 5e5])
POWER_W = np.array([0.2, 0.1, 0.3])
# received powers p x gain: SNR 50, 25, 100 on the whole band (N0 = -167 dBm/Hz)
RX_W = np.array([1e-12, 5e-13, 2e-12])
GEOMETRY = Uplink(BITS, POWER_W, W_HZ, rx_power_w=RX_W)
FIXED = Uplink(BITS, POWER_W, W_HZ, snr=np.array([7.0, 1.0, 31.0]))


def test_the_rate_is_the_channels_link_rate():
    for k in range(3):
        link = Link(POWER_W[k], gain=RX_W[k] / POWER_W[k], noise_psd_w_per_hz=NOISE_PSD_W_PER_HZ)
        shares = np.array([0.2, 0.3, 0.5])
        assert GEOMETRY.rate_bps(shares)[k] == pytest.approx(
            link.rate_bps(shares[k] * W_HZ), rel=1e-14
        )
    # fixed SNR 7, 1, 31: 3, 1, 5 bit/s/Hz on its share
    assert FIXED.rate_bps(np.full(3, 0.5)).tolist() == [1.5e6, 0.5e6, 2.5e6]


@pytest.mark.parametrize("uplink", [GEOMETRY, FIXED], ids=["snr-over-share", "fixed-snr"])
def test_equal_finish_ends_every_upload_together_and_never_after_equal(uplink):
    shares = equal_finish_shares(uplink)
    times = uplink.upload_time_s(shares)
    assert shares.sum() <= 1.0 and shares.sum() == pytest.approx(1.0, abs=1e-12)
    assert times.max() - times.min() <= 1e-12
    assert times.max() <= uplink.upload_time_s(equal_shares(uplink)).max()


def test_equal_finish_at_a_fixed_snr_is_the_closed_form():
    # t_k = bits_k / (s_k W log2(1 + snr_k)) equal: s proportional to bits / log2(1 + snr)
    need = BITS / np.array([3.0, 1.0, 5.0])  # 333333.3, 2e6, 1e5
    assert equal_finish_shares(FIXED) == pytest.approx(need / need.sum(), rel=1e-15)
    # every upload then takes sum(need) / W = 2.4333 s; equal's longest is 2e6 / (1e6/3) = 6 s
    assert FIXED.upload_time_s(equal_finish_shares(FIXED)) == pytest.approx(
        np.full(3, need.sum() / W_HZ), rel=1e-14
    )


def test_min_energy_at_a_fixed_snr_is_the_square_root_rule():
    # E = sum a_k / s_k, a_k = p_k bits_k / (W log2(1 + snr_k)): with no deadline binding
    # the KKT point is s_k = sqrt(a_k) / sum sqrt(a)
    a = POWER_W * BITS / (W_HZ * np.array([3.0, 1.0, 5.0]))
    shares = min_energy_shares(FIXED, deadline_s=100.0)
    assert shares == pytest.approx(np.sqrt(a) / np.sqrt(a).sum(), rel=1e-6)


def brute_force(uplink: Uplink, deadline_s: float, step: float):
    """The best split on a grid of the band: s1, s2 multiples of `step`, s3 = 1 - s1 - s2
    (the energy falls with every share, so the best split uses the whole band)."""
    s1, s2 = np.meshgrid(np.arange(1, 1 / step) * step, np.arange(1, 1 / step) * step)
    grid = np.stack([s1.ravel(), s2.ravel(), 1.0 - s1.ravel() - s2.ravel()], axis=1)
    grid = grid[grid[:, 2] > 0]
    times = np.stack([uplink_k.upload_time_s(grid[:, k]) for k, uplink_k in
                      enumerate(one_by_one(uplink))], axis=1)  # fmt: skip
    grid = grid[np.all(times <= deadline_s, axis=1)]
    energy = sum(one.tx_energy_j(grid[:, k]) for k, one in enumerate(one_by_one(uplink)))
    return grid[np.argmin(energy)], float(energy.min())


def one_by_one(uplink: Uplink) -> list[Uplink]:
    return [
        Uplink(uplink.bits[k], uplink.tx_power_w[k], uplink.bandwidth_hz,
               rx_power_w=uplink.rx_power_w[k])
        for k in range(uplink.n)
    ]  # fmt: skip


@pytest.mark.parametrize("deadline_s", [0.8, 3.0])  # 0.8 s binds client 1's share
def test_min_energy_matches_a_brute_force_grid_and_beats_equal(deadline_s):
    step = 1e-3
    shares = min_energy_shares(GEOMETRY, deadline_s)
    energy_j = GEOMETRY.tx_energy_j(shares).sum()
    assert shares.sum() <= 1.0
    assert np.all(GEOMETRY.upload_time_s(shares) <= deadline_s)
    best, best_j = brute_force(GEOMETRY, deadline_s, step)
    assert energy_j <= best_j  # no grid point does better
    assert best_j - energy_j <= 1e-4 * best_j  # and the grid's best is within its step
    assert np.abs(shares - best).max() <= 2 * step
    equal = equal_shares(GEOMETRY)
    if np.all(GEOMETRY.upload_time_s(equal) <= deadline_s):
        assert energy_j <= GEOMETRY.tx_energy_j(equal).sum()
    else:  # equal misses the deadline (client 1 needs 0.96 s on a third of the band)
        assert deadline_s == 0.8


def test_min_energy_refuses_an_impossible_deadline():
    with pytest.raises(InfeasibleAllocation) as caught:
        min_energy_shares(GEOMETRY, deadline_s=0.3)
    assert str(caught.value) == (
        "min-energy: selected client 1 cannot upload 2e+06 bits within 0.3 s even on the whole band"
    )
    assert isinstance(caught.value, FedjouleError)
    with pytest.raises(InfeasibleAllocation, match=r"sum to 1\.\d+, more than the whole band"):
        min_energy_shares(GEOMETRY, deadline_s=0.45)


def test_min_energy_meets_its_kkt_conditions_on_fifty_clients():
    gen = np.random.default_rng(7)
    uplink = Uplink(
        gen.uniform(1e5, 1e6, 50), gen.uniform(0.05, 0.3, 50), 20e6,
        rx_power_w=10 ** gen.uniform(-13, -10, 50),
    )  # fmt: skip
    # a fifth over the least feasible deadline (equal-finish's): some bind, some do not
    deadline_s = 1.2 * float(uplink.upload_time_s(equal_finish_shares(uplink)).max())
    shares = min_energy_shares(uplink, deadline_s)
    least = share_for_time(uplink, deadline_s)
    assert np.all(shares >= least) and 1 - 1e-12 <= shares.sum() <= 1.0
    saving = marginal_saving(uplink, shares)
    free = shares > least * (1 + 1e-9)
    price = np.median(saving[free])
    assert 0 < free.sum() < 50  # some deadlines bind, some do not
    assert saving[free] == pytest.approx(np.full(free.sum(), price), rel=1e-6)
    assert np.all(saving[~free] <= price * (1 + 1e-6))  # at its least, it saves less
    assert uplink.tx_energy_j(shares).sum() <= uplink.tx_energy_j(equal_finish_shares(uplink)).sum()
