"""Every radio tail charged in full where it falls (issue 18): a tail that runs out between
two rounds is charged to the round it started in, the tails running at the run's end follow
energy.end_of_run_tail, and events.jsonl, rounds.csv, clients.csv and summary.json agree per
energy kind on a multi-cell, multi-profile scenario with round.interval_s."""

import csv
import json
from collections import defaultdict

import pytest

from fedjoule.devices.radio import DEFAULTS
from fedjoule.report.results import ENERGY_FIELDS
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.world import build_world

END = "energy_end_of_run_tail_j"
COMPUTE_S = 20.0


def one_client(radio: str, policy: str, seconds_per_sample: float = 1.0) -> Scenario:
    """One client, two rounds 40 s apart, COMPUTE_S of computation: its download's tail
    runs out while it computes, its upload's tail runs out before the next round."""
    data = load_scenario("default-theory").model_dump(mode="json")
    data["population"]["size"] = 1
    data["population"]["device_classes"] = [
        {
            "name": "phone",
            "compute": "measured",
            "reference_seconds_per_sample": seconds_per_sample,
            "reference_flops_per_sample": 1.0,
            "measured_power_w": 2.0,
            "radio": {"model": radio},
        }
    ]
    data["training"].update(rounds=2, clients_per_round=1, local_steps=1, target_value=None)
    data["round"].update(deadline_s=None, min_clients=1, interval_s=40.0)
    data["availability"] = {"kind": "always"}
    data["channel"].update(fading="none", shadowing_sigma_db=0)
    data["energy"] = {"end_of_run_tail": policy}
    data["output"]["events"] = True
    return Scenario.model_validate(data)


def one_client_20s(radio: str, policy: str) -> Scenario:
    """one_client with its step time scaled to COMPUTE_S."""
    step_s = float(build_world(one_client(radio, policy), device="cpu").step_time_s[0])
    return one_client(radio, policy, COMPUTE_S / step_s)


