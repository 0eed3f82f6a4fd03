"""A run's folder: resolved scenario, results written as rounds finish, checkpoint, resume."""

import os
from collections.abc import Callable
from pathlib import Path

from fedjoule import __version__
from fedjoule.channel.cell import mean_uplink_snr_db
from fedjoule.channel.interference import sinr_columns
from fedjoule.energy_kinds import END_OF_RUN_TAIL, ENERGY_FIELDS
from fedjoule.errors import FedjouleError, RunDiverged
from fedjoule.folders import check_out_folder, stamped_folder
from fedjoule.plugins import file_sha256
from fedjoule.report.plots import plot_run
from fedjoule.report.results import (
    RoundsFile,
    finite_or_none,
    with_round_totals,
    write_clients,
    write_json,
)
from fedjoule.report.timeline import events_text, plot_timeline
from fedjoule.scenarios.loading import load_scenario, scenario_yaml
from fedjoule.scenarios.plausibility import plausibility_warnings
from fedjoule.scenarios.schema import Scenario
from fedjoule.simulator import checkpoint, decisions, protocols
from fedjoule.simulator.engine import Simulation
from fedjoule.simulator.transfers import typical_bandwidth_hz
from fedjoule.simulator.world import World, build_world
from fedjoule.storage import AppendLog, FolderLock, write_text_atomically
from fedjoule.tracking.session import check_tracking_folder
from fedjoule.tracking.session import start_run as start_tracking

CHECKPOINT = checkpoint.NAME
EVENTS = "events.jsonl"
SCENARIO = "scenario.yaml"
HEADER = "# resolved by fedjoule"
# what a run writes besides scenario.yaml (removed when a run starts over in its folder)
OUTPUTS = ("rounds.csv", EVENTS, "clients.csv", "summary.json", "warnings.txt", "tracking.json")


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
    on_round: Callable[[dict], bool | None] | None = None,
    tracking_parent: dict | None = None,
) -> tuple[Path, dict]:
    """Run (or resume) a scenario into `out_dir`; returns the folder and summary.json's content.

    Nothing is created until the scenario, device and data have been checked. A new run
    writes scenario.yaml and a round-0 checkpoint before any result, then a checkpoint
    after every round, so a run killed at any instant continues with `resume=True` (or,
    killed before its first checkpoint, starts again in the same folder). `stop_after`
    ends the run after that many rounds in total, as an interruption would; so does
    `on_round(row)` returning False (after that round is saved). Client-state
    rows beyond `state_memory_mb` spill to `client_state.bin` in the run folder (None:
    never). A run that diverges writes its files and raises RunDiverged. The scenario's
    `tracking:` trackers are given each round's row after its checkpoint (through the
    same seam as `on_round`); `tracking_parent`: the context of the sweep's or plan's
    parent tracked run (fedjoule/tracking/session.py).
    """
    saved = None
    if resume:
        if out_dir is None:
            raise FedjouleError("--resume needs the run folder to continue (--out DIR)")
        out = Path(out_dir)
        if not (out / SCENARIO).is_file():
            raise FedjouleError(f"{out}: no {SCENARIO}, so no run to resume; start a new run")
        if (out / CHECKPOINT).exists():  # checked before scenario.yaml is read
            saved = checkpoint.read_checkpoint(out / CHECKPOINT)
            checkpoint.check_scenario_file(saved, out / CHECKPOINT, out / SCENARIO)
        scenario = load_scenario(out / SCENARIO)
        if saved is not None:
            checkpoint.check_belongs(
                saved, out / CHECKPOINT, scenario.model_dump(mode="json"), out / SCENARIO
            )
    else:
        assert scenario is not None
        out = Path(out_dir) if out_dir else stamped_folder("runs", scenario.name)
        refuse_occupied(out)
        if tracking_parent is None:  # (a sweep's run writes in its parent's folder)
            check_tracking_folder(scenario.tracking, out)

    world = build_world(scenario, data_dir=data_dir, device=device, executor=executor)
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out):
        if not resume:
            refuse_occupied(out)  # (again, under the lock)
            start_folder(out, scenario)
        elif saved is None:  # stopped before its first checkpoint: start over in place
            start_folder(out, None)
        return _play(
            world, out, saved, stop_after, state_memory_mb, on_start, on_round, tracking_parent
        )


def refuse_occupied(out: Path) -> None:
    """A new run goes into a folder without a checkpoint; a folder with files of something
    other than a fedjoule run is refused rather than cleared."""
    check_out_folder(out)  # a folder, or one that can be made
    if (out / CHECKPOINT).exists():
        raise FedjouleError(
            f"{out} already holds a run; resume it with --resume, or choose another --out"
        )
    if not out.exists():
        return
    ours = (out / SCENARIO).is_file() and _starts_with(out / SCENARIO, HEADER)
    if not ours and any((out / name).exists() for name in (*OUTPUTS, SCENARIO)):
        raise FedjouleError(
            f"{out} holds files of something other than a fedjoule run; choose another --out"
        )


def _starts_with(path: Path, text: str) -> bool:
    with path.open("rb") as f:
        return f.read(len(text)) == text.encode()


def start_folder(out: Path, scenario: Scenario | None) -> None:
    """Clear what an interrupted start left and write scenario.yaml (unless None: kept)."""
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    for stale in [*out.glob("client_state*.bin"), *out.glob("timeline_round_*.*")]:
        stale.unlink()
    if scenario is not None:
        header = f"{HEADER} {__version__}; every field is shown\n"
        write_text_atomically(out / SCENARIO, header + scenario_yaml(scenario))


