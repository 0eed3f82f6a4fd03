"""min-energy's earliest-deadline candidate (policies/at_deadline.py): the weights under
which each client ends at its own deadline, by hand on two clients, and min-energy meeting
deadlines of their own that only a narrow set of weightings meets (each a weighting's own
upload times, 1e-6 to spare), which its families miss (it used to refuse 40 % of them)."""

import numpy as np
import pytest

from fedjoule.policies.at_deadline import at_deadline_weights
from fedjoule.policies.bandwidth import Uplink
from fedjoule.policies.min_energy import min_energy_weights
from fedjoule.policies.shared_upload import phase_upload_time_s, shared_upload_time_s
from tests.policies.test_shared_upload import W_HZ, uplink


def test_two_clients_by_hand():
    """4 Mbit/s each on the whole band (SNR 15), 6 kbit, deadlines 2.1 and 3.1 ms: the
    first ends at 2.1 ms on the share 6,000 / (0.0021 x 4e6) = 5/7; the second, on 2/7
    until then (2,400 bits), alone sends the other 3,600 bits in 0.9 ms: done at 3.0 ms."""
    up = Uplink(np.full(2, 6e3), np.full(2, 0.2), W_HZ, snr=np.array([15.0, 15.0]))
    weights = at_deadline_weights(up, np.array([0.0021, 0.0031]))
    assert weights == pytest.approx([5 / 7, 2 / 7], rel=1e-12)
    assert phase_upload_time_s(up, weights) == pytest.approx([0.0021, 0.0030], rel=1e-12)
    assert at_deadline_weights(up, np.array([0.0021, 0.0029])) is None  # the second: late


@pytest.mark.parametrize("m", [3, 6, 30])
@pytest.mark.parametrize("seed", [0, 1])
def test_min_energy_meets_deadlines_only_a_narrow_set_of_weightings_meets(m, seed):
    up = uplink(m, seed)
    given = np.random.default_rng(seed).random(m)
    deadline_s = shared_upload_time_s(up, given) * (1 + 1e-6)
    weights = min_energy_weights(up, deadline_s)
    time_s = phase_upload_time_s(up, weights)
    assert np.all(time_s <= deadline_s)
    given_j = up.tx_power_w @ shared_upload_time_s(up, given)
    assert up.tx_power_w @ time_s <= given_j * (1 + 1e-5)
