"""docs/architecture.md's examples, kept true: code outside the package adds an energy kind
(fedjoule.energy_kinds.register) and a protocol (fedjoule.simulator.protocols.register),
and a run of them writes every file as a built-in would, each joule in its place.

The toy protocol "metered" plays sync rounds over the round kernel's steps and charges two
toy kinds: energy_seal_j, SEAL_J per arrived upload to its client (a device kind, in
energy_total_j; say, sealing the update), and energy_server_j, SERVER_J per round at the
server (an infrastructure kind, outside it)."""

import csv
import json

import pytest

import fedjoule
from fedjoule import cli, energy_kinds
from fedjoule.energy_kinds import INFRASTRUCTURE, EnergyKind
from fedjoule.report import results
from fedjoule.simulator import protocols
from fedjoule.simulator.protocols import ProtocolDeclaration

SEAL_J, SERVER_J = 0.25, 3.0  # J per arrived upload, J per round
SEAL = EnergyKind("energy_seal_j", "seal", ("seal",))
SERVER = EnergyKind("energy_server_j", "server", (), spender=INFRASTRUCTURE, in_total=False)
METERED = ProtocolDeclaration(
    kind="metered",
    round_columns=("energy_server_j",),
    summary_fields=("energy_server_j",),
    round_counts="rounds (one aggregation of the round's arrived updates each)",
)
SMALL = {
    "population.size": 20,
    "training.rounds": 3,
    "training.clients_per_round": 5,
    "output.events": True,
}
BUILT_IN_KINDS = "'sync', 'async', 'buffered' or 'hierarchical'"


class Metered:
    """The server of protocol.kind=metered: sync rounds from the kernel's steps, then
    SEAL_J to each arrived client and SERVER_J to the row."""

    def __init__(self, sim) -> None:
        self.sim, self.server_j = sim, 0.0

    def play_round(self, env, r: int):
        sim = self.sim
        row = yield from sim.open_round(env, r)
        online, selected = sim.who_takes_part(row["sim_time_start_s"], r)
        row.update(online=len(online), selected=len(selected))
        played = yield from sim.client_round(env, r, selected, row["lr"], sim.model())
        for rec in played.records:
            if rec.outcome == "arrived":
                rec.spend("energy_seal_j", "seal", rec.end_s, rec.end_s, SEAL_J)
        if not played.failed:
            sim.aggregate(played, row)
        row = sim.close_row(row, env.now, played.records, played.failed)
        row["energy_server_j"] = SERVER_J
        return row

    def after_row(self, row: dict) -> None:
        self.server_j += row["energy_server_j"]

    def summary(self) -> dict:
        return {"energy_server_j": self.server_j}

    def state_dict(self) -> dict:
        return {"server_j": self.server_j}

    def load_state_dict(self, saved: dict) -> None:
        self.server_j = saved["server_j"]


def read(out):
    with (out / "rounds.csv").open() as f:
        rounds = list(csv.DictReader(f))
    with (out / "clients.csv").open() as f:
        clients = list(csv.DictReader(f))
    events = [json.loads(line) for line in (out / "events.jsonl").open()]
    return rounds, clients, json.loads((out / "summary.json").read_text()), events


