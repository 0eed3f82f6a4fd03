"""A system-only run's folder (`fedjoule run --no-train`): the engine choice and its
notices, rounds.csv, clients.csv and summary.json (docs/system-engine.md)."""

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedjoule import __version__
from fedjoule.channel.cell import mean_uplink_snr_db
from fedjoule.channel.interference import sinr_columns
from fedjoule.energy_kinds import END_OF_RUN_TAIL, ENERGY_FIELDS
from fedjoule.errors import FedjouleError
from fedjoule.folders import stamped_folder
from fedjoule.report.results import CLIENT_COLUMNS, RoundsFile, with_round_totals, write_json
from fedjoule.scenarios.loading import scenario_yaml
from fedjoule.scenarios.schema import Scenario
from fedjoule.scenarios.schema.policy import LOSS_DRIVEN
from fedjoule.simulator import decisions, protocols
from fedjoule.simulator.policy_step import refusal_without_training
from fedjoule.simulator.system import SystemEngine, unsupported
from fedjoule.simulator.system_simpy import SimpySystemSimulation
from fedjoule.simulator.system_world import (
    SystemWorld,
    algorithm_declaration,
    build_system_world,
)
from fedjoule.simulator.transfers import typical_bandwidth_hz
from fedjoule.simulator.vector_radio import RadioBatteryStop
from fedjoule.storage import AppendLog, replace_atomically, write_text_atomically

ENGINES = ("auto", "numpy", "simpy")


def choose_engine(scenario: Scenario, engine: str) -> tuple[str, list[str]]:
    """The engine to use and the notices to print: what the run does not simulate."""
    if engine not in ENGINES:
        raise FedjouleError(f"--engine {engine!r}: allowed: {', '.join(ENGINES)}")
    notices = []
    if scenario.policy.select in LOSS_DRIVEN:  # neither engine has a loss without training
        raise FedjouleError(refusal_without_training(scenario.policy.select))
    algorithm = algorithm_declaration(scenario.algorithm)
    if algorithm.needs_probe or algorithm.learnt_selection:
        notices.append(
            f"algorithm.name={scenario.algorithm.name}: without training its learnt selection "
            "weights and loss-probe set do not exist; selection is uniform and no probe set "
            "is simulated"
        )
    reasons = unsupported(scenario)
    if engine == "numpy" and reasons:
        raise FedjouleError(
            "the numpy system engine does not support " + "; ".join(reasons)
            + "; use --engine simpy or auto (the SimPy engine with training skipped)"
        )  # fmt: skip
    if engine == "auto":
        engine = "simpy" if reasons else "numpy"
        if reasons:
            notices.append(
                "the numpy engine does not support " + "; ".join(reasons)
                + ": falling back to the SimPy engine with training skipped (slower)"
            )  # fmt: skip
    if engine == "numpy" and scenario.availability.kind == "markov":
        notices.append(
            "availability.kind=markov: the numpy engine draws the same on/off process from "
            "its own streams, so rounds differ from the SimPy engine's (same law)"
        )
    return engine, notices


def check_system(scenario: Scenario) -> None:
    """What `run --no-train` checks before it makes its folder: the engine, the world."""
    choose_engine(scenario, "auto")
    build_system_world(scenario)


def run_system(
    scenario: Scenario,
    out_dir: str | os.PathLike | None = None,
    *,
    engine: str = "auto",
    on_start: Callable[[SystemWorld, str, list[str]], None] | None = None,
    on_round: Callable[[dict], None] | None = None,
    clients_csv: bool = True,
) -> tuple[Path, dict]:
    """Run a scenario without training into `out_dir`; returns the folder and the summary."""
    auto = engine == "auto"
    engine, notices = choose_engine(scenario, engine)
    out = Path(out_dir) if out_dir else stamped_folder("runs", f"{scenario.name}-system")
    if (out / "summary.json").exists():
        raise FedjouleError(f"{out} already holds a run; choose another --out")
    if (out / "rounds.csv").exists():  # an interrupted system-only run starts over
        if (
            not (out / "scenario.yaml").is_file()
            or "run without training"
            not in ((out / "scenario.yaml").read_text(errors="replace").split("\n", 1)[0])
        ):
            raise FedjouleError(f"{out} holds another run's files; choose another --out")
        for name in ("rounds.csv", "events.jsonl", "clients.csv"):
            (out / name).unlink(missing_ok=True)
    tic = time.perf_counter()
    world = build_system_world(scenario)  # (before anything is created)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    header = f"# resolved by fedjoule {__version__}; every field is shown; run without training\n"
    write_text_atomically(out / "scenario.yaml", header + scenario_yaml(scenario))
    if on_start:
        on_start(world, engine, notices)
    extra = protocols.DECLARATIONS[scenario.protocol.kind].round_columns
    rounds_file = RoundsFile(out / "rounds.csv", extra)
    last = scenario.training.rounds
    if engine == "numpy":
        sim = SystemEngine(world)
        try:
            sim.run(last, lambda row: (rounds_file.append(row), on_round and on_round(row)))
        except RadioBatteryStop as stop:
            if not auto:  # --engine numpy: refused, its files gone
                for name in ("rounds.csv", "scenario.yaml"):
                    (out / name).unlink(missing_ok=True)
                if created:
                    out.rmdir()
                raise FedjouleError(f"{stop}; use --engine simpy or auto") from None
            # a battery stop the numpy engine does not place: start over on the SimPy engine
            engine = "simpy"
            if on_start:
                notice = f"{stop}: starting over on the SimPy engine with training skipped"
                on_start(world, engine, [notice])
            (out / "rounds.csv").unlink(missing_ok=True)
            rounds_file = RoundsFile(out / "rounds.csv", extra)
    if engine == "numpy":
        ledger, battery, sim_time_s = sim.ledger, sim.battery_j, sim.sim_time_s
        end_tail_j = sim.end_of_run_tail_energy_j
    else:
        sim = SimpySystemSimulation(world)
        sim.run(last, _simpy_recorder(sim, out, rounds_file, on_round))
        ledger, battery, sim_time_s = sim.ledger, sim.battery_j, sim.progress.sim_time_s
        end_tail_j = sim.progress.end_of_run_tail_energy_j
    if clients_csv:
        sinr_db = sim.sinr_db if engine == "simpy" else None
        write_system_clients(out / "clients.csv", world, ledger, battery, sinr_db)
    summary = system_summary(world, ledger, battery, sim_time_s, last, engine, end_tail_j)
    if engine == "simpy" and sim.protocol is not None:
        summary.update(sim.protocol.summary())
    summary = with_round_totals(summary, out / "rounds.csv", scenario, ledger)
    ranges = sim.radio.ranges if engine == "numpy" else sim.radios.ranges
    summary["warnings"] += ranges.warnings()  # transfers above a measured range
    summary["wall_time_s"] = time.perf_counter() - tic
    write_json(out / "summary.json", summary)
    return out, summary


