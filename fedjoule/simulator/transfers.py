"""Step 4 of a round: the selected clients' SimPy processes over cells, media and backhaul.

Builds each client's plan (downlink, compute, upload attempts with packet errors and
retransmissions, backhaul delays), one uplink medium per cell (each cell its own bandwidth
pool), the stops (deadline, going offline, battery at its threshold, over-commit quota
reached), and runs them until every client arrived or was dropped.
"""

import math

import numpy as np
import simpy

from fedjoule import rng
from fedjoule.channel.cell import round_fading, round_links
from fedjoule.channel.fading import fading_power
from fedjoule.channel.link import Link, airtime_s
from fedjoule.channel.medium import make_medium
from fedjoule.channel.outage import attempt_error_probability
from fedjoule.devices.battery import budget_j
from fedjoule.simulator.client import (
    BatteryGuard,
    ClientPlan,
    ClientRecord,
    client_round,
    interrupt_at,
)


def nominal_bandwidth_hz(channel, clients_in_cell: int) -> float:
    """A client's bandwidth when the round starts: B/m (fdma), B (tdma), B/R (ofdma)."""
    if channel.access == "fdma":
        return channel.uplink_bandwidth_hz / max(1, clients_in_cell)
    if channel.access == "tdma":
        return channel.uplink_bandwidth_hz
    return channel.uplink_bandwidth_hz / channel.resource_blocks


def mean_snr(channel, cell, tx_power_w: float, client: int, bandwidth_hz: float) -> float:
    """Fading-free uplink SNR on `bandwidth_hz`: p G / (N0 b), or the scenario's snr_db."""
    if cell.large_scale_gain is None:
        return float(10 ** (channel.snr_db / 10))
    return (
        tx_power_w * float(cell.large_scale_gain[client]) / (cell.noise_psd_w_per_hz * bandwidth_hz)
    )


def attempt_plan(
    channel, cell, seed: int, r: int, k: int, uplink: Link, tx_power_w: float, bandwidth_hz: float
):
    """Links and failures of the 1 + max_retx possible attempts (None, None: one, no error)."""
    attempts = 1 + channel.max_retx
    fails = None
    if channel.outage != "none":
        q = float(
            attempt_error_probability(channel, mean_snr(channel, cell, tx_power_w, k, bandwidth_hz))
        )
        fails = list(rng.stream(seed, "outage", r, k).random(attempts) < q)
    links = None
    if channel.fading_per == "transmission" and attempts > 1:
        # retransmissions see fresh fading; the first attempt keeps the round's draw
        gen = rng.stream(seed, "fading", r, k)
        redraw = fading_power(gen, channel.fading, attempts - 1, k_factor=channel.rician_k)
        links = [uplink]
        for h in redraw:
            if cell.large_scale_gain is None:
                links.append(Link(tx_power_w, snr_fixed=10 ** (channel.snr_db / 10) * h))
            else:
                links.append(
                    Link(tx_power_w, float(cell.large_scale_gain[k]) * h, cell.noise_psd_w_per_hz)
                )
    return links, fails


def play_clients(env: simpy.Environment, sim, r: int, start_s: float, selected, keep: int, cost):
    """SimPy process body: run the selected clients' rounds; returns their records.

    `keep` is the number of arrivals the server waits for (over-commit: once `keep`
    updates arrived, the clients still running are stopped and their updates discarded).
    `cost(k)` gives client k's `down_bits`, `compute_s`, `compute_energy_j` and `up_bits`.
    """
    world, scenario = sim.world, sim.world.scenario
    channel, seed, pop = scenario.channel, scenario.seed, world.population
    fading = round_fading(channel, pop.size, seed, r)
    uplinks, downlinks = round_links(channel, world.cell, pop.tx_power_w, selected, fading)
    serving = (
        world.cell.serving_cell
        if world.cell.serving_cell is not None
        else np.zeros(pop.size, dtype=int)
    )
    load = np.bincount(serving[selected], minlength=world.topology.n_cells)
    media = {
        int(c): make_medium(
            env, channel.access, channel.uplink_bandwidth_hz, channel.resource_blocks
        )
        for c in np.flatnonzero(load)
    }
    deadline_s = start_s + scenario.round.deadline_s if scenario.round.deadline_s else math.inf
    records, processes = [], []
    for k, uplink, downlink in zip(selected, uplinks, downlinks, strict=True):
        k, c = int(k), int(serving[k])
        own = cost(k)
        links, fails = attempt_plan(
            channel,
            world.cell,
            seed,
            r,
            k,
            uplink,
            float(pop.tx_power_w[k]),
            nominal_bandwidth_hz(channel, int(load[c])),
        )
        plan = ClientPlan(
            client=k,
            downlink_s=float(
                airtime_s(own["down_bits"], downlink.rate_bps(channel.downlink_bandwidth_hz))
            ),
            rx_power_w=float(pop.rx_power_w[k]),
            compute_s=own["compute_s"],
            compute_energy_j=own["compute_energy_j"],
            uplink_bits=own["up_bits"],
            uplink=uplink,
            attempt_links=links,
            attempt_fails=fails,
            backhaul_down_s=world.topology.backhaul_delay_s(k, own["down_bits"]),
            backhaul_up_s=world.topology.backhaul_delay_s(k, own["up_bits"]),
            cell=c,
        )
        record = ClientRecord(k)
        guard = BatteryGuard(env, budget_j(sim.battery_j, pop, world.availability, k, start_s))
        process = env.process(client_round(env, plan, media[c], record, guard))
        guard.process = process
        stop_s, cause = min(
            (deadline_s, "deadline"),
            (world.availability.next_offline_s(k, start_s, r), "offline"),
        )
        if stop_s < math.inf:
            env.process(interrupt_at(env, process, stop_s, cause))
        records.append(record)
        processes.append(process)
    if len(processes) > keep:
        _stop_after_first(keep, records, processes)
    yield env.all_of(processes)
    if len(processes) > keep:  # arrivals at the same instant: keep the first `keep`
        arrived = sorted(
            (rec for rec in records if rec.outcome == "arrived"), key=lambda rec: rec.end_s
        )
        for rec in arrived[keep:]:
            rec.outcome = "overcommit"
    return records


def overcommit_count(clients_per_round: int, factor: float) -> int:
    """ceil(f m) clients to select for m wanted arrivals."""
    return math.ceil(factor * clients_per_round - 1e-9)  # 1e-9: 1.3 * 10 is 13.000000000000002


def _stop_after_first(keep: int, records: list[ClientRecord], processes: list) -> None:
    """Over-commit (Bonawitz et al., MLSys 2019): once `keep` updates arrived, stop the rest."""
    arrivals = []

    def done(_event):
        if sum(rec.outcome == "arrived" for rec in records) >= keep and not arrivals:
            arrivals.append(True)
            for process in processes:
                if process.is_alive:
                    process.interrupt("overcommit")

    for process in processes:
        process.callbacks.append(done)
