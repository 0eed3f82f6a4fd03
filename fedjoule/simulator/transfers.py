"""Step 4 of a round: the selected clients' SimPy processes over cells, media and backhaul.

Builds each client's plan (downlink, compute, upload attempts with packet errors and
retransmissions, backhaul delays), one uplink medium per cell (each cell its own bandwidth
pool), the stops (deadline, going offline, battery at its threshold, over-commit quota
reached), and runs them until every client arrived or was dropped.
"""

import functools
import math
from dataclasses import replace

import numpy as np
import simpy

from fedjoule import rng
from fedjoule.channel.cell import round_fading, round_links
from fedjoule.channel.fading import fading_power
from fedjoule.channel.interference import CochannelNetwork, cochannel_matrix, reuse_groups
from fedjoule.channel.link import Link, airtime_s
from fedjoule.channel.medium import InTurn, OwnBand, SlotOrder, Weighted, make_medium
from fedjoule.channel.outage import attempt_error_probability, fixed_rate_fails
from fedjoule.channel.trace import (
    ThroughputTrace,
    TraceMedium,
    client_offsets_s,
    read_trace,
    section_arguments,
)
from fedjoule.channel.units import dbm_to_w
from fedjoule.devices import power_control
from fedjoule.devices.battery import budget_j
from fedjoule.devices.fedscale import load_capacity
from fedjoule.devices.radio import receive_power_w
from fedjoule.errors import FedjouleError
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


def allocated_bandwidth_hz(scenario, band_share, cells: np.ndarray) -> np.ndarray | None:
    """Each allocated client's uplink band (Hz) from a policy's shares s_k of its cell's
    band B (round.Allocation.band_share; None: the shared medium, as without a policy):
    fdma s_k B, the band it is guaranteed and its weight in the cell's weighted sharing
    (medium.FdmaMedium: B s_k / sum of the uploading s_j at each instant); ofdma
    floor(s_k R) resource blocks of B/R, held for the whole upload; tdma B, in the slot
    order (slot_ranks). Refused with a FedjouleError: shares not in (0, 1] or summing above
    1 in a cell, co-channel interference, measured uplinks."""
    if band_share is None:
        return None
    channel = scenario.channel
    share = np.asarray(band_share, dtype=float)
    refused = _band_share_refusal(scenario, share, cells)
    if refused:
        raise FedjouleError(f"policy bandwidth shares: {refused}")
    if channel.access == "fdma":
        return share * channel.uplink_bandwidth_hz
    if channel.access == "tdma":  # the whole band, in the slot order (slot_ranks)
        return np.full(share.shape, float(channel.uplink_bandwidth_hz))
    blocks = np.floor(share * channel.resource_blocks + 1e-9)  # 1e-9: 0.3 x 10 is 2.99..
    few = np.flatnonzero(blocks < 1)
    if few.size:
        raise FedjouleError(
            f"policy bandwidth shares: share {share[few[0]]:g} is below one OFDMA resource "
            f"block (1/channel.resource_blocks = {1 / channel.resource_blocks:g})"
        )
    return blocks * (channel.uplink_bandwidth_hz / channel.resource_blocks)


def _band_share_refusal(scenario, share: np.ndarray, cells: np.ndarray) -> str:
    """Why these shares cannot be played (empty: they can)."""
    channel = scenario.channel
    if getattr(channel, "interference", "none") == "cochannel":
        return "not modelled with channel.interference=cochannel"
    trace = getattr(channel, "trace", None)
    if getattr(trace, "uplink", None) is not None or getattr(
        scenario.population, "capacity_trace", None
    ):
        return "a measured uplink (channel.trace.uplink, population.capacity_trace) has no band"
    if share.shape != cells.shape:
        return f"{share.size} shares for {cells.size} clients"
    bad = np.flatnonzero(~((share > 0) & (share <= 1)))
    if bad.size:
        return f"share {float(share[bad[0]])!r} of the round's client {bad[0]} is not in (0, 1]"
    per_cell = np.bincount(cells, weights=share)
    if per_cell.max(initial=0.0) > 1 + 1e-9:  # 1e-9: float round-off of shares summing to 1
        c = int(np.argmax(per_cell))
        return f"they sum to {per_cell[c]:.12g} > 1 in cell {c}"
    return ""


