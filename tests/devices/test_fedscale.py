"""FedScale's device traces: read without running code, mapped to compute, links, availability."""

import csv
import io
import json
import os
import pickle

import pytest

from fedjoule.cli import invoke
from fedjoule.devices.fedscale import BehaviourReplay, CapacityTrace, read_pickle, to_json_text
from fedjoule.errors import FedjouleError
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.system_run import run_system
from tests.simulator.test_round_accounting import BATCH, STEPS, hand_costs
from tests.simulator.test_round_accounting import scenario as fixed_scenario

# in FedScale's formats: integer client ids from 1, ms per sample, kbit/s, seconds
CAPACITY = {
    1: {"computation": 12.5, "communication": 2_000.0},
    2: {"computation": 40.0, "communication": 500.0},
    3: {"computation": 7.25, "communication": 8_000.0},
}
BEHAVIOUR = {
    1: {
        "duration": 900,
        "inactive": [300, 800],
        "finish_time": 900,
        "active": [0, 400],
        "model": "SM-G950F",
    },
    2: {"duration": 600, "inactive": [600], "finish_time": 600, "active": [0], "model": "Pixel"},
    3: {
        "duration": 500,
        "inactive": [100, 500],
        "finish_time": 500,
        "active": [0, 200],
        "model": "iPhone",
    },
}


def dump(path, obj, protocol=None):
    with open(path, "wb") as f:  # as FedScale writes its traces: pickle.dump of a dict
        pickle.dump(obj, f, protocol=protocol)
    return path


