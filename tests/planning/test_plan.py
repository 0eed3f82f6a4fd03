"""`fedjoule plan`: K* over SNR x bandwidth on a small synthetic DRDM-style scenario; the
repriced grid equals per-cell learning runs; repricing is refused (and why) with outage."""

import json
import math

import pytest
import torch
import yaml
from typer.testing import CliRunner

from fedjoule.cli import app
from fedjoule.errors import FedjouleError
from fedjoule.planning.breakeven import breakpoints, kstar_of_x
from fedjoule.planning.options import parse_cells, parse_numbers
from fedjoule.planning.plan import (
    KIND_COLUMNS,
    PER_CELL,
    REPRICE,
    PlanOptions,
    reprice_blockers,
    run_plan,
)
from fedjoule.planning.replay import read_round_sets
from fedjoule.planning.sweep import SweepOptions
from fedjoule.report.table import read_table
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.system import SystemEngine
from fedjoule.simulator.system_world import build_system_world

# Equal devices (one CPU frequency), fixed SNR, no fading: every client's round costs the
# same, so E_total(K) = R(K) (K a + c(SNR, B)) and K* can only grow with the comm cost c.
# kappa is raised so computation matters next to the 20x4-parameter model's uploads.
SCENARIO = {
    "name": "plan-synthetic",
    "seed": 1,
    "dataset": {
        "name": "synthetic",
        "synthetic": {
            "dim": 20,
            "classes": 4,
            "avg_samples": 100,
            "alpha": 0.5,
            "beta": 0.5,
            "test_samples": 50,
        },
    },
    "model": {"name": "logistic"},
    "algorithm": {"name": "fedavg"},
    "training": {
        "rounds": 60,
        "batch_size": 10,
        "lr": 0.05,
        "clients_per_round": 5,
        "target_metric": "accuracy",
        "target_value": 0.7,
    },
    "population": {
        "size": 20,
        "device_classes": [
            {
                "name": "node",
                "share": 1.0,
                "cpu_freq_min_hz": 1.0e9,
                "cpu_freq_max_hz": 1.0e9,
                "kappa": 1.0e-24,
                "battery_j": 1.0e9,
            }
        ],
    },
    "channel": {"snr_db": 30, "fading": "none", "uplink_bandwidth_hz": 1.0e6},
    "availability": {"kind": "always"},
}
SNRS, BANDWIDTHS = [0.0, 10.0, 20.0, 30.0], [1e5, 1e6, 1e7]
FIGURES = ("rounds_to_target", "reached", "E_total_j", "E_compute_j", "E_tx_j", "E_rx_j")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def scenario_file(tmp_path, **changes) -> str:
    data = json.loads(json.dumps(SCENARIO))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        data[section][key] = value
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def options(**kw) -> PlanOptions:
    return PlanOptions(sweep=SweepOptions(workers=1, device="cpu"), **kw)


def by_cell(rows: list[dict]) -> dict:
    return {(r["snr_db"], r["bandwidth_hz"], r["K"]): r for r in rows}


