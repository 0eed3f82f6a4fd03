"""Radio states on the SimPy clock (fedjoule/simulator/radio_states.py): promotion, tail
and idle energy equal their closed forms to 1e-9, the BatteryGuard sees every power
change, and a run with LTE radios writes them to its files and resumes to the same files."""

import csv
import json
import math

import numpy as np
import pytest
import simpy

from fedjoule.channel.link import Link
from fedjoule.channel.medium import make_medium
from fedjoule.devices.radio import (
    is_plain_radiated,
    isolated_transfer_energy_j,
    receive_power_w,
    resolve,
    transmit_energy_j,
    transmit_power_w,
)
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import RadioSection, Scenario
from fedjoule.simulator.client import (
    BatteryGuard,
    ClientPlan,
    ClientRecord,
    _NoGuard,
    _Power,
    client_round,
)
from fedjoule.simulator.radio_states import RadioBank
from fedjoule.simulator.run import run_scenario

UP_HZ = 1e6
UP_RATE = UP_HZ * math.log2(1 + 3.0)  # SNR 3: 2 Mbit/s on the whole band (tdma)
DOWN_BITS, DOWN_RATE = 2e6, 10e6
UP_BITS = 4e6
COMPUTE_W = 2.0
P_W, PRX_W = 0.2, 0.1

LTE = dict(alpha_u=0.43839, alpha_d=0.05197, beta=1.2, t_pro=0.26, p_pro=1.21)
LTE.update(t_tail=11.576, p_tail=1.06, p_idle=0.594 * 0.043 / 1.28)


def radio(model="lte", **given):
    p = resolve(RadioSection(model=model, **given), P_W, PRX_W)
    return p, RadioBank([p], np.zeros(1, dtype=int))


def plan_for(p, compute_s, access="tdma"):
    return ClientPlan(
        client=0,
        downlink_s=DOWN_BITS / DOWN_RATE,
        downlink_bits=DOWN_BITS,
        rx_power_w=receive_power_w(p, DOWN_RATE),
        compute_s=compute_s,
        compute_energy_j=COMPUTE_W * compute_s,
        uplink_bits=UP_BITS,
        uplink=Link(P_W, snr_fixed=3.0),
        radio=None if is_plain_radiated(p) else p,
    )


def play(env, bank, plan, guard=None, access="tdma", medium=None):
    record = ClientRecord(0)
    medium = medium or make_medium(env, access, UP_HZ)
    states = bank.client(env, 0, record)
    process = env.process(client_round(env, plan, medium, record, guard, states))
    if guard is not None:
        guard.process = process
    return record, process


def kinds(record, kind):
    return [span for span in record.spans if span[0] == kind]


def background(bank, until_s=math.inf):
    """The tail energy charged outside the processes (the engine's settle at a row's end)."""
    return sum(energy for *_, energy in bank.settle(until_s))


T_D = DOWN_BITS / DOWN_RATE
T_U = UP_BITS / UP_RATE
E_PRO = LTE["p_pro"] * LTE["t_pro"]
E_DOWN = LTE["alpha_d"] * DOWN_BITS / 1e6 + LTE["beta"] * T_D
E_UP = LTE["alpha_u"] * UP_BITS / 1e6 + LTE["beta"] * T_U
E_TAIL = LTE["p_tail"] * LTE["t_tail"]


def test_one_transfer_from_idle_costs_promotion_transfer_and_whole_tail():
    env = simpy.Environment()
    p, bank = radio()
    record = ClientRecord(0)
    states = bank.client(env, 0, record)
    started = {}

    def one_upload():
        states.begin(_Power(_NoGuard()))
        yield from states.connect()
        started["s"] = env.now
        states.sending()
        yield env.timeout(T_U)
        record.energy_tx_j += transmit_energy_j(p, UP_BITS, T_U)
        states.release()
        states.end()

    env.process(one_upload())
    env.run()
    assert started["s"] == pytest.approx(LTE["t_pro"], rel=1e-12)  # the promotion delays it
    total = record.energy_total_j + background(bank)
    closed = E_PRO + E_UP + E_TAIL  # promotion + alpha S + beta t + full tail
    assert total == pytest.approx(closed, rel=1e-9)
    assert isolated_transfer_energy_j(p, UP_BITS, UP_RATE) == pytest.approx(closed, rel=1e-12)
    assert record.energy_radio_promotion_j == pytest.approx(E_PRO, rel=1e-9)