class Payload:
    """A pickle that, loaded with pickle.load, would create a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def hostile(tmp_path):
    marker = tmp_path / "PWNED"
    trace = {1: {"computation": 10.0, "communication": Payload(marker)}}
    return dump(tmp_path / "hostile.pkl", trace), marker


@pytest.mark.parametrize("protocol", [2, 4, pickle.HIGHEST_PROTOCOL])
def test_fedscale_pickles_read_as_plain_data(tmp_path, protocol):
    path = dump(tmp_path / "capacity.pkl", CAPACITY, protocol)
    assert read_pickle(path) == CAPACITY
    trace = CapacityTrace(path)
    seconds, rates = trace.for_clients(5)  # client k takes entry k mod 3
    assert seconds.tolist() == pytest.approx([0.0375, 0.12, 0.02175, 0.0375, 0.12])
    assert rates.tolist() == [2e6, 5e5, 8e6, 2e6, 5e5]


def test_a_payload_pickle_is_refused_and_never_runs(tmp_path):
    path, marker = hostile(tmp_path)
    with pytest.raises(FedjouleError, match=r"hostile.pkl: refused: .*global '(posix|os)\.system'"):
        read_pickle(path)
    assert not marker.exists()
    # the command line: exit 2, naming the file and the global, nothing written
    out = tmp_path / "out.json"
    assert invoke(["traces", "convert", str(path), "--out", str(out)]) == 2
    assert not marker.exists() and not out.exists()
    # a scenario naming it is invalid, and loading it runs nothing either
    with pytest.raises(FedjouleError, match=r"capacity_trace.*hostile.pkl.*system"):
        load_scenario(
            "default-theory", [f"population.capacity_trace={{file: '{path}', power_w: 2}}"]
        )
    with pytest.raises(FedjouleError, match=r"trace_file.*hostile.pkl.*system"):
        load_scenario(
            "default-theory", ["availability.kind=trace", f"availability.trace_file={path}"]
        )
    assert not marker.exists()


def test_other_globals_are_refused_too(tmp_path):
    from collections import OrderedDict

    path = dump(tmp_path / "ordered.pkl", OrderedDict(CAPACITY))
    with pytest.raises(FedjouleError, match="collections.OrderedDict"):
        read_pickle(path)
    path = dump(tmp_path / "set.pkl", {1: {"computation": 1.0, "communication": {1, 2}}})
    with pytest.raises(FedjouleError, match="set.pkl, entry .*a set where"):
        read_pickle(path)


def scenario(tmp_path, capacity, behaviour, *extra):
    return fixed_scenario(
        "population.size=6",
        "training.clients_per_round=3",
        "training.rounds=4",
        "round.min_clients=1",
        "round.interval_s=350",
        f"population.capacity_trace={{file: '{capacity}', power_w: 2.0}}",
        "availability.kind=trace",
        f"availability.trace_file={behaviour}",
        *extra,
    )


def test_pickle_and_json_forms_give_identical_runs(tmp_path):
    pkl_cap = dump(tmp_path / "capacity.pkl", CAPACITY)
    pkl_beh = dump(tmp_path / "behaviour.pkl", BEHAVIOUR)
    jsons = []
    for path in (pkl_cap, pkl_beh):
        out = tmp_path / (path.stem + ".json")
        assert invoke(["traces", "convert", str(path), "--out", str(out)]) == 0
        jsons.append(out)
    assert json.loads(jsons[0].read_text())["2"] == CAPACITY[2]
    runs = []
    for name, (cap, beh) in {"pkl": (pkl_cap, pkl_beh), "json": tuple(jsons)}.items():
        out, summary = run_system(scenario(tmp_path, cap, beh), tmp_path / name, engine="simpy")
        runs.append((summary, (out / "rounds.csv").read_text(), (out / "clients.csv").read_text()))
    (a, rounds_a, clients_a), (b, rounds_b, clients_b) = runs
    a.pop("wall_time_s"), b.pop("wall_time_s")
    assert a == b
    assert clients_a == clients_b

    def rows(text):  # every column but the wall-clock time
        return [
            {k: v for k, v in r.items() if k != "wall_time_s"}
            for r in csv.DictReader(io.StringIO(text))
        ]

    assert rows(rounds_a) == rows(rounds_b)
    assert len(rows(rounds_a)) == 4
    # the behaviour trace decides who is online: at 350 s ids 1 (clients 0, 3) are off
    assert [int(r["online"]) for r in rows(rounds_a)] == [6, 4, 6, 6]


def test_capacity_trace_sets_step_time_energy_and_link_rate(tmp_path):
    cap = dump(tmp_path / "capacity.pkl", CAPACITY)
    s = scenario(
        tmp_path,
        cap,
        "",
        "availability.kind=always",
        "availability.trace_file=null",
        "output.events=true",
        "training.rounds=1",
    )
    out, _ = run_system(s, tmp_path / "run", engine="simpy")
    bits = hand_costs(s)["bits"]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    for e in events:
        entry = CAPACITY[e["client"] % 3 + 1]
        if e["kind"] == "compute":  # FedScale: 3 x batch x steps x ms per sample
            took = 3 * BATCH * STEPS * entry["computation"] / 1e3
            assert e["end_s"] - e["start_s"] == pytest.approx(took, rel=1e-12)
            assert e["energy_j"] == pytest.approx(2.0 * took, rel=1e-12)
        if e["kind"] in ("uplink", "downlink"):  # kbit/s, both directions
            took = bits / (entry["communication"] * 1e3)
            assert e["end_s"] - e["start_s"] == pytest.approx(took, rel=1e-12)


def test_behaviour_trace_replays_each_clients_own_period(tmp_path):
    replay = BehaviourReplay(dump(tmp_path / "b.pkl", BEHAVIOUR), 4)
    # client 0 -> id 1: online [0, 300) and [400, 800) of every 900 s
    assert [replay.online(0, t, 0) for t in (0, 299, 300, 350, 400, 850, 900 + 10)] == [
        True,
        True,
        False,
        False,
        True,
        False,
        True,
    ]
    assert replay.next_offline_s(0, 450.0, 0) == 800.0
    assert replay.next_offline_s(0, 1000.0, 0) == 1200.0
    assert replay.next_offline_s(1, 123.0, 0) == float("inf")  # online the whole period
    assert replay.next_offline_s(2, 250.0, 0) == 500.0 + 100.0  # runs into the next period
    assert replay.online(3, 10.0, 0)  # client 3 -> id 1 again


@pytest.mark.parametrize(
    "kind, bad, message",
    [
        (
            "capacity",
            {**CAPACITY, 2: {"computation": -3.0, "communication": 1.0}},
            r"client 2: computation -3.0 is not a number in \[1e-06, 1e\+06\]",
        ),
        ("capacity", {**CAPACITY, 3: {"computation": 1.0}}, "client 3: missing communication"),
        (
            "behaviour",
            {**BEHAVIOUR, 2: {**BEHAVIOUR[2], "inactive": [700]}},
            r"client 2: interval 0 \[0, 700\] must .*finish_time 600",
        ),
        (
            "behaviour",
            {**BEHAVIOUR, 1: {**BEHAVIOUR[1], "active": [0]}},
            r"client 1: active \(1\) and inactive \(2\)",
        ),
    ],
)
def test_validate_names_the_file_and_the_first_bad_entry(tmp_path, capsys, kind, bad, message):
    for suffix in (".pkl", ".json"):
        path = tmp_path / f"bad{suffix}"
        if suffix == ".pkl":
            dump(path, bad)
        else:
            path.write_text(json.dumps({str(k): v for k, v in bad.items()}))
        if kind == "capacity":
            setting = [f"population.capacity_trace={{file: '{path}', power_w: 2}}"]
        else:
            setting = ["availability.kind=trace", f"availability.trace_file={path}"]
        assert (
            invoke(["validate", "default-theory", *sum((["--set", s] for s in setting), [])]) == 2
        )
        err = capsys.readouterr().err.replace("\n", " ")
        assert f"bad{suffix}" in err
        with pytest.raises(FedjouleError, match=message):
            load_scenario("default-theory", setting)


def test_csv_form_and_convert_round_trip(tmp_path):
    path = tmp_path / "capacity.csv"
    path.write_text("client_id,computation,communication\n1,12.5,2000\n2,40,500\n3,7.25,8000\n")
    text, kind, clients = to_json_text(path)
    assert (kind, clients) == ("capacity", 3)
    assert json.loads(text) == {str(k): v for k, v in CAPACITY.items()}
    beh = tmp_path / "behaviour.csv"
    beh.write_text(
        "client_id,duration,finish_time,model,active,inactive\n1,900,900,SM-G950F,0;400,300;800\n"
    )
    assert BehaviourReplay(beh, 1).next_offline_s(0, 450.0, 0) == 800.0
