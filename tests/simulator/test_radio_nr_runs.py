"""The 5G NR radios and profiles in whole runs: the numpy engine plays their promotion and
tail as the SimPy engine does, in closed form for gaps between rounds longer and shorter
than the tail; every new profile runs through sync, async, buffered and hierarchical
training and both system engines, its energy adding up: summary = rounds = clients."""

import csv
import json

import pytest

from fedjoule.devices.radio import promotion_energy_j, resolve
from fedjoule.report.results import read_rounds
from fedjoule.scenarios.loading import load_scenario
from fedjoule.scenarios.schema import RadioSection
from fedjoule.simulator.run import run_scenario
from fedjoule.simulator.system_run import run_system
from tests.simulator.test_system_engine import COLUMNS, assert_rows_equal, both_engines

NEW = ("phone-5g", "phone-5g-sa", "phone-5g-mmwave")
MODEL = {"phone-5g": "nr-nsa", "phone-5g-sa": "nr-sa", "phone-5g-mmwave": "nr-mmwave"}
STATES = ["energy_radio_promotion_j", "energy_radio_tail_j", "energy_idle_j"]
KINDS = ["energy_compute_j", "energy_tx_j", "energy_rx_j", *STATES, "energy_total_j"]
SMALL = [
    "population.size=6",
    "training.clients_per_round=6",
    "training.rounds=4",
    "availability.kind=always",
    "round.deadline_s=null",
    "round.min_clients=1",
    "channel.fading=none",
    "output.events=false",
]


def one_profile(profile, *extra):
    classes = f"population.device_classes=[{{profile: {profile}, share: 1.0}}]"
    return load_scenario("default-theory", [*SMALL, classes, *extra])


@pytest.mark.parametrize("profile", NEW)
@pytest.mark.parametrize("interval_s", [60.0, None])
def test_both_engines_charge_promotion_and_tail_in_closed_form(profile, interval_s):
    """Every client in every round. Rounds a minute apart (a gap longer than the tail):
    each participation promotes once (its upload inside its download's tail); rounds back
    to back (shorter): only the first round promotes. The two engines' rows agree."""
    s = one_profile(profile, f"round.interval_s={'null' if interval_s is None else interval_s}")
    simpy_rows, numpy_rows = both_engines(s, rounds=4)
    assert_rows_equal(simpy_rows, numpy_rows, [*COLUMNS, *STATES])
    p = resolve(RadioSection(model=MODEL[profile]), 0.2, 0.1)
    e_pro, e_tail = promotion_energy_j(p), p.tail_s * p.tail_power_w
    for rows in (simpy_rows, numpy_rows):
        promoted = [r["energy_radio_promotion_j"] / e_pro for r in rows]
        if interval_s is None:
            assert promoted == pytest.approx([6, 0, 0, 0], abs=1e-9)
            assert all(r["energy_radio_tail_j"] > 0 for r in rows)
        else:  # the download's tail cut by the upload, then the upload's whole tail
            assert promoted == pytest.approx([6, 6, 6, 6], rel=1e-9)
            for r in rows:  # (the last round's whole tails: the end-of-run tail)
                tails = r["energy_radio_tail_j"] + r.get("energy_end_of_run_tail_j", 0.0)
                closed = p.tail_power_w * r["compute_time_s"] + 6 * e_tail
                assert tails == pytest.approx(closed, rel=1e-9)


def sums_agree(folders):
    """In each run folder summary.json = rounds.csv = clients.csv per energy kind; and
    every new profile promoted somewhere."""
    promoted = dict.fromkeys(NEW, 0.0)
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        with open(folder / "rounds.csv") as f:
            rounds = list(csv.DictReader(f))
        with open(folder / "clients.csv") as f:
            clients = list(csv.DictReader(f))
        for kind in KINDS:
            by_rounds = sum(float(r[kind]) for r in rounds)
            by_clients = sum(float(c[kind]) for c in clients)
            assert by_rounds == pytest.approx(summary[kind], rel=1e-9, abs=1e-12), kind
            assert by_clients == pytest.approx(summary[kind], rel=1e-9, abs=1e-12), kind
        for c in clients:
            promoted[c["device_class"]] += float(c["energy_radio_promotion_j"])
        if (folder / "events.jsonl").exists():  # = events.jsonl, for the radio states
            events = [json.loads(line) for line in open(folder / "events.jsonl")]
            for kind, names in (("promotion", {"promotion"}), ("tail", {"tail", "queue"})):
                spent = sum(e["energy_j"] for e in events if e["kind"] in names)
                assert spent == pytest.approx(summary[f"energy_radio_{kind}_j"], rel=1e-9)
    assert all(j > 0 for j in promoted.values()), promoted  # every new profile took part