def slot_ranks(scenario, band_share, cells: np.ndarray) -> np.ndarray | None:
    """Under tdma, each allocated client's place in its cell's slot order (0 first): larger
    shares first, equal ones in the allocation's order; None: first come, first served."""
    if band_share is None or scenario.channel.access != "tdma":
        return None
    order = np.lexsort((-np.asarray(band_share, dtype=float), cells))  # by cell, then share
    ranks = np.empty(len(cells), dtype=int)
    starts = np.searchsorted(cells[order], cells[order])  # each cell's first position
    ranks[order] = np.arange(len(cells)) - starts
    return ranks


def typical_bandwidth_hz(scenario, n_clients: int, serving_cell=None) -> np.ndarray:
    """The band clients.csv's mean_uplink_snr_db is on, per client: nominal_bandwidth_hz of
    a round whose selection, s = ceil(overcommit m) of the n_clients, falls on the cells in
    proportion to their clients, so that client k's cell c holds s N_c / N of them (each
    cell has its own band B): B / (s N_c / N) fdma, B tdma, B/R ofdma. `serving_cell`: each
    client's cell (None: one cell)."""
    m, f = scenario.training.clients_per_round, scenario.round.overcommit
    selected = min(overcommit_count(m, f), n_clients)
    cells = np.zeros(n_clients, dtype=int) if serving_cell is None else np.asarray(serving_cell)
    in_cell = np.bincount(cells, minlength=int(cells.max(initial=0)) + 1)[cells]
    expected = selected * in_cell / n_clients if n_clients else np.ones(0)
    channel = scenario.channel
    if channel.access == "fdma":
        return channel.uplink_bandwidth_hz / np.maximum(1.0, expected)
    return np.full(n_clients, nominal_bandwidth_hz(channel, selected))


def with_power_control(scenario, population, cell):
    """The population with each client's uplink transmit power under its class's
    radio.power_control (devices/power_control.py) on its typical band; unchanged (the
    same object) when no class runs power control."""
    if not power_control.in_use(scenario.population):
        return population
    band_hz = typical_bandwidth_hz(scenario, population.size, cell.serving_cell)
    power_w = power_control.tx_power_w(
        scenario.population, population, cell.large_scale_gain, band_hz
    )
    return replace(population, tx_power_w=power_w)


def mean_snr(channel, cell, tx_power_w: float, client: int, bandwidth_hz: float) -> float:
    """Fading-free uplink SNR on `bandwidth_hz`: p G / (N0 b), or the scenario's snr_db."""
    if cell.large_scale_gain is None:
        return float(10 ** (channel.snr_db / 10))
    return (
        tx_power_w * float(cell.large_scale_gain[client]) / (cell.noise_psd_w_per_hz * bandwidth_hz)
    )


def attempt_fades(channel, seed: int, r: int, k: int, round_fade: float) -> np.ndarray:
    """|h|^2 of client k's 1 + max_retx possible upload attempts in round r: the round's
    draw for the first; for the retransmissions fresh draws (stream ("fading", r, k)) when
    fading_per is transmission, else the round's draw again."""
    fades = np.full(1 + channel.max_retx, float(round_fade))
    if channel.fading_per == "transmission" and channel.max_retx > 0:
        gen = rng.stream(seed, "fading", r, k)
        fades[1:] = fading_power(gen, channel.fading, channel.max_retx, k_factor=channel.rician_k)
    return fades


