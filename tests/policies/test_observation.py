"""check_decision refuses each broken limit with one clear message naming the policy, the
client and the value; a decision within the limits passes."""

import numpy as np
import pytest

from fedjoule.errors import FedjouleError
from fedjoule.policies.observation import Decision, check_decision
from fedjoule.policies.select import select_best_channel
from tests.policies.helpers import observation

CANDIDATES = np.array([3, 5, 8])
RANGE_HZ = (np.array([0.3e9, 0.3e9, 1.0e9]), np.array([1.8e9, 2.4e9, 2.0e9]))


def refusal(decision: Decision) -> str:
    with pytest.raises(FedjouleError) as caught:
        check_decision(decision, "mine", CANDIDATES, RANGE_HZ)
    return str(caught.value)


def test_a_decision_within_the_limits_passes():
    ok = Decision(
        np.array([8, 3]), band_share=np.array([0.6, 0.4]),
        cpu_freq_hz=np.array([1.0e9, 1.8e9]), local_steps=np.array([1, 50]),
    )  # fmt: skip
    check_decision(ok, "mine", CANDIDATES, RANGE_HZ)
    check_decision(Decision(np.array([5])), "mine", CANDIDATES)  # nothing else set


def test_unknown_and_duplicate_clients_are_refused():
    assert refusal(Decision(np.array([3, 4]))) == (
        "policy 'mine' selected client 4, which is not among the round's 3 candidates "
        "(online and eligible)"
    )
    assert refusal(Decision(np.array([5, 3, 5]))) == (
        "policy 'mine' selected client 5 more than once"
    )


def test_band_shares_negative_nan_or_over_the_band_are_refused():
    assert refusal(Decision(np.array([3, 5]), band_share=np.array([0.5, -0.1]))) == (
        "policy 'mine': client 5's band share is -0.1; a share is a fraction of the band, "
        "at least 0"
    )
    assert "client 3's band share is nan" in refusal(
        Decision(np.array([3]), band_share=np.array([np.nan]))
    )
    assert refusal(Decision(np.array([3, 5, 8]), band_share=np.array([0.5, 0.25, 0.5]))) == (
        "policy 'mine': the band shares of the 3 selected clients sum to 1.25, more than "
        "the whole band (1); the largest is client 3's 0.5"
    )
    assert refusal(Decision(np.array([3, 5]), band_share=np.array([1.0]))) == (
        "policy 'mine' gave 1 values of band_share for 2 selected clients"
    )


def test_frequencies_outside_each_clients_dvfs_range_are_refused():
    assert refusal(Decision(np.array([5, 8]), cpu_freq_hz=np.array([2.4e9, 0.9e9]))) == (
        "policy 'mine': client 8's CPU frequency 9e+08 Hz is outside its DVFS range, "
        "1e+09 to 2e+09 Hz"
    )
    with pytest.raises(FedjouleError, match="set CPU frequencies, but no DVFS range"):
        check_decision(Decision(np.array([3]), cpu_freq_hz=np.array([1e9])), "x", CANDIDATES)


def test_fewer_than_one_or_fractional_steps_are_refused():
    assert refusal(Decision(np.array([3, 8]), local_steps=np.array([2, 0]))) == (
        "policy 'mine': client 8's local steps are 0; allowed: a whole number, at least 1"
    )
    assert refusal(Decision(np.array([3]), local_steps=np.array([1.5]))) == (
        "policy 'mine': client 3's local steps are 1.5; allowed: a whole number, at least 1"
    )


def test_a_channel_policy_without_csi_is_refused():
    with pytest.raises(FedjouleError) as caught:
        select_best_channel(observation(4), 2, np.random.default_rng(0))
    assert str(caught.value) == (
        "policy 'best-channel' needs the channel state (SNR/SINR): set policy.csi to last or oracle"
    )


def test_an_observation_refuses_a_field_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"Observation.loss has shape \(2,\), not \(3,\)"):
        observation(3, loss=np.ones(2))
