"""The scenario's `policy:` section in the round (issue 29): runs through the CLI in-process
whose selections and local steps are checked against closed forms, the same policy giving
the same rows on both system engines, and every refusal an exit 2 with one error line."""

import csv
import json
import math

import numpy as np
import pytest
import yaml

from fedjoule.api import load_scenario
from fedjoule.channel.cell import round_fading
from fedjoule.cli import invoke
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_world import build_system_world


def scenario_file(tmp_path, **sections) -> str:
    """A small system-only scenario with `sections` merged over it."""
    base = {
        "training": {"rounds": 6, "clients_per_round": 4},
        "population": {"size": 12},
        "round": {"deadline_s": 5.0},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(base))
    return str(path)


def run(tmp_path, scenario: str, *extra: str, name: str = "out"):
    out = tmp_path / name
    assert invoke(["run", scenario, "--no-train", "-q", "--out", str(out), *extra]) == 0
    return out


def rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def selected_per_round(out) -> dict[int, set[int]]:
    chosen: dict[int, set[int]] = {}
    for line in (out / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["outcome"] != "outside":
            chosen.setdefault(event["round"], set()).add(event["client"])
    return chosen


def test_round_robin_selects_every_client_once_in_each_n_over_m_rounds(tmp_path):
    scenario = scenario_file(tmp_path, policy={"select": "round-robin"}, output={"events": True})
    chosen = selected_per_round(run(tmp_path, scenario))
    n, m = 12, 4
    assert sorted(chosen) == list(range(6)) and all(len(s) == m for s in chosen.values())
    for first in (0, n // m):  # rounds 0-2 and 3-5
        groups = [chosen[r] for r in range(first, first + n // m)]
        assert sorted(c for g in groups for c in g) == list(range(n))


def test_best_channel_with_oracle_csi_and_no_fading_selects_the_highest_snr(tmp_path):
    """One device class (one transmit power), no shadowing or fading: the SNR falls with
    the distance to the base station, so the m highest are the m nearest clients."""
    scenario = scenario_file(
        tmp_path,
        policy={"select": "best-channel", "csi": "oracle"},
        channel={"fading": "none", "shadowing_sigma_db": 0.0},
        training={"rounds": 3},
    )
    clients = rows(run(tmp_path, scenario) / "clients.csv")
    distance = np.array([float(c["distance_m"]) for c in clients])
    nearest = set(np.argsort(distance)[:4].tolist())
    assert {i for i, c in enumerate(clients) if c["selected"] == "3"} == nearest
    assert sum(int(c["selected"]) for c in clients) == 3 * 4


def test_steps_deadline_gives_each_client_the_most_steps_that_fit(tmp_path):
    """K = floor((deadline - comm) / step) per client, comm its expected download and
    upload at the scenario's fixed SNR: the model over the downlink band, the update over
    B / m of the uplink band (all m in one cell)."""
    deadline_s, m = 0.02, 4
    scenario = scenario_file(
        tmp_path,
        training={"rounds": 1, "clients_per_round": m},
        population={"size": 8},
        channel={"snr_db": 10.0, "fading": "none"},
        round={"deadline_s": deadline_s},
        policy={"steps": "deadline", "max_steps": 100_000},
        output={"events": True},
    )
    out = run(tmp_path, scenario)
    spec = load_scenario(scenario)
    world = build_system_world(spec)
    channel = spec.channel
    se = math.log2(1 + 10 ** (channel.snr_db / 10))
    comm_s = world.downlink_bits / (channel.downlink_bandwidth_hz * se) + world.uplink_bits / (
        channel.uplink_bandwidth_hz / m * se
    )
    computed = 0
    for line in (out / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] != "compute":
            continue
        step_s = world.step_time_s[event["client"]]
        steps = round((event["end_s"] - event["start_s"]) / step_s)
        assert steps == math.floor((deadline_s - comm_s) / step_s) > 1
        assert steps * step_s + comm_s <= deadline_s < (steps + 1) * step_s + comm_s
        computed += 1
    assert computed == m
    assert rows(out / "rounds.csv")[0]["dropped_deadline"] == "0"


@pytest.mark.parametrize(
    "policy",
    [
        {"select": "proportional-fair", "csi": "oracle", "steps": "deadline",
         "frequency": "deadline", "bandwidth": "equal-finish"},
        {"select": "age", "csi": "last", "bandwidth": "min-energy", "max_steps": 7,
         "steps": "deadline"},
        {"select": "battery", "battery_weighted": True},
    ],
    ids=["pf-oracle", "age-last", "battery"],
)  # fmt: skip
def test_the_same_policy_gives_the_same_rows_on_both_engines(tmp_path, policy):
    scenario = scenario_file(
        tmp_path, policy=policy, population={"size": 30}, training={"clients_per_round": 6}
    )
    numpy_rows = rows(run(tmp_path, scenario, "--engine", "numpy", name="numpy") / "rounds.csv")
    simpy_rows = rows(run(tmp_path, scenario, "--engine", "simpy", name="simpy") / "rounds.csv")
    assert len(numpy_rows) == len(simpy_rows) == 6
    for a, b in zip(numpy_rows, simpy_rows, strict=True):
        for column, value in a.items():
            if column == "wall_time_s":
                continue
            try:
                assert float(value) == pytest.approx(float(b[column]), rel=1e-9, abs=1e-12)
            except ValueError:
                assert value == b[column], column


@pytest.mark.parametrize(
    ("sections", "extra", "words"),
    [
        ({"policy": {"select": "best-channel"}}, (), "needs the channel state"),
        ({"policy": {"select": "oort"}}, (), "ranks clients by the training loss"),
        ({"policy": {"select": "power-of-choice"}}, ("--engine", "numpy"), "run it with training"),
        ({"policy": {"bandwidth": "min-energy"}, "protocol": {"kind": "async"}}, (),
         "uploads start at different times"),
        ({"policy": {"steps": "deadline"}, "round": {"deadline_s": None}}, (),
         "needs round.deadline_s"),
        ({"policy": {"frequency": "deadline"},
          "population": {"device_classes": [{"name": "npu", "compute": "accelerator"}]}}, (),
         "'npu' has none"),
        ({"policy": {"bandwidth": "equal-finish"}, "channel": {"access": "tdma"}}, (),
         "needs channel.access fdma"),
        ({"policy": {"select": "age", "choice_d": 3}}, (), "only used with select=power-of"),
    ],
)  # fmt: skip
def test_refusals_exit_2_with_one_error_line(tmp_path, capsys, sections, extra, words):
    scenario = scenario_file(tmp_path, **sections)
    out = tmp_path / "out"
    assert invoke(["run", scenario, "--no-train", "-q", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("error:") == 1, err
    assert words in err and "Traceback" not in err
    assert not out.exists()


def test_a_stopped_training_run_with_a_policy_resumes_to_the_same_rows(tmp_path):
    """What the server knows (observe.py: ages, last SNRs, round times) is in the
    checkpoint: a run stopped after round 2 resumes to the uninterrupted run's rows."""
    scenario = load_scenario(
        scenario_file(
            tmp_path,
            training={"rounds": 4},
            round={"deadline_s": 0.05},
            policy={"select": "age", "csi": "last", "steps": "deadline", "max_steps": 20},
        )
    )
    options = {"device": "cpu", "executor": "vectorised"}
    whole, _ = run_scenario(scenario, tmp_path / "whole", **options)
    stopped, _ = run_scenario(scenario, tmp_path / "stopped", stop_after=2, **options)
    run_scenario(scenario, stopped, resume=True, **options)
    for a, b in zip(rows(whole / "rounds.csv"), rows(stopped / "rounds.csv"), strict=True):
        assert {k: v for k, v in a.items() if k != "wall_time_s"} == {
            k: v for k, v in b.items() if k != "wall_time_s"
        }


def test_the_observation_after_a_round_holds_what_the_server_measured(tmp_path):
    """observe.Observer after round 0 on the numpy engine: the selected clients' age,
    battery, round time, upload rate and (csi last) the SNR of their upload; the others
    still unknown."""
    scenario = load_scenario(
        scenario_file(tmp_path, policy={"select": "age", "csi": "last"}, training={"rounds": 1})
    )
    engine = SystemEngine(build_system_world(scenario))
    engine.play_round(0)
    observer, clients = engine.policy_step.observer, engine.last_clients
    k = clients.client
    arrived = clients.outcome == "arrived"
    assert len(k) == 4 and arrived.all()
    others = np.setdiff1d(np.arange(12), k)
    obs = observer.observation(1, np.arange(12), np.ones(12))
    assert (obs.age_rounds[k] == 1).all() and (obs.age_rounds[others] == 2).all()
    assert (obs.participations[k] == 1).all() and (obs.participations[others] == 0).all()
    capacity = engine.world.population.battery_capacity_j[k]
    np.testing.assert_array_equal(obs.battery_fraction[k], engine.battery_j[k] / capacity)
    np.testing.assert_array_equal(obs.round_time_s[k], clients.end_s)
    rate = engine.world.uplink_bits / clients.uplink_airtime_s
    np.testing.assert_allclose(obs.upload_rate_bps[k], rate, rtol=1e-12)
    assert np.isnan(obs.upload_rate_bps[others]).all() and np.isnan(obs.sinr_db[others]).all()
    # the SNR of their upload: p G |h|^2 / (N0 W), round 0's fading
    cell, channel = engine.world.cell, scenario.channel
    up_fading, _ = round_fading(channel, 12, scenario.seed, 0)
    p = engine.world.population.tx_power_w
    noise_w = cell.noise_psd_w_per_hz * channel.uplink_bandwidth_hz
    snr = p * cell.large_scale_gain * up_fading / noise_w
    np.testing.assert_allclose(obs.sinr_db[k], 10 * np.log10(snr[k]), rtol=1e-12)
