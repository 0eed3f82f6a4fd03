"""min-energy on the weighted sharing the engines play: the airtime predictor equals the
sharing engine (channel/sharing.fdma_uplink) for clients starting together, the allocator's
energy is within a small tolerance of a brute-force grid over the 3-client simplex, and it
never spends more than equal weights where those meet the deadline."""

import numpy as np
import pytest

from fedjoule.channel.link import NOISE_PSD_W_PER_HZ
from fedjoule.channel.sharing import UplinkClients, fdma_uplink
from fedjoule.policies.bandwidth import Uplink, equal_shares
from fedjoule.policies.min_energy import InfeasibleAllocation, min_energy_weights
from fedjoule.policies.shared_upload import shared_upload_time_s

W_HZ = 1e6
# the hand case of docs/policies.md: SNR 37, 27, 17, 12 dB on the whole 1 MHz band, 6 kbit
RX_W = 10 ** (np.array([37.0, 27.0, 17.0, 12.0]) / 10) * NOISE_PSD_W_PER_HZ * W_HZ
FOUR = Uplink(np.full(4, 6e3), np.full(4, 0.2), W_HZ, rx_power_w=RX_W)
# three clients, SNR 50, 25, 100 on the whole band, unequal powers (test_bandwidth.py's)
THREE = Uplink(np.full(3, 1e6), np.array([0.2, 0.1, 0.3]), W_HZ,
               rx_power_w=np.array([1e-12, 5e-13, 2e-12]))  # fmt: skip


def engine_times_s(uplink: Uplink, weights) -> np.ndarray:
    n = uplink.n
    fixed = None if uplink.snr is None else uplink.snr[:, None]
    gain = None if uplink.rx_power_w is None else uplink.rx_power_w[:, None]
    clients = UplinkClients(
        join_s=np.zeros(n), n_attempts=np.ones(n, dtype=int), succeeds=np.ones(n, dtype=bool),
        tx_power_w=uplink.tx_power_w, budget_j=np.full(n, np.inf), kill_s=np.full(n, np.inf),
        kill_cause=np.full(n, "deadline", dtype=object), snr_fixed=fixed,
        power_gain_w=gain, noise_psd_w_per_hz=NOISE_PSD_W_PER_HZ,
    )  # fmt: skip
    result = fdma_uplink(clients, float(uplink.bits[0]), W_HZ, weights)
    assert list(result.outcome) == ["uploaded"] * n
    return result.end_s


FIXED_SNR = Uplink(np.full(4, 6e3), np.full(4, 0.2), W_HZ, snr=np.array([7.0, 1.0, 31.0, 3.0]))


@pytest.mark.parametrize("uplink", [FOUR, FIXED_SNR], ids=["snr-over-share", "fixed-snr"])
@pytest.mark.parametrize("weights", [None, [0.4, 0.3, 0.2, 0.1], [0.05, 0.15, 0.5, 0.3]])
def test_the_predictor_is_the_sharing_engine_for_four_clients(uplink, weights):
    played_s = engine_times_s(uplink, None if weights is None else np.array(weights))
    given = equal_shares(uplink) if weights is None else np.array(weights)
    assert shared_upload_time_s(uplink, given) == pytest.approx(played_s, rel=1e-9, abs=0)


@pytest.mark.parametrize("steep", [0.5, 80.0])
def test_the_engine_keeps_tiny_weights_beside_large_ones(steep):
    """Sixty clients, weights e^(-steep k) (down to min-energy's 1e-30 beside 1, its
    theta^rank in turn): the engine keeps the weight still sending as clients join and
    leave, and sums it anew where most of it has left (1 - 1 would leave the round-off of
    the 1, not the 1e-30s), so its times are still the predictor's."""
    gen = np.random.default_rng(11)
    rx_w = 10 ** (gen.uniform(-1.5, 6.5, 60)) * NOISE_PSD_W_PER_HZ * W_HZ
    up = Uplink(np.full(60, 6e3), np.full(60, 0.2), W_HZ, rx_power_w=rx_w)
    weights = np.maximum(np.exp(-steep * gen.permutation(60)), 1e-30)
    weights /= weights.sum()
    played_s = engine_times_s(up, weights)
    assert shared_upload_time_s(up, weights) == pytest.approx(played_s, rel=1e-9, abs=0)


def test_the_hand_case_spends_less_than_equal_sharing():
    equal_j = float(np.sum(0.2 * shared_upload_time_s(FOUR, equal_shares(FOUR))))
    weights = min_energy_weights(FOUR, 1.0)
    energy_j = float(np.sum(0.2 * engine_times_s(FOUR, weights)))
    assert equal_j == pytest.approx(1.867534e-3, rel=1e-6)
    assert energy_j == pytest.approx(1.488326e-3, rel=1e-5)  # 20 % below equal


def brute_force_j(uplink: Uplink, deadline_s: float, steps: int) -> float:
    """The least energy over the weights (i, j, steps - i - j) / steps, all positive, that
    meet the deadline."""
    best_j = np.inf
    for i in range(1, steps - 1):
        for j in range(1, steps - i):
            weights = np.array([i, j, steps - i - j]) / steps
            time_s = shared_upload_time_s(uplink, weights)
            if np.all(time_s <= deadline_s):
                best_j = min(best_j, float(np.sum(uplink.tx_power_w * time_s)))
    return best_j


@pytest.mark.parametrize("deadline_s", [0.5, 3.0])  # 0.5 s binds; equal: 0.43 s
def test_the_allocator_matches_a_brute_force_grid_and_beats_equal(deadline_s):
    weights = min_energy_weights(THREE, deadline_s)
    time_s = shared_upload_time_s(THREE, weights)
    energy_j = float(np.sum(THREE.tx_power_w * time_s))
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(time_s <= deadline_s)
    best_j = brute_force_j(THREE, deadline_s, steps=120)
    assert energy_j <= best_j * (1 + 1e-3)
    equal_j = float(np.sum(THREE.tx_power_w * shared_upload_time_s(THREE, equal_shares(THREE))))
    assert energy_j <= equal_j


def test_no_split_meeting_the_deadline_is_refused():
    with pytest.raises(InfeasibleAllocation):
        min_energy_weights(THREE, 0.3)