def test_transfers_closer_than_the_tail_pay_one_promotion_and_cut_the_tail():
    env = simpy.Environment()
    p, bank = radio()
    compute_s = 3.0  # < tail_s: the upload finds the download's tail
    record, _ = play(env, bank, plan_for(p, compute_s))
    env.run()
    assert record.outcome == "arrived"
    assert len(kinds(record, "promotion")) == 1
    assert record.energy_radio_promotion_j == pytest.approx(E_PRO, rel=1e-9)
    assert record.energy_rx_j == pytest.approx(E_DOWN, rel=1e-9)
    assert record.energy_tx_j == pytest.approx(E_UP, rel=1e-9)
    # the download's tail, cut at the upload: it ran during the computation
    assert record.energy_radio_tail_j == pytest.approx(LTE["p_tail"] * compute_s, rel=1e-9)
    assert record.energy_idle_j == 0
    upload_start = LTE["t_pro"] + T_D + compute_s
    assert record.end_s == pytest.approx(upload_start + T_U, rel=1e-12)
    after = background(bank)  # the upload's tail runs out after the round
    assert after == pytest.approx(E_TAIL, rel=1e-9)
    closed = E_PRO + E_DOWN + LTE["p_tail"] * compute_s + COMPUTE_W * compute_s + E_UP + E_TAIL
    assert record.energy_total_j + after == pytest.approx(closed, rel=1e-9)


def test_a_transfer_after_the_tail_pays_a_second_promotion_and_idle_counts_between():
    env = simpy.Environment()
    p, bank = radio()
    compute_s = 20.0  # > tail_s: the radio is idle when the upload starts
    record, _ = play(env, bank, plan_for(p, compute_s))
    env.run()
    assert len(kinds(record, "promotion")) == 2
    assert record.energy_radio_promotion_j == pytest.approx(2 * E_PRO, rel=1e-9)
    assert record.energy_radio_tail_j == pytest.approx(E_TAIL, rel=1e-9)
    idle_s = compute_s - LTE["t_tail"]
    assert record.energy_idle_j == pytest.approx(LTE["p_idle"] * idle_s, rel=1e-9)
    (idle,) = kinds(record, "idle")
    assert idle[1] == pytest.approx(LTE["t_pro"] + T_D + LTE["t_tail"], rel=1e-12)
    upload_start = LTE["t_pro"] + T_D + compute_s + LTE["t_pro"]
    assert record.end_s == pytest.approx(upload_start + T_U, rel=1e-12)
    closed = 2 * E_PRO + E_DOWN + E_TAIL + LTE["p_idle"] * idle_s + COMPUTE_W * compute_s + E_UP
    assert record.energy_total_j == pytest.approx(closed, rel=1e-9)
    assert background(bank) == pytest.approx(E_TAIL, rel=1e-9)


@pytest.mark.parametrize("gap_s", [4.0, 30.0])
def test_the_tail_crosses_into_the_next_round(gap_s):
    """Round r+1 starts gap_s after round r's upload: inside the tail it pays no
    promotion and its record carries the tail's part since round r's end; after the tail,
    a new promotion, and round r's tail was charged whole between the rounds."""
    env = simpy.Environment()
    p, bank = radio()
    first, process = play(env, bank, plan_for(p, 1.0))
    env.run(until=process)  # (the interrupted tail's timeout stays queued, stale)
    end_1 = first.end_s
    row_end = end_1 + 0.5  # round r's row closes a little later (other clients)
    in_row = background(bank, row_end)
    assert in_row == pytest.approx(LTE["p_tail"] * 0.5, rel=1e-9)
    env.run(until=end_1 + gap_s)
    between = background(bank, env.now) if gap_s > LTE["t_tail"] else 0.0
    second, process = play(env, bank, plan_for(p, 1.0))
    env.run(until=process)
    if gap_s < LTE["t_tail"]:
        assert kinds(second, "promotion") == []
        (carried, *_) = kinds(second, "tail")
        assert carried[1] == pytest.approx(row_end) and carried[2] == pytest.approx(end_1 + gap_s)
        assert carried[3] == pytest.approx(LTE["p_tail"] * (gap_s - 0.5), rel=1e-9)
        assert in_row + carried[3] == pytest.approx(LTE["p_tail"] * gap_s, rel=1e-9)
    else:
        assert len(kinds(second, "promotion")) == 1  # the download's only
        assert in_row + between == pytest.approx(E_TAIL, rel=1e-9)
    assert second.energy_radio_tail_j >= LTE["p_tail"] * 1.0 * (1 - 1e-12)


