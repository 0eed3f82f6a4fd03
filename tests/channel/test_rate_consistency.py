"""Rate-consistent outage (channel.rate): a fixed-rate upload attempt fails exactly when its
own fade is too deep, log2(1 + SNR |h|^2) < r; an adaptive-rate one never fails from fading.

The statistical checks read every attempt's fade |h|^2 and its result from events.jsonl of
runs without training (the SimPy engine, which writes the events)."""

import csv
import json
import math

import numpy as np
import pytest

from fedjoule.channel.link import Link
from fedjoule.channel.outage import fixed_rate_fails, rayleigh_target_threshold_snr
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import ChannelSection
from fedjoule.simulator.system_run import run_system
from fedjoule.simulator.system_world import build_system_world
from tests.simulator.test_system_engine import assert_rows_equal, both_engines

SNR_DB, SE = 3.0, 1.0  # P(fail) = 1 - exp(-(2^1 - 1)/10^0.3) = 0.394
UP_HZ = 1e6
FIXED_RATE = [
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    "channel.fading=rayleigh",
    "channel.fading_per=transmission",
    "channel.max_retx=2",
    f"channel.uplink_bandwidth_hz={UP_HZ}",
    "channel.rate=fixed",
    f"channel.spectral_efficiency_bits_per_hz={SE}",
    "output.events=true",
]
# 100 clients x 70 rounds, 1 + q + q^2 = 1.55 attempts each: about 10,900 transmissions
MANY = ["population.size=100", "training.clients_per_round=100", "training.rounds=70"]


def events_of(folder):
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def attempts_of(events):
    return [e for e in events if e["kind"] == "uplink"]


@pytest.fixture(scope="module")
def fixed_snr_run(tmp_path_factory):
    """TDMA at a fixed SNR: every attempt has the whole band, rate B r."""
    s = load_scenario("default-theory", [*FIXED_RATE, *MANY, f"channel.snr_db={SNR_DB}",
                                  "channel.access=tdma"])  # fmt: skip
    out, _ = run_system(s, tmp_path_factory.mktemp("fixed-snr"))
    return s, build_system_world(s), events_of(out)


def test_failure_rate_is_the_rayleigh_outage_probability(fixed_snr_run):
    _, _, events = fixed_snr_run
    up = attempts_of(events)
    n = len(up)
    assert n >= 10_000
    failed = np.array([not e["ok"] for e in up])
    p = -math.expm1(-(2**SE - 1) / 10 ** (SNR_DB / 10))  # 1 - exp(-(2^r - 1)/SNR)
    sigma = math.sqrt(p * (1 - p) / n)
    print(f"fixed rate: {failed.mean():.4f} of {n} attempts failed; theory {p:.4f} "
          f"(4 sigma = {4 * sigma:.4f})")  # fmt: skip
    assert abs(failed.mean() - p) < 4 * sigma
    # retransmissions happen exactly after failures: 1 + failures before the last attempt
    assert 0.3 < p < 0.5 and failed.sum() > 3_000


def test_an_attempt_fails_exactly_when_its_fade_is_below_the_threshold(fixed_snr_run):
    _, _, events = fixed_snr_run
    up = attempts_of(events)
    fade = np.array([e["fade"] for e in up])
    failed = np.array([not e["ok"] for e in up])
    threshold = (2**SE - 1) / 10 ** (SNR_DB / 10)  # |h|^2 < (2^r - 1)/SNR
    assert not failed[fade > threshold * (1 + 1e-12)].any()  # no fade above it fails
    assert failed[fade < threshold * (1 - 1e-12)].all()  # and every fade below it does
    np.testing.assert_array_equal(failed, np.log2(1 + 10 ** (SNR_DB / 10) * fade) < SE)
    # the fades are Rayleigh: |h|^2 ~ Exp(1), mean 1 (per transmission, fresh draws)
    assert abs(fade.mean() - 1) < 4 / math.sqrt(len(fade))


def test_retransmissions_follow_failures_and_drops_are_all_three_failed(fixed_snr_run):
    s, _, events = fixed_snr_run
    by_client_round = {}
    for e in attempts_of(events):
        by_client_round.setdefault((e["round"], e["client"]), []).append(e)
    for attempts in by_client_round.values():
        oks = [e["ok"] for e in sorted(attempts, key=lambda e: e["attempt"])]
        assert not any(oks[:-1])  # a retransmission only after a failure
        assert oks[-1] or len(oks) == 1 + s.channel.max_retx
        assert (attempts[0]["outcome"] == "outage") == (not oks[-1])