def attempt_fails(channel, seed: int, r: int, k: int, snr: float, fades: np.ndarray) -> list:
    """Which attempts fail. rate=fixed: exactly those whose fade is too deep for r at the
    fading-free SNR `snr`; adaptive: independent draws of the `outage` model's error
    probability at `snr` (stream ("outage", r, k))."""
    if channel.rate == "fixed":
        return list(fixed_rate_fails(snr, fades, channel.spectral_efficiency_bits_per_hz))
    q = float(attempt_error_probability(channel, snr))
    return list(outage_fails(seed, r, k, q, len(fades)))


def outage_fails(seed: int, r: int, k: int, q, attempts: int) -> np.ndarray:
    """Independent packet errors of client k's `attempts` in round r at error probability q
    (stream ("outage", r, k)); both engines draw them here."""
    return rng.stream(seed, "outage", r, k).random(attempts) < q


def _faded_link(channel, cell, k: int, tx_power_w: float, fade: float) -> Link:
    """Client k's uplink Link at fading power `fade` (a retransmission's fresh draw)."""
    if cell.large_scale_gain is None:
        return Link(tx_power_w, snr_fixed=10 ** (channel.snr_db / 10) * fade)
    return Link(tx_power_w, float(cell.large_scale_gain[k]) * fade, cell.noise_psd_w_per_hz)


def attempt_plan(
    channel,
    cell,
    seed: int,
    r: int,
    k: int,
    uplink: Link,
    tx_power_w: float,
    bandwidth_hz: float,
    fades: np.ndarray | None = None,
):
    """Links and failures of the 1 + max_retx possible attempts (None, None: one, no error).

    `fades`: the attempts' |h|^2 (attempt_fades; rate=fixed needs them, for the failures);
    the first attempt keeps `uplink` (the round's draw). rate=fixed: every Link sends at
    b r. `bandwidth_hz`: the nominal band the fading-free SNR of the failures is on.
    """
    attempts = 1 + channel.max_retx
    fixed = channel.rate == "fixed"
    if fades is None:
        if fixed:
            raise ValueError("attempt_plan: channel.rate=fixed needs the attempts' fades")
        fades = attempt_fades(channel, seed, r, k, math.nan)  # the first is never used
    fails = None
    if fixed or channel.outage != "none":
        snr = mean_snr(channel, cell, tx_power_w, k, bandwidth_hz)
        fails = attempt_fails(channel, seed, r, k, snr, fades)
    links = None
    if channel.fading_per == "transmission" and attempts > 1:
        # retransmissions see fresh fading; the first attempt keeps the round's draw
        links = [uplink] + [_faded_link(channel, cell, k, tx_power_w, h) for h in fades[1:]]
    if fixed:
        se = channel.spectral_efficiency_bits_per_hz
        links = [replace(link, fixed_se_bps_per_hz=se) for link in links or [uplink] * attempts]
    return links, fails


def play_clients(
    env: simpy.Environment,
    sim,
    r: int,
    start_s: float,
    selected,
    keep: int,
    cost,
    backhaul: bool = True,
    band_share=None,
):
    """SimPy process body: run the selected clients' rounds; returns their records.

    `keep` is the number of arrivals the server waits for (over-commit: once `keep`
    updates arrived, the clients still running are stopped and their updates discarded).
    `cost(k)` gives client k's `down_bits`, `compute_s`, `compute_energy_j` and `up_bits`.
    `backhaul`: transfers cross the cell's backhaul to the server (False: the server sits
    at the base station, an edge server of protocol.kind=hierarchical). `band_share`: a
    policy's share of the cell's band per selected client (allocated_bandwidth_hz; None:
    the cell's medium shared equally).
    """
    world, scenario = sim.world, sim.world.scenario
    serving = serving_cells(world)
    load = np.bincount(serving[selected], minlength=world.topology.n_cells)
    down_net = None
    if getattr(scenario.channel, "interference", "none") == "cochannel":
        up_net, down_net = cochannel_networks(env, scenario, world.cell, selected, r)
        media = {int(c): up_net.medium(c) for c in np.flatnonzero(load)}
    else:
        media = {
            int(c): make_medium(
                env, scenario.channel.access, scenario.channel.uplink_bandwidth_hz,
                scenario.channel.resource_blocks,
            )
            for c in np.flatnonzero(load)
        }  # fmt: skip
    deadline_s = start_s + scenario.round.deadline_s if scenario.round.deadline_s else math.inf
    own = None
    if band_share is not None:
        cells = serving[selected]
        own = (
            allocated_bandwidth_hz(scenario, band_share, cells),
            slot_ranks(scenario, band_share, cells),
        )
    records, processes = start_clients(
        env, sim, r, start_s, selected, media, load, deadline_s, cost, backhaul, down_net, own
    )
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