def _simpy_recorder(sim, out: Path, rounds_file: RoundsFile, on_round):
    # deferred: matplotlib (validate --no-train and the numpy engine draw nothing)
    from fedjoule.report.timeline import events_text, plot_timeline

    scenario = sim.world.scenario
    events = AppendLog(out / "events.jsonl")

    def record(row: dict) -> None:
        rounds_file.append(row)
        if scenario.output.events:
            events.append(events_text(row["round"], sim.event_records).encode())
        if row["round"] in scenario.output.timeline_rounds:
            png = out / f"timeline_round_{row['round']}.png"
            plot_timeline(png, row, sim.last_records, scenario.round.deadline_s)
        if on_round:
            on_round(row)

    return record


def system_summary(world, ledger, battery_j, sim_time_s, rounds, engine, end_tail_j) -> dict:
    energy = {n: float(ledger[n].sum()) for n in ENERGY_FIELDS}
    return {
        "training": "skipped",
        "engine": engine,
        "clients": world.population.size,
        "rounds_completed": rounds,
        "sim_time_s": sim_time_s,
        "energy_total_j": sum(energy.values()),
        **energy,
        END_OF_RUN_TAIL: float(ledger[END_OF_RUN_TAIL].sum()),
        "end_of_run_tail": world.scenario.energy.end_of_run_tail,
        "end_of_run_tail_energy_j": end_tail_j,
        "battery_used_j": float((world.population.battery_initial_j - battery_j).sum()),
        "model_params": world.n_params,
        "uplink_bits_per_client": world.uplink_bits,
    }


def write_system_clients(
    path: Path, world: SystemWorld, ledger: dict, battery_j, sinr_db: dict | None = None
) -> None:
    """clients.csv (report/results.py columns) for every client, column-wise and fast; the
    columns that need learning (flagged) stay empty. channel.interference=cochannel: the
    SINR columns from `sinr_db` (each client's upload SINRs in dB)."""
    pop, scenario = world.population, world.scenario
    # each client's band in its own cell: B/(s N_c/N) fdma, B tdma, B/R ofdma
    share_hz = typical_bandwidth_hz(scenario, pop.size, world.serving_cell)
    energy = {n: ledger[n] for n in ENERGY_FIELDS}
    n = pop.size
    empty = np.full(n, "", dtype=object)
    columns = {
        "client": np.arange(n),
        "device_class": np.asarray(pop.class_names, dtype=object)[pop.class_index],
        "train_samples": empty if world.client_samples is None else world.client_samples,
        "cell": world.serving_cell,
        "distance_m": empty if world.cell.distance_m is None else world.cell.distance_m,
        "mean_uplink_snr_db": mean_uplink_snr_db(
            scenario.channel, world.cell, pop.tx_power_w, share_hz
        ),
        "cpu_freq_hz": pop.cpu_freq_hz,
        "tx_power_w": pop.tx_power_w,
        "selected": ledger["selected"].astype(int),
        "arrived": ledger["arrived"].astype(int),
        **energy,
        "energy_total_j": sum(energy.values()),
        END_OF_RUN_TAIL: ledger[END_OF_RUN_TAIL],
        "battery_initial_j": pop.battery_initial_j,
        "battery_left_j": battery_j,
        "freeloader": world.freeloader.astype(int),
        "flagged": empty,
    }
    names = list(CLIENT_COLUMNS)
    for name, values in decisions.mean_columns(ledger).items():  # where a policy decided
        columns[name] = np.array([v if v == v else "" for v in values.tolist()], dtype=object)
        names.append(name)
    if scenario.channel.interference == "cochannel" and sinr_db is not None:
        sinr = [sinr_columns(sinr_db.get(k, [])) for k in range(n)]
        for name in ("mean_uplink_sinr_db", "p5_uplink_sinr_db"):
            columns[name] = np.array([empty[0] if s[name] is None else s[name] for s in sinr])
        at = names.index("mean_uplink_snr_db") + 1
        names[at:at] = ["mean_uplink_sinr_db", "p5_uplink_sinr_db"]
    values = [columns[c].tolist() for c in names]

    def write(f) -> None:
        f.write((",".join(names) + "\n").encode())
        for start in range(0, n, 100_000):  # repr: floats round-trip, as in report/results.py
            rows = zip(*(v[start : start + 100_000] for v in values), strict=True)
            f.write("".join(",".join(map(_text, row)) + "\n" for row in rows).encode())

    replace_atomically(path, write)


def _text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)