SHARES = (0.34, 0.33, 0.33)
MIXED = "population.device_classes=[" + ", ".join(
    f"{{profile: {p}, share: {share}}}" for p, share in zip(NEW, SHARES, strict=True)
) + "]"  # fmt: skip
SLOW = MIXED.replace("}", ", reference_seconds_per_sample: 2.0e5}")
PROTOCOLS = {
    "sync": ["output.events=true"],
    "async": ["protocol.kind=async", "training.rounds=8"],
    "buffered": ["protocol.kind=buffered", "protocol.buffer_size=3"],
    "hierarchical": ["protocol.kind=hierarchical", "topology.layout=hexagonal", "topology.cells=3"],
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_new_profile_trains_through_every_protocol(protocol, tmp_path):
    """A population of the three profiles, each local computation slowed to 3.3 s (its
    reference time per sample raised) so that async and buffered arrivals interleave:
    else the SA clients (a 0.34 s promotion, then inside their tail) would arrive many
    times before an NSA client's 1.44 s promotion ends."""
    s = load_scenario("default", [*SMALL, SLOW, "round.interval_s=null", *PROTOCOLS[protocol]])
    run_scenario(s, tmp_path / protocol, device="cpu")
    assert (tmp_path / protocol / "events.jsonl").exists() == (protocol == "sync")
    sums_agree([tmp_path / protocol])


@pytest.mark.parametrize("engine", ["numpy", "simpy"])
def test_every_new_profile_runs_without_training_on_both_engines(engine, tmp_path):
    s = load_scenario("default", [*SMALL, MIXED])
    run_system(s, tmp_path / engine, engine=engine)
    sums_agree([tmp_path / engine])


@pytest.mark.parametrize("profile", NEW)
def test_a_traced_constant_rate_upload_costs_the_documented_power(profile, tmp_path):
    """The issue's measurement: an uplink trace at a constant 40 Mbit/s; each round's
    energy_tx_j / uplink_airtime_s is slope x 40 + base, its airtime bits / rate, and with
    rounds a minute apart each of its 6 participations adds one promotion and one whole
    tail (and the download's tail, cut by the upload)."""
    trace = tmp_path / "constant.csv"
    trace.write_text("rate_mbps\n" + "40\n" * 5)
    up = f"{{file: {trace}, column: rate_mbps, unit: Mbit/s, per_client_offset: zero}}"
    s = one_profile(profile, "round.interval_s=60", f"channel.trace={{uplink: {up}}}")
    run_system(s, tmp_path / "run")
    p = resolve(RadioSection(model=MODEL[profile]), 0.2, 0.1)
    rows = read_rounds(tmp_path / "run" / "rounds.csv", missing=0.0)
    assert len(rows) == 4
    for r in rows:
        assert r["uplink_airtime_s"] == pytest.approx(r["uplink_bits"] / 40e6, rel=1e-9)
        power_w = r["energy_tx_j"] / r["uplink_airtime_s"]
        assert power_w == pytest.approx(p.uplink_w_per_mbps * 40 + p.uplink_base_power_w)
        assert r["energy_radio_promotion_j"] == pytest.approx(6 * promotion_energy_j(p))
        tails = r["energy_radio_tail_j"] + r["energy_end_of_run_tail_j"]
        closed = p.tail_power_w * r["compute_time_s"] + 6 * p.tail_s * p.tail_power_w
        assert tails == pytest.approx(closed, rel=1e-9)