def _play(world, out, saved, stop_after, state_memory_mb, on_start, on_round, tracking_parent):
    """The rounds of a run whose folder is ready (and locked)."""
    scenario = world.scenario
    scenario_data = scenario.model_dump(mode="json")
    budget = None if state_memory_mb is None else state_memory_mb * 2**20
    sim = Simulation(world, budget, out / "client_state.bin")
    extra = protocols.DECLARATIONS[scenario.protocol.kind].round_columns
    rounds_file, events = RoundsFile(out / "rounds.csv", extra), AppendLog(out / EVENTS)

    scenario_file_sha256 = file_sha256(out / SCENARIO)

    def save() -> None:
        files = {"rounds.csv": rounds_file.log.mark(), EVENTS: events.mark()}
        state = sim.state_dict()
        checkpoint.save_checkpoint(
            out / CHECKPOINT,
            state,
            scenario_data,
            sim.progress.next_round,
            files,
            scenario_file_sha256,
        )
        sim.store.commit()  # client-state files the new checkpoint no longer names go

    if saved is None:
        warnings = plausibility_warnings(scenario)
        if warnings:
            write_text_atomically(out / "warnings.txt", "".join(w + "\n" for w in warnings))
        save()  # round 0: from here on the folder can always be resumed
    else:
        sim.load_state_dict(saved["simulation"])
        rounds_file.log.restore(saved["files"]["rounds.csv"], f"the run in {out}")
        events.restore(saved["files"][EVENTS], f"the run in {out}")
    tracking = start_tracking(
        scenario, out, rounds_file.columns, sim.progress.next_round, tracking_parent
    )
    if tracking is not None:
        on_round = tracking.chain(on_round)
    if on_start:
        on_start(world, sim.progress.next_round)

    def record(row: dict) -> bool | None:
        rounds_file.append(row)
        if scenario.output.events:
            events.append(events_text(row["round"], sim.event_records).encode())
        if row["round"] in scenario.output.timeline_rounds:
            plot_timeline(
                out / f"timeline_round_{row['round']}.png",
                row,
                sim.last_records,
                scenario.round.deadline_s,
            )
        save()
        return on_round(row) if on_round else None

    last = (
        scenario.training.rounds
        if stop_after is None
        else min(stop_after, scenario.training.rounds)
    )
    try:
        sim.run(last, record)
    except BaseException:
        if tracking is not None:
            tracking.abandon()
        raise

    sim.store.close()
    write_clients_file(out / "clients.csv", sim)
    summary = with_round_totals(sim.summary(), out / "rounds.csv", scenario, sim.ledger)
    summary["warnings"] += sim.radios.ranges.warnings()  # transfers above a measured range
    write_json(out / "summary.json", summary)
    plots = plot_run(out) if sim.finished() else []
    if tracking is not None:
        timelines = sorted(out.glob("timeline_round_*.png"))
        tracking.finish(sim.finished(), summary, [*plots, *timelines])
    if summary.get("diverged_at_round") is not None:
        raise RunDiverged(f"{out}: {summary.get('diverged_reason')}")
    return out, summary


def write_clients_file(path: Path, sim: Simulation) -> None:
    """clients.csv, then the protocol's per-client counts and, where a policy decided
    some, the decided fields' per-client means (simulator/decisions.py)."""
    extra = protocols.DECLARATIONS[sim.world.scenario.protocol.kind].client_columns
    means = decisions.mean_columns(sim.ledger)
    write_clients(path, client_rows(sim, means), [*extra, *means])


def client_rows(sim: Simulation, means: dict | None = None) -> list[dict]:
    """clients.csv's rows; `means`: the decided fields' per-client means (decisions.py)."""
    world = sim.world
    pop, scenario = world.population, world.scenario
    # each client's band in its own cell: B/(s N_c/N) fdma, B tdma, B/R ofdma
    share_hz = typical_bandwidth_hz(scenario, pop.size, world.cell.serving_cell)
    snr_db = mean_uplink_snr_db(scenario.channel, world.cell, pop.tx_power_w, share_hz)
    flagged = world.algorithm.detected(sim.state)
    declared = protocols.DECLARATIONS[scenario.protocol.kind]  # its per-client counts
    cochannel = getattr(scenario.channel, "interference", "none") == "cochannel"
    rows = []
    for k in range(pop.size):
        energy = {n: float(sim.ledger[n][k]) for n in ENERGY_FIELDS}
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
                **(sinr_columns(sim.sinr_db.get(k, [])) if cochannel else {}),
                "cpu_freq_hz": float(pop.cpu_freq_hz[k]),
                "tx_power_w": float(pop.tx_power_w[k]),
                "selected": int(sim.ledger["selected"][k]),
                "arrived": int(sim.ledger["arrived"][k]),
                **energy,
                "energy_total_j": sum(energy.values()),
                END_OF_RUN_TAIL: float(sim.ledger[END_OF_RUN_TAIL][k]),
                "battery_initial_j": float(pop.battery_initial_j[k]),
                "battery_left_j": float(sim.battery_j[k]),
                "freeloader": int(world.freeloader[k]),
                "flagged": None if flagged is None else int(flagged[k]),
                **{name: int(sim.ledger[name][k]) for name in declared.ledger},
                **{name: finite_or_none(values[k]) for name, values in (means or {}).items()},
            }
        )
    return rows