def serving_cells(world) -> np.ndarray:
    """Each client's cell (all 0 with one cell)."""
    if world.cell.serving_cell is not None:
        return world.cell.serving_cell
    return np.zeros(world.population.size, dtype=int)


def start_clients(
    env,
    sim,
    r: int,
    start_s: float,
    selected,
    media: dict,
    load,
    deadline_s,
    cost,
    backhaul,
    down_net=None,
    own=None,
):
    """Start the selected clients' processes (links and fading of stream index r) on the
    cells' `media`, `load[c]` clients sharing cell c's band; returns records and processes.
    `down_net`: the broadcast's CochannelNetwork (channel.interference=cochannel; the
    media are then the uplink network's). `own`: each client's band from a policy
    (allocated_bandwidth_hz: its weight on its cell's fdma medium, its own ofdma blocks) and
    its place in its cell's slot order under tdma (slot_ranks); None: the cells' media."""
    world, scenario = sim.world, sim.world.scenario
    channel, seed, pop = scenario.channel, scenario.seed, world.population
    fading = round_fading(channel, pop.size, seed, r)
    up_fading = fading[0]
    uplinks, downlinks = round_links(channel, world.cell, pop.tx_power_w, selected, fading)
    serving = serving_cells(world)
    traced = link_traces(channel) if getattr(channel, "trace", None) is not None else None
    capacity = getattr(scenario.population, "capacity_trace", None)
    if capacity is not None:
        capacity = load_capacity(capacity.file)
    records, processes = [], []
    own_hz, ranks = (None, None) if own is None else own
    turns = {}  # tdma in a policy's slot order: each cell's turns
    for i, (k, uplink, downlink) in enumerate(zip(selected, uplinks, downlinks, strict=True)):
        k, c = int(k), int(serving[k])
        costs = cost(k)
        fades = attempt_fades(channel, seed, r, k, up_fading[k])
        band_hz = nominal_bandwidth_hz(channel, int(load[c])) if own_hz is None else own_hz[i]
        plan = _client_plan(sim, r, k, c, costs, uplink, downlink, fades, band_hz, backhaul)
        medium = media[c]
        if own_hz is not None:  # fdma: weight s_k B on the cell's band; ofdma: its blocks
            fdma = channel.access == "fdma"
            medium = Weighted(medium, own_hz[i]) if fdma else OwnBand(env, float(own_hz[i]))
        if ranks is not None:
            order = turns.setdefault(c, SlotOrder(env, int(load[c])))
            medium = InTurn(env, float(own_hz[i]), order, int(ranks[i]), _attempts(plan))
        if down_net is not None:
            _cochannel_downlink(channel, plan, down_net, downlink, int(load[c]))
        if traced is not None:
            medium = _traced_media(env, channel, seed, k, plan, medium, downlink, traced)
        if capacity is not None:  # FedScale's communication rate, both directions
            constant = capacity_link(capacity, k)
            medium = TraceMedium(env, constant, 0.0)
            plan.downlink_link, plan.downlink_medium = downlink, TraceMedium(env, constant, 0.0)
        record = ClientRecord(k)
        record.uplink_fades = [float(h) for h in fades]
        process = _start_client(env, sim, r, start_s, deadline_s, plan, medium, record)
        if ranks is not None:  # stopped before its upload: its turn passes at the stop
            process.callbacks.append(medium.give_up)
        records.append(record)
        processes.append(process)
    return records, processes


