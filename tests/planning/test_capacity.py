"""Capacity planning equals the hand calculation for one FDMA cell (fixed SNR, no fading,
equal devices): m clients sharing B end their uploads at down + K t_step + m S / (B se)."""

import math

import pytest

from fedjoule.planning.capacity import plan_capacity
from fedjoule.simulator.system_world import build_system_world
from tests.simulator.test_round_accounting import P_TX_W, SNR_DB, STEPS, UP_HZ, hand_costs
from tests.simulator.test_round_accounting import scenario as fixed_scenario

SE = math.log2(1 + 10 ** (SNR_DB / 10))  # bit/s/Hz


def setup(*extra):
    s = fixed_scenario("population.size=400", *extra)
    c = hand_costs(s)
    before_upload_s = c["bits"] / c["rate_down_bps"] + STEPS * c["step_s"]
    return s, build_system_world(s), c, before_upload_s


def test_largest_clients_per_round_meeting_the_deadline():
    s, world, c, before_s = setup()
    deadline_s = before_s + 0.37
    expected = math.floor((deadline_s - before_s) * UP_HZ * SE / c["bits"])
    plan = plan_capacity(s, world, deadline_s=deadline_s, rounds=3)
    assert 10 < expected < 400 and plan["answer"] == expected
    at = plan["at_answer"]
    assert at["round_time_s"] == pytest.approx(before_s + expected * c["bits"] / (UP_HZ * SE))
    assert at["rounds_per_hour"] == pytest.approx(3600 / at["round_time_s"])
    assert at["uplink_airtime_per_round_s"][0] == pytest.approx(
        expected**2 * c["bits"] / (UP_HZ * SE)  # m clients, each m S / (B se)
    )


def test_largest_clients_per_round_meeting_the_energy_budget():
    s, world, c, before_s = setup()
    fixed_j = 0.1 * c["bits"] / c["rate_down_bps"] + STEPS * c["step_j"]  # rx + compute
    budget_j = fixed_j + 0.05
    # E(m) = E_rx + K E_step + p m S / (B se) <= budget
    expected = math.floor((budget_j - fixed_j) * UP_HZ * SE / (P_TX_W * c["bits"]))
    plan = plan_capacity(s, world, energy_budget_j=budget_j, rounds=2)
    assert plan["answer"] == expected
    assert plan["at_answer"]["device_energy_j"] == pytest.approx(
        fixed_j + P_TX_W * expected * c["bits"] / (UP_HZ * SE)
    )


def test_smallest_bandwidth_meeting_the_deadline():
    s, world, c, before_s = setup("training.clients_per_round=20")
    deadline_s = before_s + 0.5
    expected_hz = 20 * c["bits"] / (SE * (deadline_s - before_s))  # B = m S / (se t)
    plan = plan_capacity(s, world, search="uplink_bandwidth_hz", deadline_s=deadline_s, rounds=2)
    assert expected_hz <= plan["answer"] <= expected_hz * 1.001


def test_cli_writes_the_answer_and_every_candidate(tmp_path):
    import csv
    import json

    from typer.testing import CliRunner

    from fedjoule.cli import app

    s, world, c, before_s = setup()
    deadline_s = before_s + 0.2
    expected = math.floor((deadline_s - before_s) * UP_HZ * SE / c["bits"])
    sets = [f"--set={x}" for x in ("population.size=400",)]
    args = ["capacity", "default", *sets, f"--deadline-s={deadline_s}", "--rounds=2", "-q"]
    from tests.simulator.test_round_accounting import FIXED

    args += [f"--set={x}" for x in FIXED if not x.startswith("population.size")]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "capacity.json").read_text())
    assert plan["answer"] == expected
    with (tmp_path / "capacity.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(plan["evaluations"])
    assert any(int(r["clients_per_round"]) == expected and r["meets"] == "True" for r in rows)
    assert not any(int(r["clients_per_round"]) == expected + 1 and r["meets"] == "True"
                   for r in rows)  # fmt: skip


def test_bad_search_is_a_clear_error():
    s, world, _, _ = setup()
    from fedjoule.errors import FedjouleError

    with pytest.raises(FedjouleError, match="allowed: clients_per_round, uplink_bandwidth_hz"):
        plan_capacity(s, world, search="bandwidth", deadline_s=1.0)
    with pytest.raises(FedjouleError, match="needs a limit"):
        plan_capacity(s, world)
