"""A run's folder: resolved scenario, results written as rounds finish, checkpoint, resume."""

import os
from collections.abc import Callable
from pathlib import Path

import torch

from fedjoule import __version__
from fedjoule.channel.cell import mean_uplink_snr_db
from fedjoule.errors import FedjouleError
from fedjoule.folders import stamped_folder
from fedjoule.report.plots import plot_run
from fedjoule.report.results import RoundsFile, write_clients, write_json
from fedjoule.report.timeline import append_events, plot_timeline, truncate_events
from fedjoule.scenarios.loading import load_scenario, scenario_yaml
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.world import World, build_world

CHECKPOINT = "checkpoint.pt"
EVENTS = "events.jsonl"


def run_scenario(
    scenario: Scenario | None,
    out_dir: str | os.PathLike | None = None,
    *,
    data_dir=None,
    device: str = "auto",
    executor: str = "vectorised",
    resume: bool = False,
    stop_after: int | None = None,
    state_memory_mb: float | None = 2048,
    on_start: Callable[[World, int], None] | None = None,
    on_round: Callable[[dict], None] | None = None,
) -> tuple[Path, dict]:
    """Run (or resume) a scenario into `out_dir`; returns the folder and summary.json's content.

    `stop_after` ends the run after that many rounds in total, as an interruption would
    (the checkpoint allows `resume=True` to finish it). Client-state rows beyond
    `state_memory_mb` spill to `client_state.bin` in the run folder (None: never).
    """
    if resume:
        if out_dir is None:
            raise FedjouleError("--resume needs the run folder to continue (--out DIR)")
        out = Path(out_dir)
        if not (out / CHECKPOINT).exists():
            raise FedjouleError(f"{out}: no {CHECKPOINT} to resume from; start a new run instead")
        scenario = load_scenario(out / "scenario.yaml")
    else:
        assert scenario is not None
        out = Path(out_dir) if out_dir else stamped_folder("runs", scenario.name)
        if (out / "rounds.csv").exists():
            raise FedjouleError(
                f"{out} already holds a run; resume it with --resume, or choose another --out"
            )
        out.mkdir(parents=True, exist_ok=True)
        header = f"# resolved by fedjoule {__version__}; every field is shown\n"
        (out / "scenario.yaml").write_text(header + scenario_yaml(scenario))

    world = build_world(scenario, data_dir=data_dir, device=device, executor=executor)
    budget = None if state_memory_mb is None else state_memory_mb * 2**20
    sim = Simulation(world, budget, out / "client_state.bin")
    rounds_file = RoundsFile(out / "rounds.csv")
    if resume:
        sim.load_state_dict(torch.load(out / CHECKPOINT, weights_only=False))
        rounds_file.truncate_to(sim.progress.next_round)
        truncate_events(out / EVENTS, sim.progress.next_round)
    if on_start:
        on_start(world, sim.progress.next_round)

    def record(row: dict) -> None:
        rounds_file.append(row)
        if scenario.output.events:
            append_events(out / EVENTS, row["round"], sim.last_records)
        if row["round"] in scenario.output.timeline_rounds:
            plot_timeline(
                out / f"timeline_round_{row['round']}.png",
                row,
                sim.last_records,
                scenario.round.deadline_s,
            )
        tmp = out / (CHECKPOINT + ".tmp")
        torch.save(sim.state_dict(), tmp)
        os.replace(tmp, out / CHECKPOINT)
        sim.store.commit()  # client-state files the new checkpoint no longer names go
        if on_round:
            on_round(row)

    last = (
        scenario.training.rounds
        if stop_after is None
        else min(stop_after, scenario.training.rounds)
    )
    sim.run(last, record)

    sim.store.close()
    write_clients(out / "clients.csv", client_rows(sim))
    summary = sim.summary()
    write_json(out / "summary.json", summary)
    if sim.finished():
        plot_run(out)
    return out, summary


def client_rows(sim: Simulation) -> list[dict]:
    world = sim.world
    pop, scenario = world.population, world.scenario
    share_hz = scenario.channel.uplink_bandwidth_hz / scenario.training.clients_per_round
    snr_db = mean_uplink_snr_db(scenario.channel, world.cell, pop.tx_power_w, share_hz)
    flagged = world.algorithm.detected(sim.state)
    rows = []
    for k in range(pop.size):
        energy = {
            n: float(sim.ledger[n][k]) for n in ("energy_compute_j", "energy_tx_j", "energy_rx_j")
        }
        rows.append(
            {
                "client": k,
                "device_class": pop.class_names[pop.class_index[k]],
                "train_samples": len(world.data.client_train[k]),
                "cell": 0 if world.cell.serving_cell is None else int(world.cell.serving_cell[k]),
                "distance_m": None
                if world.cell.distance_m is None
                else float(world.cell.distance_m[k]),
                "mean_uplink_snr_db": float(snr_db[k]),
                "cpu_freq_hz": float(pop.cpu_freq_hz[k]),
                "tx_power_w": float(pop.tx_power_w[k]),
                "selected": int(sim.ledger["selected"][k]),
                "arrived": int(sim.ledger["arrived"][k]),
                **energy,
                "energy_total_j": sum(energy.values()),
                "battery_initial_j": float(pop.battery_initial_j[k]),
                "battery_left_j": float(sim.battery_j[k]),
                "freeloader": int(world.freeloader[k]),
                "flagged": None if flagged is None else int(flagged[k]),
            }
        )
    return rows