def test_the_battery_guard_sees_the_tail_and_idle_power():
    compute_s = 20.0
    p, _ = radio()
    t_b = LTE["t_pro"] + T_D
    # stop 1.5 s into the computation, while the tail runs beside it
    budget = E_PRO + E_DOWN + (COMPUTE_W + LTE["p_tail"]) * 1.5
    env = simpy.Environment()
    _, bank = radio()
    record, _ = play(env, bank, plan_for(p, compute_s), BatteryGuard(env, budget))
    env.run()
    assert record.outcome == "battery"
    assert record.end_s == pytest.approx(t_b + 1.5, rel=1e-9)
    assert record.energy_total_j == pytest.approx(budget, rel=1e-9)
    # stop 2 s after the tail ran out: compute + idle power then
    extra = 2.0
    budget = E_PRO + E_DOWN + COMPUTE_W * (LTE["t_tail"] + extra) + E_TAIL + LTE["p_idle"] * extra
    env = simpy.Environment()
    _, bank = radio()
    record, _ = play(env, bank, plan_for(p, compute_s), BatteryGuard(env, budget))
    env.run()
    assert record.outcome == "battery"
    assert record.end_s == pytest.approx(t_b + LTE["t_tail"] + extra, rel=1e-9)
    assert record.energy_total_j == pytest.approx(budget, rel=1e-9)


class PowerLog:
    def __init__(self):
        self.powers = []

    def set_power(self, power_w):
        self.powers.append(power_w)

    def add_spent(self, energy_j):
        pass


def test_measured_power_follows_the_rate_on_a_shared_band():
    """FDMA: two LTE uploads share the band, then one is alone; each one's energy is
    alpha S + beta t, and its guard heard the power at both rates."""
    env = simpy.Environment()
    p, _ = radio()
    medium = make_medium(env, "fdma", UP_HZ)
    logs, records = [], []
    for compute_s in (1.0, 1.5):
        bank = RadioBank([p], np.zeros(1, dtype=int))
        log = PowerLog()
        record, _ = play(env, bank, plan_for(p, compute_s), log, medium=medium)
        logs.append(log)
        records.append(record)
    env.run()
    shared = (UP_HZ / 2) * math.log2(1 + 3.0)
    for record in records:
        assert record.energy_tx_j == pytest.approx(
            LTE["alpha_u"] * UP_BITS / 1e6 + LTE["beta"] * record.uplink_airtime_s, rel=1e-9
        )
    heard = logs[0].powers
    assert any(w == pytest.approx(transmit_power_w(p, shared), rel=1e-12) for w in heard)
    assert any(w == pytest.approx(transmit_power_w(p, UP_RATE), rel=1e-12) for w in heard)


def test_linear_radio_through_a_round():
    env = simpy.Environment()
    p, bank = radio("linear")
    record, _ = play(env, bank, plan_for(p, 1.0))
    env.run()
    assert record.energy_tx_j == pytest.approx((P_W / 0.1 + 3.0 * 0.273333) * T_U, rel=1e-9)
    assert record.energy_rx_j == PRX_W * T_D
    assert record.end_s == pytest.approx(T_D + 1.0 + T_U, rel=1e-12)  # no promotion
    assert record.energy_radio_tail_j == record.energy_radio_promotion_j == 0


def test_radiated_is_unchanged():
    """The plain radiated radio (plan.radio None) and the generic path with a radiated
    RadioParams both give today's p x airtime and p_rx x airtime, bit for bit."""
    p, bank = radio("radiated")
    results = []
    for generic in (False, True):
        env = simpy.Environment()
        plan = plan_for(p, 1.0)
        plan.radio = p if generic else None
        record, _ = play(env, bank, plan)
        env.run()
        results.append(record)
    for record in results:
        assert record.energy_tx_j == P_W * T_U and record.energy_rx_j == PRX_W * T_D
        assert record.energy_total_j == COMPUTE_W * 1.0 + P_W * T_U + PRX_W * T_D
        assert not any(span[0] in ("promotion", "tail", "idle") for span in record.spans)
    assert results[0].spans == results[1].spans


# ---------------------------------------------------------------------- end to end
def urban_macro(model: str, rounds: int = 3) -> Scenario:
    data = load_scenario("urban-macro", [f"training.rounds={rounds}"]).model_dump(mode="json")
    for cls in data["population"]["device_classes"]:
        cls["radio"] = {"model": model}
    return Scenario.model_validate(data)