@pytest.fixture(scope="module")
def grid_plan(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan")
    source = scenario_file(tmp)
    opts = options(k_values=[1, 2, 5, 10, 20], snr_db=SNRS, bandwidth_hz=BANDWIDTHS)
    return run_plan(source, tmp / "out", [], opts), source


def test_kstar_grows_as_snr_and_bandwidth_fall(grid_plan):
    result, _ = grid_plan
    assert result.method == REPRICE
    kstar = {(b["snr_db"], b["bandwidth_hz"]): b["K_star"] for b in result.best}
    assert None not in kstar.values()
    print("\nK* (rows SNR 30..0 dB, columns 0.1, 1, 10 MHz):")
    for s in reversed(SNRS):
        print(f"  {s:4g} dB: {[kstar[s, b] for b in BANDWIDTHS]}")
    for b in BANDWIDTHS:  # SNR falling: K* non-decreasing
        column = [kstar[s, b] for s in reversed(SNRS)]
        assert column == sorted(column), (b, column)
    for s in SNRS:  # bandwidth falling: K* non-decreasing
        row = [kstar[s, b] for b in reversed(BANDWIDTHS)]
        assert row == sorted(row), (s, row)
    assert kstar[0.0, 1e5] > kstar[30.0, 1e7]  # the trend is there, not a constant
    # K* is each cell's cheapest reached K, as plan.csv says
    rows = result.rows
    for (s, b), k in kstar.items():
        mine = [r for r in rows if (r["snr_db"], r["bandwidth_hz"]) == (s, b) and r["reached"]]
        cheapest = min(mine, key=lambda r: r["E_total_j"])
        assert cheapest["K"] == k and cheapest["is_best"] == 1
        assert sum(r["is_best"] for r in mine) == 1


def test_repriced_rows_share_rounds_and_compute_energy(grid_plan):
    """R(K) and the computation energy do not depend on the channel; the transmission
    energy falls as SNR and bandwidth grow; the table on disk is the result."""
    result, _ = grid_plan
    table = by_cell(result.rows)
    for k in (1, 2, 5, 10, 20):
        cells = [table[s, b, k] for s in SNRS for b in BANDWIDTHS]
        assert len({c["rounds_to_target"] for c in cells}) == 1
        assert len({c["E_compute_j"] for c in cells}) == 1
        for b in BANDWIDTHS:
            tx = [table[s, b, k]["E_tx_j"] for s in SNRS]
            assert tx == sorted(tx, reverse=True)
        for c in cells:
            parts = sum(c[column] for column in KIND_COLUMNS)  # every kind of the ledger
            assert c["E_total_j"] == pytest.approx(parts, rel=1e-12)
    saved = read_table(result.out / "plan.csv")
    assert len(saved) == 5 * len(SNRS) * len(BANDWIDTHS)
    for row, mine in zip(saved, result.rows, strict=True):
        assert float(row["E_total_j"]) == mine["E_total_j"]
        assert int(row["rounds_to_target"]) == mine["rounds_to_target"]
    plan = json.loads((result.out / "plan.json").read_text())
    assert plan["method"] == REPRICE and plan["repricing_blockers"] == []
    assert [b["K_star"] for b in plan["best"]] == [b["K_star"] for b in result.best]
    for name in ("kstar_heatmap.png", "energy_vs_k.png"):
        assert (result.out / name).stat().st_size > 10_000


def test_every_cells_kstar_lies_on_the_breakeven_staircase(grid_plan):
    """Equal clients, no fading: E_total(K, cell) = R(K) (K E_step + E_comm(cell)), so each
    cell's K* in plan.csv is kstar_of_x(R, x) with the cell's x from plan.csv; plan.json
    holds the staircase's ranges and kstar_breakeven.png is drawn."""
    result, _ = grid_plan
    saved = read_table(result.out / "plan.csv")
    rounds = {int(r["K"]): int(r["rounds_to_target"]) for r in saved if r["snr_db"] == "30.0"}
    xs = {}
    for row in saved:
        cell = (float(row["snr_db"]), float(row["bandwidth_hz"]))
        assert int(row["rounds_to_target"]) == rounds[int(row["K"])]
        xs.setdefault(cell, set()).add(float(row["x"]))
    assert all(len(x) == 1 for x in xs.values())  # one x per cell, on each of its rows
    plan = json.loads((result.out / "plan.json").read_text())
    kstar = {(b["snr_db"], b["bandwidth_hz"]): b["K_star"] for b in plan["best"]}
    for cell, (x,) in xs.items():
        assert x > 0
        assert kstar[cell] == kstar_of_x(rounds, x), (cell, x, rounds)
        mine = [r for r in saved if (float(r["snr_db"]), float(r["bandwidth_hz"])) == cell]
        assert [int(r["K"]) for r in mine if r["is_best"] == "1"] == [kstar[cell]]
    # x falls as SNR and bandwidth grow; more than one K* over the grid
    x_of = {cell: x for cell, (x,) in xs.items()}
    assert x_of[0.0, 1e5] > x_of[0.0, 1e7] and x_of[0.0, 1e5] > x_of[30.0, 1e5]
    assert len(set(kstar.values())) > 1
    breakeven = plan["breakeven"]
    assert breakeven["off_staircase"] == []
    assert breakeven["rounds_by_k"] == {str(k): r for k, r in rounds.items()}
    assert [
        (b["x_low"], math.inf if b["x_high"] is None else b["x_high"], b["K_star"])
        for b in breakeven["breakpoints"]
    ] == breakpoints(rounds)
    assert result.breakeven == breakeven
    assert (result.out / "kstar_breakeven.png").stat().st_size > 10_000


def test_uniform_selection_is_the_same_on_every_channel(grid_plan):
    """The claim behind repricing, for uniform selection: the numpy system engine re-run
    with another cell's channel and the same seed selects exactly the learning run's
    clients in every round, and prices R(K) rounds as the replay does."""
    result, source = grid_plan
    run_dir = result.out / "learning" / "runs" / "local_steps=5"
    rows = by_cell(result.rows)
    rounds = rows[0.0, 1e5, 5]["rounds_to_target"]
    scenario = load_scenario(
        source,
        [
            "training.local_steps=5",
            "channel.snr_db=0.0",
            "channel.uplink_bandwidth_hz=100000.0",
        ],
    )
    world = build_system_world(scenario)
    recorded, problems = read_round_sets(run_dir, world)
    assert problems == []
    engine = SystemEngine(world)
    selections = []

    def keep(row):
        selections.append(engine.last_clients.client.tolist())

    engine.run(rounds, keep)
    assert selections == [recorded[r].selected for r in range(rounds)]
    assert float(engine.ledger["energy_tx_j"].sum()) == pytest.approx(
        rows[0.0, 1e5, 5]["E_tx_j"], rel=1e-9
    )
    assert engine.cumulative_energy_j == pytest.approx(rows[0.0, 1e5, 5]["E_total_j"], rel=1e-9)


def test_repriced_grid_equals_per_cell_runs_with_drdm(tmp_path):
    """DRDM's learnt (lambda) selection and its probe set, half the devices on an LTE radio
    (promotion, an 11.6 s tail that spans rounds, idle power): the grid priced from one run
    per K equals, exactly, a learning run in every cell."""
    source = scenario_file(
        tmp_path,
        algorithm__name="drdm",
        training__target_value=0.65,
        channel__fading="rayleigh",
    )
    data = yaml.safe_load(open(source))
    node = data["population"]["device_classes"][0]
    node["share"] = 0.5
    data["population"]["device_classes"].append(
        {**node, "name": "lte-node", "radio": {"model": "lte"}}
    )
    open(source, "w").write(yaml.safe_dump(data))
    grid = dict(k_values=[1, 5], snr_db=[0.0, 30.0], bandwidth_hz=[1e5, 1e7])
    repriced = run_plan(source, tmp_path / "repriced", [], options(**grid))
    per_cell = run_plan(source, tmp_path / "per-cell", [], options(per_cell=True, **grid))
    assert (repriced.method, per_cell.method) == (REPRICE, PER_CELL)
    assert {r["priced_by"] for r in repriced.rows} == {"reprice"}
    assert {r["priced_by"] for r in per_cell.rows} == {"run"}
    a, b = by_cell(repriced.rows), by_cell(per_cell.rows)
    assert a.keys() == b.keys() and len(a) == 8
    reached = 0
    for key in a:
        for name in (*FIGURES, *KIND_COLUMNS, "time_to_target_s", "is_best"):
            assert a[key][name] == b[key][name], (key, name, a[key][name], b[key][name])
        reached += a[key]["reached"]
        # plan.csv's total is the sum of every kind it lists, the radio states' included
        assert a[key]["E_total_j"] == pytest.approx(
            sum(a[key][c] for c in KIND_COLUMNS), rel=1e-9
        )
        assert a[key]["E_radio_tail_j"] > 0 and a[key]["E_radio_promotion_j"] > 0
    assert reached == 8  # most (K, cell) reach the target: the equality is about numbers
    assert repriced.best == per_cell.best
    cell = per_cell.out / "cells" / "snr=0__bw=100000" / "runs" / "local_steps=5"
    tail = read_table(cell / "rounds.csv")
    assert sum(float(row["energy_radio_tail_j"]) for row in tail) > 0  # the LTE radios ran
    # the probe sets were recorded and replayed
    run_dir = repriced.out / "learning" / "runs" / "local_steps=5"
    world = build_system_world(load_scenario(source, ["training.local_steps=5"]))
    recorded, _ = read_round_sets(run_dir, world)
    assert any(len(recorded[r].probed) for r in recorded)


def test_outage_refuses_repricing_and_says_why(tmp_path):
    source = scenario_file(tmp_path, channel__outage="rayleigh")
    args = ["plan", source, "--k", "2,5", "--snr-db", "10", "--bandwidth-hz", "1e6"]
    args += ["--out", str(tmp_path / "out"), "--device", "cpu", "--workers", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "method: per-cell" in result.output
    assert "channel.outage=rayleigh" in result.output
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["method"] == PER_CELL
    assert plan["repricing_blockers"][0].startswith("channel.outage=rayleigh: packet errors")
    rows = read_table(tmp_path / "out" / "plan.csv")
    assert [r["priced_by"] for r in rows] == ["run", "run"]
    assert not (tmp_path / "out" / "learning").exists()
    # no break-even view: R(K) may depend on the cell; said in plan.json and on the console
    assert "break-even view skipped: repricing is not valid" in result.output
    assert plan["breakeven"]["skipped"].startswith("repricing is not valid (channel.outage")
    assert not (tmp_path / "out" / "kstar_breakeven.png").exists()
    assert "x" in rows[0]  # the column is there without the staircase
    assert (tmp_path / "out" / "cells" / "snr=10__bw=1e+06" / "sweep.csv").exists()


def test_every_blocker_is_named():
    base = load_scenario("default-theory", ["round.deadline_s=null", "availability.kind=always"])
    assert reprice_blockers(base) == []
    cases = {
        "channel.outage=waterfall": "channel.outage=waterfall",
        "round.deadline_s=2": "round.deadline_s=2",
        "round.overcommit=1.3": "round.overcommit=1.3",
        "availability.kind=diurnal": "availability.kind=diurnal",
    }
    for override, named in cases.items():
        scenario = load_scenario(
            "default-theory", ["round.deadline_s=null", "availability.kind=always", override]
        )
        reasons = reprice_blockers(scenario)
        assert len(reasons) == 1 and reasons[0].startswith(named), (override, reasons)


def test_battery_that_binds_hands_the_cell_to_learning_runs(tmp_path):
    """Small batteries: uploads at 0 dB on 100 kHz drain them to the threshold, so those
    (K, cell) are run, not repriced; the cheap cell stays repriced."""
    source = scenario_file(tmp_path)
    data = yaml.safe_load(open(source))
    data["population"]["device_classes"][0].update(
        battery_j=0.2, initial_charge_min=1.0, battery_threshold=0.5
    )
    open(source, "w").write(yaml.safe_dump(data))
    grid = dict(k_values=[5], snr_db=[0.0, 30.0], bandwidth_hz=[1e5, 1e7])
    result = run_plan(source, tmp_path / "out", [], options(**grid))
    priced = {(r["snr_db"], r["bandwidth_hz"]): r["priced_by"] for r in result.rows}
    assert priced[30.0, 1e7] == "reprice"
    assert priced[0.0, 1e5] == "run"
    plan = json.loads((result.out / "plan.json").read_text())
    assert any("battery" in note for note in plan["not_repriced"])


def test_bad_options_name_the_option(tmp_path):
    with pytest.raises(FedjouleError, match="--k '1,x'"):
        parse_numbers("--k", "1,x", int, minimum=1)
    with pytest.raises(FedjouleError, match="--k '0,2': 0 is below"):
        parse_numbers("--k", "0,2", int, minimum=1)
    with pytest.raises(FedjouleError, match="repeated"):
        parse_numbers("--snr-db", "0,0", float)
    with pytest.raises(FedjouleError, match="--cells '5:1e6': not a cell of the grid"):
        parse_cells("5:1e6", [0.0, 10.0], [1e6])
    assert parse_cells("0:1e6,10:1e6", [0.0, 10.0], [1e6]) == [(0.0, 1e6), (10.0, 1e6)]
    source = scenario_file(tmp_path, training__target_value=None)
    with pytest.raises(FedjouleError, match="plan needs a target: set training.target_value"):
        run_plan(source, tmp_path / "out", [], options())