def cli_run(out, kind: str, *more: str) -> int:
    sets = [f"{k}={v}".lower() for k, v in {**SMALL, "protocol.kind": kind}.items()]
    args = ["run", "default", "--no-train", "--out", str(out), "-q", *more]
    return cli.invoke([*args, *(x for s in sets for x in ("--set", s))])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A training run (the API), the same stopped after round 1 and resumed, and a
    system-only run (the command line) of metered, and the system-only run of sync; then
    the registrations undone."""
    tmp = tmp_path_factory.mktemp("seams")
    with (
        energy_kinds.registered(SEAL),
        energy_kinds.registered(SERVER),
        protocols.registered(METERED, Metered),
    ):
        overrides = {**SMALL, "protocol.kind": "metered", "output.timeline_rounds": [0]}
        fedjoule.run("default", tmp / "trained", overrides=overrides, device="cpu", threads=1)
        assert (tmp / "trained" / "timeline_round_0.png").exists()  # its seal events drawn
        # stopped after round 1 (its checkpoint: the toy's ledger column and server state)
        first = fedjoule.run(
            "default", tmp / "resumed", overrides=overrides, device="cpu", threads=1,
            on_round=lambda row: row["round"] < 1,
        )  # fmt: skip
        assert first.stopped_early
        fedjoule.run(None, tmp / "resumed", resume=True, device="cpu", threads=1)
        assert cli_run(tmp / "metered", "metered") == 0
        assert cli_run(tmp / "sync", "sync") == 0
    return {name: read(tmp / name) for name in ("trained", "resumed", "metered", "sync")}


@pytest.mark.parametrize("name", ["trained", "metered"])
def test_each_toy_joule_is_in_every_file(runs, name):
    rounds, clients, summary, events = runs[name]
    arrived = sum(int(row["arrived"]) for row in rounds)
    assert arrived > 0
    seal_j = SEAL_J * arrived  # the closed form
    assert sum(float(row["energy_seal_j"]) for row in rounds) == pytest.approx(seal_j)
    assert sum(float(row["energy_seal_j"]) for row in clients) == pytest.approx(seal_j)
    assert sum(e["energy_j"] for e in events if e["kind"] == "seal") == pytest.approx(seal_j)
    assert summary["energy_seal_j"] == pytest.approx(seal_j)
    assert [float(row["energy_server_j"]) for row in rounds] == [SERVER_J] * len(rounds)
    assert summary["energy_server_j"] == SERVER_J * len(rounds)
    assert "energy_server_j" not in clients[0]
    # the seal counts in energy_total_j (a device kind), the server's energy does not
    for row in [*rounds, *clients]:
        parts = [float(row[k.column]) for k in energy_kinds.BUILT_IN if k.in_total]
        total = float(row["energy_total_j"])
        assert total == pytest.approx(sum(parts) + float(row["energy_seal_j"]), rel=1e-12)
    assert summary["energy_total_j"] == pytest.approx(
        sum(float(row["energy_total_j"]) for row in rounds), rel=1e-12
    )
    assert summary["protocol"] == "metered"


def test_a_resumed_run_is_the_uninterrupted_one(runs):
    def steady(row: dict) -> dict:
        return {k: v for k, v in row.items() if k != "wall_time_s"}

    (trained, clients, summary, events), again = runs["trained"], runs["resumed"]
    assert [steady(row) for row in again[0]] == [steady(row) for row in trained]
    assert again[1] == clients and again[3] == events
    assert steady(again[2]) == steady(summary)


def test_metered_is_sync_plus_its_seals(runs):
    """The toy plays the kernel's sync round: every built-in figure as sync's, the total
    more by the seals (sync, run with the kind registered, spends none)."""
    metered, sync = runs["metered"][0], runs["sync"][0]
    assert [float(b["energy_seal_j"]) for b in sync] == [0.0] * len(sync)
    assert len(metered) == len(sync) == SMALL["training.rounds"]
    for a, b in zip(metered, sync, strict=True):
        built_in = [k.column for k in energy_kinds.BUILT_IN if k.column in b]
        assert [a[c] for c in built_in] == [b[c] for c in built_in]  # to the digit
        seals = SEAL_J * int(a["arrived"])
        assert float(a["energy_total_j"]) == pytest.approx(float(b["energy_total_j"]) + seals)
        assert (a["selected"], a["arrived"]) == (b["selected"], b["arrived"])


def test_the_registrations_are_undone(runs):
    assert tuple(energy_kinds.KINDS) == energy_kinds.BUILT_IN
    assert "energy_seal_j" not in results.ROUND_COLUMNS
    assert "energy_seal_j" not in results.CLIENT_COLUMNS
    assert tuple(protocols.DECLARATIONS) == protocols.KINDS == (
        "sync", "async", "buffered", "hierarchical"
    )  # fmt: skip


def test_an_unregistered_kind_is_refused_with_the_built_in_message(tmp_path, capsys):
    assert cli_run(tmp_path / "out", "metered") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert f"'protocol.kind': Input should be {BUILT_IN_KINDS} (got 'metered')" in err


def test_a_registered_kind_is_checked_as_a_built_in(tmp_path, capsys):
    with protocols.registered(METERED, Metered):
        assert cli_run(tmp_path / "a", "nope") == 2
        err = capsys.readouterr().err
        listed = "'sync', 'async', 'buffered', 'hierarchical' or 'metered'"
        assert f"'protocol.kind': Input should be {listed} (got 'nope')" in err
        assert cli_run(tmp_path / "b", "metered", "--set", "protocol.mixing=0.5") == 2
        err = capsys.readouterr().err
        assert "mixing applies to kind async, not to kind metered" in err
        assert cli_run(tmp_path / "c", "metered", "--engine", "numpy") == 2
        err = capsys.readouterr().err
        assert "protocol.kind=metered (it plays sync rounds only" in err
    with pytest.raises(ValueError, match="'sync' is taken"):
        protocols.register(ProtocolDeclaration(kind="sync"), Metered)
    with pytest.raises(ValueError, match="reads window_s"):
        protocols.register(ProtocolDeclaration(kind="x", fields=("window_s",)), Metered)
    with pytest.raises(ValueError, match="must read energy_<name>_j"):
        energy_kinds.register(EnergyKind("energy_tx_j", "again"))
    with pytest.raises(ValueError, match="a registered kind is a device kind"):
        energy_kinds.register(EnergyKind("energy_x_j", "x", spender=INFRASTRUCTURE))
    assert tuple(protocols.DECLARATIONS) == protocols.KINDS
    assert tuple(energy_kinds.KINDS) == energy_kinds.BUILT_IN
