"""Trace-driven links: airtime where the measured rate's integral reaches the bits."""

import json
import math

import numpy as np
import pytest
import simpy

from fedjoule.channel.medium import TransmissionAborted
from fedjoule.channel.trace import ThroughputTrace, TraceMedium, read_trace
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.system_run import run_system
from tests.simulator.test_round_accounting import BATCH, STEPS, hand_costs
from tests.simulator.test_round_accounting import scenario as fixed_scenario

RATES_MBPS = [1.0, 2.0, 4.0]  # a 3-sample trace, one sample per second


def three_samples(tmp_path, header="seq,mbps", rows=None):
    path = tmp_path / "trace.csv"
    rows = rows or [f"{i},{r}" for i, r in enumerate(RATES_MBPS)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def hand_airtime_s(bits, start_s, rates_bps=(1e6, 2e6, 4e6)):
    """Integrate the 1-s pieces by hand from start_s (looping every 3 s)."""
    t, left = start_s, bits
    while True:
        i = int(math.floor(t)) % 3
        piece_end = math.floor(t) + 1.0
        can = rates_bps[i] * (piece_end - t)
        if can >= left:
            return t + left / rates_bps[i] - start_s
        left -= can
        t = piece_end


def test_time_to_send_is_the_integral_of_the_piecewise_rate(tmp_path):
    trace = read_trace(str(three_samples(tmp_path)), "mbps")
    assert trace.period_s == 3.0
    # from 0.5 s: 0.5 s at 1 Mbit/s, 1 s at 2, then 2.5 Mbit at 4: 0.5 + 1 + 0.625
    assert trace.time_to_send_s(5e6, 0.5) == pytest.approx(2.125, rel=1e-12)
    # 20 Mbit from 0: two whole periods (14 Mbit, 6 s), then 1 + 2 + 3 Mbit: 8.75 s
    assert trace.time_to_send_s(20e6, 0.0) == pytest.approx(8.75, rel=1e-12)
    # a long transfer: whole periods skipped at once, same answer as piece by piece
    for bits, start in [(1e9, 0.3), (7e6, 2.9), (3.3e6, 1.0)]:
        assert trace.time_to_send_s(bits, start) == pytest.approx(
            hand_airtime_s(bits, start), rel=1e-12
        )
    assert trace.time_to_send_s(5e6, 3.5) == pytest.approx(2.125, rel=1e-12)  # looped


def test_units_scale_time_column_and_no_loop(tmp_path):
    path = three_samples(tmp_path, "t,kbps", ["10,500", "12,1000", "13,0"])
    trace = read_trace(str(path), "kbps", "t", unit="kbit/s", scale=2.0, loop=False)
    np.testing.assert_array_equal(trace.times_s, [0.0, 2.0, 3.0])
    np.testing.assert_array_equal(trace.rates_bps, [1e6, 2e6, 0.0])
    assert trace.period_s == 4.5  # last sample: the median spacing, 1.5 s
    assert trace.time_to_send_s(3e6, 0.0) == pytest.approx(2.5)
    assert trace.time_to_send_s(5e6, 0.0) == math.inf  # the last rate, 0, holds for ever


def test_trace_medium_follows_the_rate_steps_and_aborts_with_the_bits_sent():
    trace = ThroughputTrace(np.array([0.0, 1.0, 2.0]), np.array([1e6, 2e6, 4e6]), 3.0)
    env = simpy.Environment()
    medium = TraceMedium(env, trace, offset_s=0.5)
    steps, out = [], {}

    def client():
        out["airtime"] = yield from medium.transmit(5e6, None, on_rate=steps.append)

    env.process(client())
    env.run()
    assert out["airtime"] == pytest.approx(2.125, rel=1e-12)
    assert steps == [1e6, 2e6, 4e6]
    env = simpy.Environment()
    medium = TraceMedium(env, trace, offset_s=0.0)

    def aborted(on_rate):
        try:
            yield from medium.transmit(1e9, None, on_rate=on_rate)
        except TransmissionAborted as stop:
            out[on_rate is None] = stop

    for on_rate in (None, steps.append):
        process = env.process(aborted(on_rate))
        env.run(until=env.now + 1.5)
        process.interrupt("deadline")
        env.run(until=env.now + 1e-9)
    assert out[True].bits_sent == pytest.approx(1e6 + 2e6 * 0.5, rel=1e-12)
    # the second starts at t = 1.5: 0.5 s at 2 Mbit/s, then 1 s at 4 Mbit/s
    assert out[False].bits_sent == pytest.approx(2e6 * 0.5 + 4e6 * 1.0, rel=1e-9)


def test_one_client_run_uploads_in_the_hand_integrated_airtime(tmp_path):
    path = three_samples(tmp_path)
    trace = f"{{uplink: {{file: '{path}', column: mbps, per_client_offset: zero}}}}"
    s = fixed_scenario(
        "population.size=1",
        "training.clients_per_round=1",
        "training.rounds=2",
        "output.events=true",
        f"channel.trace={trace}",
    )
    out, summary = run_system(s, tmp_path / "run", engine="simpy")
    hand = hand_costs(s)
    spans = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    uploads = [e for e in spans if e["kind"] == "uplink"]
    assert len(uploads) == 2
    for e in uploads:
        start = e["start_s"]
        assert e["end_s"] - start == pytest.approx(hand_airtime_s(hand["bits"], start), rel=1e-9)
    # round 0's upload starts after the broadcast (Shannon) and the K steps
    first = hand["bits"] / hand["rate_down_bps"] + STEPS * hand["step_s"]
    assert uploads[0]["start_s"] == pytest.approx(first, rel=1e-9)
    airtime = sum(e["end_s"] - e["start_s"] for e in uploads)
    p_tx_w = 10 ** (23 / 10) / 1000
    assert summary["energy_tx_j"] == pytest.approx(p_tx_w * airtime, rel=1e-9)
    assert BATCH  # (the batch of hand_costs' step)


def test_downlink_trace_and_random_offsets_differ_per_client(tmp_path):
    path = three_samples(tmp_path)
    trace = f"{{downlink: {{file: '{path}', column: mbps}}}}"
    s = fixed_scenario("training.rounds=1", "output.events=true", f"channel.trace={trace}")
    out, _ = run_system(s, tmp_path / "run", engine="simpy")
    spans = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    downs = [e for e in spans if e["kind"] == "downlink"]
    bits = hand_costs(s)["bits"]  # short: each broadcast lies inside one 1-s sample
    took = {round(e["end_s"] - e["start_s"], 12) for e in downs}
    assert took <= {round(bits / rate, 12) for rate in (1e6, 2e6, 4e6)}
    assert len(took) > 1  # the clients' offsets differ: not in lockstep


@pytest.mark.parametrize(
    "rows, message",
    [
        (["0,1.0", "1,abc"], "line 3: mbps 'abc' is not a number"),
        (["0,1.0", "1,-2"], "line 3: mbps -2 is negative"),
        (["0,0", "1,0"], "every rate is 0"),
    ],
)
def test_a_bad_trace_is_refused_naming_the_file_and_line(tmp_path, rows, message):
    path = three_samples(tmp_path, rows=rows)
    with pytest.raises(FedjouleError, match=message):
        read_trace(str(path), "mbps")
    trace = f"{{uplink: {{file: '{path}', column: mbps}}}}"
    with pytest.raises(FedjouleError, match=f"channel.trace.uplink.file .*{path.name}"):
        load_scenario("default-theory", [f"channel.trace={trace}"])


def test_missing_column_and_packaged_trace(tmp_path):
    path = three_samples(tmp_path)
    with pytest.raises(FedjouleError, match="no column 'rate'; the file's columns: seq, mbps"):
        read_trace(str(path), "rate")
    walking = read_trace("package:walking-5gophers.csv", "throughput_mbps", "time_s")
    assert len(walking.rates_bps) == 603 and walking.period_s == 603.0