def test_fixed_rate_airtime_is_bits_over_band_times_r(fixed_snr_run):
    _, world, events = fixed_snr_run
    expected_s = world.uplink_bits / (UP_HZ * SE)  # S / (b r), b = B under TDMA
    airtimes = np.array([e["end_s"] - e["start_s"] for e in attempts_of(events)])
    np.testing.assert_allclose(airtimes, expected_s, rtol=1e-12)  # float t1 - t0 round-off
    assert Link(0.2, snr_fixed=1e-3, fixed_se_bps_per_hz=SE).rate_bps(UP_HZ) == UP_HZ * SE
    assert Link(0.2, gain=1e-20, fixed_se_bps_per_hz=2.5).rate_bps(1e5) == 1e5 * 2.5


def test_fixed_rate_fails_at_the_per_client_snr_of_geometry(tmp_path):
    """Geometry (path loss, shadowing): the threshold is (2^r - 1)/SNR_k with SNR_k the
    client's fading-free SNR p G/(N0 B/m) on its FDMA share, clients.csv's value."""
    s = load_scenario("default-theory", [*FIXED_RATE, "training.rounds=40",
                                  "channel.spectral_efficiency_bits_per_hz=2.0"])  # fmt: skip
    out, _ = run_system(s, tmp_path)
    with (out / "clients.csv").open() as f:
        snr = {
            int(r["client"]): 10 ** (float(r["mean_uplink_snr_db"]) / 10) for r in csv.DictReader(f)
        }
    up = attempts_of(events_of(out))
    fade = np.array([e["fade"] for e in up])
    failed = np.array([not e["ok"] for e in up])
    threshold = np.array([3.0 / snr[e["client"]] for e in up])  # (2^2 - 1)/SNR_k
    clear = np.abs(fade / threshold - 1) > 1e-9  # dB round trip of clients.csv
    np.testing.assert_array_equal(failed[clear], (fade < threshold)[clear])
    assert 0 < failed.sum() < len(failed)


def test_adaptive_rate_without_outage_model_never_fails(tmp_path):
    s = load_scenario("default-theory", [*FIXED_RATE[:-3], *MANY[:2], "training.rounds=20",
                                  "channel.snr_db=-10", "output.events=true"])  # fmt: skip
    assert s.channel.rate == "adaptive" and s.channel.outage == "none"
    out, _ = run_system(s, tmp_path)
    up = attempts_of(events_of(out))
    fade = np.array([e["fade"] for e in up])
    assert len(up) == 100 * 20 and all(e["ok"] and e["attempt"] == 0 for e in up)
    assert (fade < 0.01).sum() > 0  # deep fades (at -10 dB) still get through, slowly
    # the rate follows the fade: airtime S / (B/m log2(1 + SNR |h|^2)) is longest for it
    deepest = up[int(np.argmin(fade))]
    assert deepest["end_s"] - deepest["start_s"] > 10 * min(e["end_s"] - e["start_s"] for e in up)


def test_fixed_rate_threshold_rule_is_exact():
    snr = 4.0
    g = float(rayleigh_target_threshold_snr(2.0))  # 2^2 - 1 = 3
    fades = np.array([g / snr * (1 - 1e-12), g / snr, g / snr * (1 + 1e-12), 0.0, 10.0])
    np.testing.assert_array_equal(
        fixed_rate_fails(snr, fades, 2.0), [True, False, False, True, False]
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ["channel.access=fdma", "channel.max_retx=2"],
        ["channel.access=tdma", "channel.fading_per=round", "channel.max_retx=1"],
        ["channel.access=ofdma", "channel.resource_blocks=3", "round.overcommit=1.3"],
    ],
)
def test_numpy_engine_agrees_with_simpy_under_fixed_rate(overrides):
    s = load_scenario("default-theory", [
        "channel.rate=fixed", "channel.spectral_efficiency_bits_per_hz=3.0",
        "channel.fading_per=transmission", "round.deadline_s=null", *overrides,
    ])  # fmt: skip
    simpy_rows, numpy_rows = both_engines(s)
    assert_rows_equal(simpy_rows, numpy_rows)
    assert sum(r["dropped_outage"] for r in numpy_rows) > 0


def test_the_default_is_adaptive_and_meaningless_combinations_are_errors():
    assert ChannelSection().rate == "adaptive"
    assert ChannelSection().spectral_efficiency_bits_per_hz is None
    cases = {
        ("channel.rate=fixed",): "rate=fixed needs spectral_efficiency_bits_per_hz",
        ("channel.spectral_efficiency_bits_per_hz=1",): "only used with rate=fixed",
        ("channel.rate=fixed", "channel.spectral_efficiency_bits_per_hz=1",
         "channel.outage=rayleigh"): "outage=rayleigh with rate=fixed",
        ("channel.rate=fixed", "channel.spectral_efficiency_bits_per_hz=1",
         "channel.outage=waterfall"): "outage=waterfall with rate=fixed",
        ("channel.rate=fixed", "channel.spectral_efficiency_bits_per_hz=0"): "greater than 0",
    }  # fmt: skip
    for overrides, message in cases.items():
        with pytest.raises(FedjouleError, match=message):
            load_scenario("default-theory", list(overrides))