def rows_without_wall_time(path):
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in csv.DictReader(f)]


def test_urban_macro_with_lte_radios_charges_tails_and_resumes_to_the_same_files(tmp_path):
    s = urban_macro("lte")
    _, whole = run_scenario(s, tmp_path / "whole", device="cpu")
    rows = rows_without_wall_time(tmp_path / "whole" / "rounds.csv")
    assert all(float(r["energy_radio_tail_j"]) > 0 for r in rows)
    assert all(float(r["energy_radio_promotion_j"]) > 0 for r in rows)
    for r in rows:
        parts = ("compute", "tx", "rx", "radio_promotion", "radio_tail", "idle")
        assert float(r["energy_total_j"]) == pytest.approx(
            sum(float(r[f"energy_{n}_j"]) for n in parts), rel=1e-12
        )
    assert whole["energy_total_j"] == pytest.approx(
        sum(float(r["energy_total_j"]) for r in rows), rel=1e-12
    )
    with open(tmp_path / "whole" / "clients.csv") as f:
        clients = list(csv.DictReader(f))
    assert sum(float(c["energy_radio_tail_j"]) for c in clients) == pytest.approx(
        whole["energy_radio_tail_j"], rel=1e-9
    )
    events = [json.loads(line) for line in open(tmp_path / "whole" / "events.jsonl")]
    assert {"promotion", "tail"} <= {e["kind"] for e in events}

    _, partial = run_scenario(s, tmp_path / "cut", device="cpu", stop_after=1)
    assert partial["rounds_completed"] == 1
    _, resumed = run_scenario(None, tmp_path / "cut", device="cpu", resume=True)
    assert rows_without_wall_time(tmp_path / "cut" / "rounds.csv") == rows
    for name in ("clients.csv", "events.jsonl"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    whole.pop("wall_time_s"), resumed.pop("wall_time_s")
    assert whole == resumed


def test_numpy_engine_runs_radio_states_as_the_simpy_engine():
    """Promotion, tails across rounds, idle and the rate-dependent power in closed form
    (simulator/vector_radio.py): the SimPy engine's rows, energy per kind included, with
    markov availability replaced (its numpy draws differ) and TDMA queues (the wait is
    tail energy)."""
    from fedjoule.simulator.system_run import choose_engine
    from tests.simulator.test_system_engine import COLUMNS, assert_rows_equal, both_engines

    kinds = ["energy_radio_promotion_j", "energy_radio_tail_j", "energy_idle_j"]
    for access in ("fdma", "tdma"):
        lte = urban_macro("lte", rounds=5)
        lte = lte.model_copy(update={
            "availability": lte.availability.model_copy(update={"kind": "bernoulli"}),
            "channel": lte.channel.model_copy(update={"access": access}),
            "output": lte.output.model_copy(update={"events": False, "timeline_rounds": []}),
        })  # fmt: skip
        assert choose_engine(lte, "auto") == ("numpy", [])
        simpy_rows, numpy_rows = both_engines(lte, rounds=5)
        assert_rows_equal(simpy_rows, numpy_rows, [*COLUMNS, *kinds])
        assert sum(r["energy_radio_tail_j"] for r in numpy_rows) > 0
        end = "energy_end_of_run_tail_j"  # the last row: the tails still running
        assert numpy_rows[-1][end] == pytest.approx(simpy_rows[-1][end], rel=1e-9)
        assert numpy_rows[-1][end] > 0


def test_numpy_engine_runs_linear_radios_as_the_simpy_engine():
    from tests.simulator.test_system_engine import assert_rows_equal, both_engines

    data = load_scenario("default-theory").model_dump(mode="json")
    for cls in data["population"]["device_classes"]:
        cls["radio"] = {"model": "linear"}
    s = Scenario.model_validate(data)
    from fedjoule.simulator.system_run import choose_engine

    assert choose_engine(s, "auto")[0] == "numpy"
    simpy_rows, numpy_rows = both_engines(s, rounds=5)
    assert_rows_equal(simpy_rows, numpy_rows)
    plain_rows, _ = both_engines(load_scenario("default-theory"), rounds=5)
    # the same airtimes, the transmit energy scaled from p to p / eta + P_c
    for lin, plain in zip(simpy_rows, plain_rows, strict=True):
        assert lin["uplink_airtime_s"] == plain["uplink_airtime_s"]
        assert lin["energy_tx_j"] > plain["energy_tx_j"]