def _attempts(plan: ClientPlan) -> int:
    """The upload attempts the client makes unless stopped: up to its first success."""
    fails = plan.attempt_fails or [False]
    return fails.index(False) + 1 if False in fails else len(fails)


def _client_plan(
    sim, r: int, k: int, c: int, own: dict, uplink, downlink, fades, band_hz: float, backhaul
):
    """Client k's plan in cell c: downlink time and rx power, compute, upload attempts
    (links and failures on its nominal band `band_hz`) and backhaul delays."""
    world, channel, seed = sim.world, sim.world.scenario.channel, sim.world.scenario.seed
    pop = world.population
    radios = getattr(sim, "radios", None)  # radio_states.RadioBank: each client's radio
    links, fails = attempt_plan(
        channel,
        world.cell,
        seed,
        r,
        k,
        uplink,
        float(pop.tx_power_w[k]),
        float(band_hz),
        fades,
    )
    radio = radios.plan_params(k) if radios is not None else None  # None: plain radiated
    topology = world.topology
    return ClientPlan(
        client=k,
        downlink_s=float(
            airtime_s(own["down_bits"], downlink.rate_bps(channel.downlink_bandwidth_hz))
        ),
        downlink_bits=float(own["down_bits"]),
        rx_power_w=float(pop.rx_power_w[k])
        if radio is None
        else receive_power_w(radio, downlink.rate_bps(channel.downlink_bandwidth_hz)),
        compute_s=own["compute_s"],
        compute_energy_j=own["compute_energy_j"],
        uplink_bits=own["up_bits"],
        uplink=links[0] if links else uplink,
        attempt_links=links,
        attempt_fails=fails,
        backhaul_down_s=topology.backhaul_delay_s(k, own["down_bits"]) if backhaul else 0.0,
        backhaul_up_s=topology.backhaul_delay_s(k, own["up_bits"]) if backhaul else 0.0,
        cell=c,
        radio=radio,
    )


def _cochannel_downlink(channel, plan: ClientPlan, down_net, downlink, clients_in_cell: int):
    """The plan's downlink over the broadcast's co-channel medium; rate=fixed: an attempt
    fails when its SINR falls below the fixed rate's threshold."""
    plan.downlink_medium, plan.downlink_link = down_net.medium(plan.cell), downlink
    if channel.rate == "fixed":  # the SINR decides, at its minimum over the attempt
        plan.fail_below_sinr = 2.0**channel.spectral_efficiency_bits_per_hz - 1.0
        plan.fail_band_hz = nominal_bandwidth_hz(channel, clients_in_cell)
        plan.attempt_fails = [False] * (1 + channel.max_retx)


def _traced_media(env, channel, seed: int, k: int, plan: ClientPlan, medium, downlink, traced):
    """Client k's uplink medium and the plan's downlink from the measured link traces,
    each read from the client's own offset (the cell's medium where no uplink trace)."""
    up_trace, down_trace = traced
    if up_trace is not None:
        medium = TraceMedium(env, up_trace, trace_offset_s(channel, seed, up_trace, 0, k))
    if down_trace is not None:
        plan.downlink_link = downlink
        offset_s = trace_offset_s(channel, seed, down_trace, 1, k)
        plan.downlink_medium = TraceMedium(env, down_trace, offset_s)
    return medium


def _start_client(env, sim, r: int, start_s: float, deadline_s, plan: ClientPlan, medium, record):
    """Client plan.client's process with its battery guard and radio, interrupted at the
    deadline or when it goes offline (the deadline wins a tie)."""
    world, k = sim.world, plan.client
    radios = getattr(sim, "radios", None)
    guard = BatteryGuard(
        env, budget_j(sim.battery_j, world.population, world.availability, k, start_s)
    )
    states = radios.client(env, k, record) if radios is not None else None
    process = env.process(client_round(env, plan, medium, record, guard, states))
    guard.process = process
    stop_s, cause = min(
        (deadline_s, "deadline"),
        (world.availability.next_offline_s(k, start_s, r), "offline"),
    )
    if stop_s < math.inf:
        env.process(interrupt_at(env, process, stop_s, cause))
    return process