def rows(folder):
    with open(folder / "rounds.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("radio", ["lte", "wifi"])
@pytest.mark.parametrize("policy", ["charge", "separate", "drop"])
def test_one_client_pays_four_tails_in_two_rounds(radio, policy, tmp_path):
    """Idle -> promotion -> download -> tail, compute, promotion -> upload -> tail, twice:
    four whole tails, tail_s x tail_power_w each (LTE 11.576 s x 1.06 W: 4 x 12.27056 =
    49.08224 J), two in each round's row (the upload's tail ends in the 40 s gap); the
    last one, still running at the end, is charged, reported apart or dropped."""
    s = one_client_20s(radio, policy)
    p = DEFAULTS[radio]
    tail_j = p["tail_s"] * p["tail_power_w"]
    _, summary = run_scenario(s, tmp_path, device="cpu")
    r0, r1 = (float(r["energy_radio_tail_j"]) for r in rows(tmp_path))
    assert float(rows(tmp_path)[0]["compute_time_s"]) == pytest.approx(COMPUTE_S, rel=1e-9)
    assert r0 == pytest.approx(2 * tail_j, rel=1e-9)
    last = {"charge": 2, "separate": 1, "drop": 1}[policy]
    assert r1 == pytest.approx(last * tail_j, rel=1e-9)
    assert summary["end_of_run_tail_energy_j"] == pytest.approx(tail_j, rel=1e-9)
    assert summary[END] == pytest.approx(tail_j if policy == "separate" else 0.0, abs=1e-12)
    assert float(rows(tmp_path)[1][END]) == summary[END]
    if policy == "charge" and radio == "lte":
        assert summary["energy_radio_tail_j"] == pytest.approx(49.08224, rel=1e-9)
    spent = summary["energy_radio_tail_j"] + summary[END]
    assert spent == pytest.approx((4 if policy != "drop" else 3) * tail_j, rel=1e-9)


def ledger_scenario(policy: str = "separate", rounds: int = 4) -> Scenario:
    """urban-macro on 3 cells with the profile mix of issue 18 and rounds 30 s apart."""
    return load_scenario(
        "urban-macro",
        [
            f"training.rounds={rounds}",
            "model.hidden=[32]",
            "round.interval_s=30",
            "topology.layout=hexagonal",
            "topology.cells=3",
            "population.device_classes=[{profile: phone-lte-midrange, share: 0.6}, "
            "{profile: rpi4-wifi, share: 0.3}, {profile: nbiot-sensor, share: 0.1}]",
            f"energy.end_of_run_tail={policy}",
            "output.timeline_rounds=[]",
        ],
    )


def ledger_totals(folder):
    """Each energy kind summed over events.jsonl, rounds.csv, clients.csv, and summary.json."""
    kinds = (*ENERGY_FIELDS, END)
    by_event_kind = {
        "compute": "energy_compute_j",
        "uplink": "energy_tx_j",
        "uplink_aborted": "energy_tx_j",
        "downlink": "energy_rx_j",
        "promotion": "energy_radio_promotion_j",
        "tail": "energy_radio_tail_j",
        "queue": "energy_radio_tail_j",
        "idle": "energy_idle_j",
        "end_of_run_tail": END,
    }
    events = defaultdict(float)
    for line in open(folder / "events.jsonl"):
        event = json.loads(line)
        events[by_event_kind.get(event["kind"], "other")] += event["energy_j"]
    with open(folder / "clients.csv") as f:
        clients = list(csv.DictReader(f))
    summary = json.loads((folder / "summary.json").read_text())
    return {
        kind: {
            "events": events[kind],
            "rounds": sum(float(r[kind] or 0) for r in rows(folder)),
            "clients": sum(float(c[kind]) for c in clients),
            "summary": summary[kind],
        }
        for kind in kinds
    } | {"other": {"events": events["other"]}}


def test_every_joule_has_an_event_and_the_files_agree(tmp_path):
    _, summary = run_scenario(ledger_scenario(), tmp_path, device="cpu")
    totals = ledger_totals(tmp_path)
    assert totals.pop("other")["events"] == 0.0  # only the kinds above carry energy
    for kind, where in totals.items():
        reference = where["summary"]
        for name, value in where.items():
            assert value == pytest.approx(reference, rel=1e-9, abs=1e-12), (kind, name)
    assert totals["energy_radio_tail_j"]["summary"] > 0 and totals[END]["summary"] > 0
    charged = sum(totals[k]["summary"] for k in ENERGY_FIELDS)
    assert summary["energy_total_j"] == pytest.approx(charged, rel=1e-12)
    # separate: the end-of-run tails stay out of the rows, which never jump at the end
    assert summary["end_of_run_tail_energy_j"] == pytest.approx(summary[END], rel=1e-12)


@pytest.mark.parametrize("policy", ["charge", "separate"])
def test_training_and_system_engines_charge_the_same_tails(policy):
    """The learning engine and the SimPy system engine (`run --no-train`, and plan's
    replay built on it) play the same rounds and charge the same tails, gaps and end of
    run included (uniform selection: urban-macro's FedAvg)."""
    from fedjoule.simulator.engine import Simulation
    from fedjoule.simulator.system_simpy import SimpySystemSimulation
    from fedjoule.simulator.system_world import build_system_world

    s = ledger_scenario(policy, rounds=3)
    trained, skipped = [], []
    Simulation(build_world(s, device="cpu")).run(3, trained.append)
    SimpySystemSimulation(build_system_world(s)).run(3, skipped.append)
    columns = (*ENERGY_FIELDS, "energy_total_j", "cumulative_energy_j", "sim_time_end_s")
    for a, b in zip(trained, skipped, strict=True):
        for c in columns:
            assert a[c] == b[c], c
    assert trained[-1][END] == skipped[-1][END]
    assert sum(r["energy_radio_tail_j"] for r in trained) > 0