@functools.lru_cache(maxsize=8)
def _read_trace(file, column, time_column, unit, scale, loop, field):
    return read_trace(file, column, time_column, unit, scale, loop, field)


def link_traces(channel) -> tuple:
    """The (uplink, downlink) ThroughputTraces of channel.trace (None: that side follows
    the channel model); each file is read once per process."""
    out = []
    for side in ("uplink", "downlink"):
        section = getattr(channel.trace, side)
        field = f"channel.trace.{side}"
        out.append(None if section is None else _read_trace(*section_arguments(section), field))
    return tuple(out)


def capacity_link(capacity, k: int) -> ThroughputTrace:
    """Client k's constant link rate from a FedScale capacity trace (entry k mod entries)."""
    rate = float(capacity.rate_bps[k % len(capacity.rate_bps)])
    return ThroughputTrace(np.zeros(1), np.array([rate]), 1.0)


def trace_offset_s(channel, seed: int, trace, direction: int, k: int) -> float:
    """Client k's offset into a trace (direction 0 uplink, 1 downlink): uniform over the
    trace's duration from stream ("link_trace", direction, k), or 0 (per_client_offset)."""
    section = channel.trace.uplink if direction == 0 else channel.trace.downlink
    gen = rng.stream(seed, "link_trace", direction, k)
    return float(client_offsets_s(trace, section.per_client_offset, gen, 1)[0])


def cochannel_networks(env: simpy.Environment, scenario, cell, selected, r: int):
    """Uplink and downlink `CochannelNetwork`s of round r (channel.interference=cochannel).

    The selected clients' links to the other base stations: large-scale gain (path loss x
    shadowing, drawn once) x a fading draw of the round per client and station (stream
    ("interference", r): uplink then downlink, (selected, cells) each)."""
    channel, topology = scenario.channel, scenario.topology
    n_cells = cell.gains_all.shape[1]
    groups = reuse_groups(n_cells, topology.reuse_factor, topology.layout)
    same = cochannel_matrix(groups)
    gen = rng.stream(scenario.seed, "interference", r)
    m = len(selected)
    kind, k_factor = channel.fading, channel.rician_k
    up_fade = fading_power(gen, kind, m * n_cells, k_factor=k_factor).reshape(m, n_cells)
    down_fade = fading_power(gen, kind, m * n_cells, k_factor=k_factor).reshape(m, n_cells)
    row = {int(k): i for i, k in enumerate(selected)}

    def up_gain(k: int, c: int) -> float:
        return float(cell.gains_all[k, c] * up_fade[row[k], c])

    def down_gain(k: int, c: int) -> float:
        return float(cell.gains_all[k, c] * down_fade[row[k], c])

    up = CochannelNetwork(
        env,
        channel.uplink_bandwidth_hz,
        same,
        up_gain,
        channel.access,
        channel.resource_blocks,
    )
    down = CochannelNetwork(
        env,
        channel.downlink_bandwidth_hz,
        same,
        down_gain,
        "broadcast",
        bs_power_w=float(dbm_to_w(channel.bs_tx_power_dbm)),
    )
    return up, down


def overcommit_count(clients_per_round: int, factor: float) -> int:
    """ceil(f m) clients to select for m wanted arrivals."""
    return math.ceil(factor * clients_per_round - 1e-9)  # 1e-9: 1.3 * 10 is 13.000000000000002


def arrivals_kept(scenario, n_selected: int) -> int:
    """The arrivals the server waits for (step 4): clients_per_round with fixed
    participation, so over-committed clients beyond them are stopped and discarded;
    every drawn client with bernoulli participation, unless round.overcommit > 1 asks for
    over-commit (then the first clients_per_round arrivals are kept)."""
    training = scenario.training
    if training.participation == "bernoulli" and not scenario.round.overcommit > 1:
        return n_selected
    return training.clients_per_round


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
