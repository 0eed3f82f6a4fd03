"""The system-only engine: rounds of availability, selection, channel, time and energy
without training, vectorised with numpy per round (docs/system-engine.md). It plays the
round kernel's sequence and shared steps (simulator/round.py: RoundSteps) on a Clock.

Per round, everything over the N clients (availability, battery eligibility, fading,
charging, the ledger) is one numpy operation; the m selected clients' timelines
(backhaul, downlink, compute, upload, stops) are arrays, and each cell's shared uplink is
solved by channel/sharing.py. The rules are the SimPy engine's (simulator/transfers.py,
client.py, engine.py), so for the same seed rounds.csv has the same times, energies, bits
and arrivals (tests/simulator/test_system_engine.py).
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedjoule.algorithms.work import local_work
from fedjoule.channel.cell import round_fading
from fedjoule.channel.link import airtime_s
from fedjoule.channel.outage import attempt_error_probability, fixed_rate_fails
from fedjoule.channel.sharing import (
    UPLOADED,
    UplinkClients,
    fdma_uplink,
    own_band_uplink,
    queued_uplink,
)
from fedjoule.channel.units import db_to_linear, dbm_to_w
from fedjoule.devices.radio import transmit_draw_w
from fedjoule.devices.vector_availability import vector_availability
from fedjoule.energy_kinds import END_OF_RUN_TAIL, with_total
from fedjoule.errors import FedjouleError
from fedjoule.simulator.policy_step import make_policy_step
from fedjoule.simulator.round import Allocation, Clock, RoundSteps, run_on_clock
from fedjoule.simulator.round_row import ClientsOfRound, book_clients
from fedjoule.simulator.round_rules import LEDGER_FIELDS
from fedjoule.simulator.system_world import SystemWorld, gradients_of_round
from fedjoule.simulator.transfers import (
    allocated_bandwidth_hz,
    attempt_fades,
    nominal_bandwidth_hz,
    outage_fails,
    slot_ranks,
)
from fedjoule.simulator.vector_radio import RadioBatteryStop, VectorRadio


def unsupported(scenario) -> list[str]:
    """What the numpy engine cannot produce for this scenario (empty: all of it)."""
    reasons = []
    if scenario.protocol.kind != "sync":
        reasons.append(
            f"protocol.kind={scenario.protocol.kind} (it plays sync rounds only; docs/protocols.md)"
        )
    if scenario.output.events:
        reasons.append("output.events=true (events.jsonl needs every client's spans)")
    if scenario.output.timeline_rounds:
        reasons.append("output.timeline_rounds (round timelines need every client's spans)")
    return reasons + unmodelled(scenario)


def unmodelled(scenario) -> list[str]:
    """The physics the numpy engine does not model (empty: none): co-channel interference,
    link and capacity traces. Any system-only figure of such a scenario (run --no-train,
    fedjoule capacity) comes from the SimPy engine."""
    reasons = []
    if getattr(scenario.channel, "interference", "none") == "cochannel":
        reasons.append(
            "channel.interference=cochannel (each rate follows the other cells' transmissions "
            "instant by instant: the SimPy engine's event-driven media)"
        )
    if getattr(scenario.population, "capacity_trace", None) is not None:
        reasons.append("population.capacity_trace (each client's links at its trace rate)")
    if getattr(scenario.channel, "trace", None) is not None:
        reasons.append("channel.trace (each client's rate follows its own measured series)")
    return reasons


@dataclass
class _Attempts:
    """The selected clients' possible upload attempts (m clients, A attempts)."""

    per_attempt: np.ndarray  # (m, A): the SNR (fixed cell) or p * gain * |h|^2 (W)
    succeeds: np.ndarray  # one of the attempts gets through
    n_attempts: np.ndarray  # the attempts made: up to the first success, else all


@dataclass
class _Stops:
    """When and why each selected client is stopped (the battery aside), and its budget."""

    stop_s: np.ndarray  # the deadline, going offline or the over-commit quota (inf: none)
    stop_cause: np.ndarray  # "deadline", "offline", "overcommit" or "none"
    budget_j: np.ndarray  # energy above the battery threshold (inf: not checked in-round)


@dataclass
class _BeforeUpload:
    """The selected clients' timeline before the upload (simulated s) and its first stop."""

    t_a: np.ndarray  # the model is at the cell (after the backhaul)
    t_d: np.ndarray  # the download starts (after a promotion)
    t_b: np.ndarray  # downloaded
    t_c: np.ndarray  # computed
    join_s: np.ndarray  # the upload asks for the medium (after a promotion)
    rx_w: np.ndarray  # power while receiving
    kill_s: np.ndarray  # the first stop, the battery's included
    kill_cause: np.ndarray
    early: np.ndarray  # stopped before the upload asks for the medium
    spent_j: np.ndarray  # battery energy spent up to t_c


class SystemEngine(RoundSteps):
    """A system-only run between rounds: ledger, batteries, simulated time. Its rounds
    are the kernel's sequence and shared steps (round.RoundSteps: open, select, allocate,
    the row's counts and totals) on a Clock; it plays who is online, the clients'
    transfers and the row's closing over arrays (steps 1, 5 and 7)."""

    def __init__(self, world: SystemWorld):
        reasons = unmodelled(world.scenario)
        if reasons:  # its energies and times would be another model's: never silently
            raise FedjouleError(
                "the numpy system engine does not model " + "; ".join(reasons)
                + "; use the SimPy system engine (simulator/system_simpy.py)"
            )  # fmt: skip
        self.world = world
        n = world.population.size
        self.availability = vector_availability(world.scenario.availability, world)
        self.ledger = {name: np.zeros(n) for name in LEDGER_FIELDS}
        self.battery_j = world.population.battery_initial_j.copy()
        # power while sending: p (radiated) or p / eta + P_c (linear radio, devices/radio.py)
        self.tx_draw_w = transmit_draw_w(world.scenario.population, world.population)
        # promotion, tail, idle and rate-dependent power (simulator/vector_radio.py)
        self.radio = VectorRadio(world.scenario.population, world.population.class_index)
        self.end_of_run_tail_energy_j = 0.0
        self.next_round = 0
        self.sim_time_s = 0.0
        self.cumulative_energy_j = 0.0
        self.wall_time_s = 0.0
        self.last_clients: ClientsOfRound | None = None
        self.policy_step = make_policy_step(self)  # None without a policy

    # ------------------------------------------------------------------ a round
    def online_clients(self, time_s: float, r: int) -> np.ndarray:
        """Online now and above the battery threshold (or charging): engine.online_clients."""
        pop = self.world.population
        online = self.availability.online_mask(time_s, r)
        eligible = self.battery_j > pop.battery_threshold_j
        if self.availability.charging is not None:
            eligible |= self.availability.charging(time_s)
        return np.flatnonzero(online & eligible)

    def play_round(self, r: int) -> dict:
        """One synchronous round from the last one's end (RoundSteps.sync_round on a
        Clock); returns its rounds.csv row."""
        return run_on_clock(self.sync_round(Clock(self.sim_time_s), r))

    def transfer(self, clock: Clock, r: int, allocation: Allocation, backhaul=True):
        """5. The selected clients' timelines (play_clients); the clock moves on to the
        last one's end (a process body)."""
        clients = self.play_clients(r, clock.now, allocation)
        clock.now = float(clients.end_s.max())
        return clients
        yield  # a generator

    def arrivals(self, clients: ClientsOfRound) -> int:
        """After 5: how many uploads arrived."""
        return int((clients.outcome == "arrived").sum())

    def nobody(self) -> ClientsOfRound:
        """The arrays of a round nobody takes part in."""
        none = np.zeros(0, dtype=int)
        return ClientsOfRound(none, none)

    def play_clients(self, r: int, start_s: float, allocation: Allocation) -> ClientsOfRound:
        """Step 5 for the allocated clients (transfers.play_clients), over-commit included:
        solved once; if the first `keep` arrivals stop the rest, solved again up to then."""
        keep, selected = allocation.keep, allocation.clients
        clients = self._timelines(r, start_s, allocation, math.inf)
        arrived = clients.outcome == "arrived"
        if len(selected) > keep and arrived.sum() >= keep:
            stop_s = float(np.sort(clients.end_s[arrived])[keep - 1])
            clients = self._timelines(r, start_s, allocation, stop_s)
            arrived = np.flatnonzero(clients.outcome == "arrived")
            # arrivals at the same instant: keep the first `keep` (stable by client order)
            late = arrived[np.argsort(clients.end_s[arrived], kind="stable")][keep:]
            clients.outcome[late] = "overcommit"
        return clients

    def _timelines(self, r: int, start_s: float, allocation: Allocation, overcommit_s: float):
        """Every selected client's round: backhaul down, downlink, compute, uplink (shared
        per cell), backhaul up; stopped by the deadline, going offline, the battery
        threshold or (at overcommit_s) the over-commit quota."""
        world, scenario = self.world, self.world.scenario
        sel = allocation.clients
        cells = world.serving_cell[sel]
        out = ClientsOfRound(sel, cells)
        compute_s, compute_j = self._work_costs(r, allocation)
        # links (cell.round_links): the round's fading of all N clients, as SimPy draws it
        up_fading, down_fading = round_fading(
            scenario.channel, world.population.size, scenario.seed, r
        )
        down_rate, down_s, rx_w = self._downlink(sel, down_fading)
        own_hz = allocated_bandwidth_hz(scenario, allocation.band_share, cells)
        attempts = self._uplink_attempts(r, sel, cells, up_fading, own_hz)
        stops = self._stops(r, start_s, sel, overcommit_s, out)
        line = self._before_upload(start_s, sel, cells, compute_s, compute_j, down_s, rx_w, stops)
        self._spent_before_upload(sel, compute_s, compute_j, down_rate, down_s, line, out)
        up_end = np.full(len(sel), np.inf)
        ranks = slot_ranks(scenario, allocation.band_share, cells)
        if ranks is not None:  # tdma in a policy's slot order
            self._uplink_in_turns(sel, ranks, attempts, stops, line, out, own_hz, up_end)
        for c in np.unique(cells[~line.early]) if ranks is None else ():  # each cell's uplink
            rows = np.flatnonzero(~line.early & (cells == c))
            up_end[rows] = self._cell_uplink(sel, rows, attempts, stops, line, out, own_hz)
        self._after_upload(sel, cells, up_end, stops, line, out)
        return out

    def _work_costs(self, r: int, allocation: Allocation):
        """The allocated clients' compute time and energy for their local steps, each at
        its step's cost (step_costs: at its allocated CPU frequency, if any;
        RoundKernel.training_costs): freeloaders do not compute; the others their counted
        gradient evaluations and vector FLOPs (algorithms/work.py)."""
        world, sel = self.world, allocation.clients
        counted = local_work(
            gradients_of_round(world, r), allocation.local_steps, world.vector_work
        )
        work = np.where(world.freeloader[sel], 0, counted)
        step_s, step_j = self.step_costs(allocation)
        return work * step_s, work * step_j

    def _downlink(self, sel: np.ndarray, down_fading: np.ndarray):
        """The selected clients' downlink rate (bit/s), the model's airtime (s) and the
        power while receiving it (W)."""
        world, channel, pop = self.world, self.world.scenario.channel, self.world.population
        if world.cell.large_scale_gain is None:
            down_db = channel.snr_db if channel.downlink_snr_db is None else channel.downlink_snr_db
            down_snr = db_to_linear(down_db) * down_fading[sel]
        else:
            gain = world.cell.large_scale_gain[sel]
            noise = world.cell.noise_psd_w_per_hz
            down_snr = (
                dbm_to_w(channel.bs_tx_power_dbm)
                * (gain * down_fading[sel])
                / (noise * channel.downlink_bandwidth_hz)
            )
        down_rate = channel.downlink_bandwidth_hz * np.log2(1.0 + down_snr)
        down_s = airtime_s(world.downlink_bits, down_rate) * np.ones(len(sel))
        return down_rate, down_s, self.radio.receive_power_w(sel, down_rate, pop.rx_power_w[sel])

    def _uplink_attempts(self, r: int, sel: np.ndarray, cells: np.ndarray, up_fading, own_hz):
        """The 1 + max_retx possible upload attempts (transfers.attempt_plan): per-attempt
        fading (transfers.attempt_fades), then packet errors (transfers.attempt_fails) on
        the nominal band (each client's own band `own_hz` when a policy allocated one)."""
        world, channel, seed = self.world, self.world.scenario.channel, self.world.scenario.seed
        m, fixed = len(sel), world.cell.large_scale_gain is None
        tx_w = world.population.tx_power_w[sel]
        attempts = 1 + channel.max_retx
        fades = np.repeat(up_fading[sel][:, None], attempts, axis=1)  # (m, A): |h|^2
        if channel.fading_per == "transmission" and attempts > 1:
            for i, k in enumerate(sel):  # the retransmissions' fresh draws
                fades[i] = attempt_fades(channel, seed, r, k, up_fading[k])
        if fixed:
            per_attempt = db_to_linear(channel.snr_db) * fades
        else:
            gain = world.cell.large_scale_gain[sel]
            per_attempt = tx_w[:, None] * (gain[:, None] * fades)  # p * gain
        fails = np.zeros((m, attempts), dtype=bool)
        if channel.rate == "fixed" or channel.outage != "none":
            load = np.bincount(cells, minlength=world.topology.n_cells)
            nominal = np.array([nominal_bandwidth_hz(channel, int(x)) for x in load])[cells]
            if own_hz is not None:
                nominal = own_hz
            if fixed:
                mean = np.full(m, float(10 ** (channel.snr_db / 10)))
            else:
                noise = world.cell.noise_psd_w_per_hz
                mean = tx_w * world.cell.large_scale_gain[sel] / (noise * nominal)
            if channel.rate == "fixed":  # transfers.attempt_fails: the fade decides
                fails = fixed_rate_fails(
                    mean[:, None], fades, channel.spectral_efficiency_bits_per_hz
                )
            else:
                q = attempt_error_probability(channel, mean)
                for i, k in enumerate(sel):
                    fails[i] = outage_fails(seed, r, k, q[i], attempts)
        succeeds = ~fails.all(axis=1)
        n_attempts = np.where(succeeds, np.argmin(fails, axis=1) + 1, attempts)
        return _Attempts(per_attempt, succeeds, n_attempts)

    def _stops(self, r: int, start_s: float, sel: np.ndarray, overcommit_s: float, out):
        """When and why each selected client is stopped, the battery aside: the deadline or
        going offline (tuple min: the deadline wins a tie), the over-commit quota; and its
        battery budget (out.budget_j; infinite while charging, or checked after the round
        for radio states and rate-dependent power: _check_radio_battery)."""
        scenario, pop = self.world.scenario, self.world.population
        deadline_s = start_s + scenario.round.deadline_s if scenario.round.deadline_s else math.inf
        offline_s = self.availability.next_offline_s(sel, start_s, r)
        stop_s = np.minimum(deadline_s, offline_s)
        stop_cause = np.where(deadline_s <= offline_s, "deadline", "offline").astype(object)
        stop_cause[~np.isfinite(stop_s)] = "none"
        over = overcommit_s < stop_s
        stop_s = np.where(over, overcommit_s, stop_s)
        stop_cause[over] = "overcommit"
        budget_j = np.maximum(0.0, self.battery_j[sel] - pop.battery_threshold_j[sel])
        if self.availability.charging is not None:  # plugged in: no battery stop
            budget_j[self.availability.charging(start_s)[sel]] = math.inf
        out.budget_j = budget_j.copy()
        budget_j[self.radio.special[sel]] = math.inf  # radio states or rate-dependent power
        return _Stops(stop_s, stop_cause, budget_j)

    def _before_upload(self, start_s, sel, cells, compute_s, compute_j, down_s, rx_w, stops):
        """The timeline before the upload: backhaul, downlink at rx power, compute at
        constant power (radio promotions and tails where the radio has states), and the
        first stop before the upload asks for the medium (the battery's included)."""
        radio, world = self.radio, self.world
        back_down = world.topology.cell_delay_s(cells, world.downlink_bits)
        t_a = np.where(back_down > 0, start_s + back_down, start_s)
        # radio states: a tail still running is cut at the connect, else a promotion first;
        # the tail after the download is cut by the upload's connect, else idle, promotion
        tail_s, old_end = radio.tail_s[sel], radio.tail_end_s[sel]
        t_d = t_a + np.where(t_a < old_end, 0.0, radio.promotion_s[sel])  # download starts
        t_b = t_d + down_s
        t_c = t_b + compute_s
        tail_end = t_b + tail_s
        join_s = t_c + np.where(t_c < tail_end, 0.0, radio.promotion_s[sel])  # upload asked
        budget_j = stops.budget_j
        finite = np.isfinite(budget_j)
        with np.errstate(divide="ignore", invalid="ignore"):
            compute_w = np.where(compute_s > 0, compute_j / compute_s, 0.0)
            hit_down = np.where(finite & (rx_w > 0), t_d + budget_j / rx_w, np.inf)
            spent_b = 0.0 + rx_w * (t_b - t_d)
            hit_comp = np.where(
                finite & (compute_w > 0),
                t_b + np.maximum(0.0, budget_j - spent_b) / compute_w,
                np.inf,
            )
        hit_s = np.where(hit_down < t_b, hit_down, np.where(hit_comp < t_c, hit_comp, np.inf))
        kill_s = np.minimum(stops.stop_s, hit_s)
        kill_cause = np.where(stops.stop_s <= hit_s, stops.stop_cause, "battery").astype(object)
        spent_c = spent_b + compute_w * (t_c - t_b)
        early = kill_s < join_s
        return _BeforeUpload(t_a, t_d, t_b, t_c, join_s, rx_w, kill_s, kill_cause, early, spent_c)

    def _spent_before_upload(self, sel, compute_s, compute_j, down_rate, down_s, line, out):
        """What the selected clients spent before the upload, the part done where a stop
        came first (out: downlink airtime and rx energy, compute time and energy, trained;
        end and outcome of those stopped), and the downloads above the measured range."""
        early, t_k, t_d, t_b, t_c = line.early, line.kill_s, line.t_d, line.t_b, line.t_c
        in_down = early & (t_k >= t_d) & (t_k < t_b)
        done_down = ~early | (t_k >= t_b)
        out.downlink_airtime_s = np.where(done_down, down_s, np.where(in_down, t_k - t_d, 0.0))
        out.energy_rx_j = np.where(
            done_down, line.rx_w * down_s, np.where(in_down, line.rx_w * (t_k - t_d), 0.0)
        )
        in_comp = early & (t_k >= t_b) & (t_k < t_c)
        done_comp = ~early | (t_k >= t_c)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(compute_s > 0, (t_k - t_b) / compute_s, 1.0)
        out.compute_time_s = np.where(done_comp, compute_s, np.where(in_comp, t_k - t_b, 0.0))
        out.energy_compute_j = np.where(
            done_comp, compute_j, np.where(in_comp, compute_j * fraction, 0.0)
        )
        out.trained = done_comp
        received = out.downlink_airtime_s > 0  # downloads above the measured range
        kinds = self.world.population.class_index[sel][received]
        self.radio.ranges.add_rates(kinds, "downlink", down_rate[received])
        out.end_s = np.where(early, t_k, 0.0)
        out.outcome[early] = line.kill_cause[early]

    def _uplink_in_turns(self, sel, ranks, attempts, stops, line, out, own_hz, up_end):
        """TDMA in a policy's slot order (medium.SlotOrder): in each cell, rank by rank, a
        client sends on the whole band once the one before it is done (its uploads ended, or
        it was stopped, before its upload too); up_end: when each upload ended."""
        cells = self.world.serving_cell[sel]
        for c in np.unique(cells):
            turn_s = -math.inf  # when the band is the next rank's
            in_cell = np.flatnonzero(cells == c)
            for i in in_cell[np.argsort(ranks[in_cell])]:
                if line.early[i]:  # stopped before its upload: its turn passes at the stop
                    turn_s = max(turn_s, float(line.kill_s[i]))
                    continue
                rows = np.array([i])
                ends = self._cell_uplink(sel, rows, attempts, stops, line, out, own_hz, turn_s)
                up_end[i] = ends[0]
                turn_s = max(turn_s, float(ends[0]))
                # asked for the band at join_s (counted then, as SimPy does), even if stopped
                # while waiting for its turn
                out.uplink_attempts[i] = max(out.uplink_attempts[i], 1)

    def _cell_uplink(
        self, sel, rows, attempts, stops, line, out, own_hz=None, turn_s=-math.inf
    ) -> np.ndarray:
        """One cell's shared uplink (channel/sharing.py) for its clients `rows` that reached
        it, a policy's bands `own_hz` weighing the fdma sharing or each client's own (ofdma
        blocks, tdma turn) from `turn_s` on at the earliest: their airtime, energy, bits,
        attempts, end and outcome into out; returns when each upload ended."""
        world, channel, radio = self.world, self.world.scenario.channel, self.radio
        fixed = world.cell.large_scale_gain is None
        rate_fixed = channel.rate == "fixed"
        tx_draw_w = self.tx_draw_w[sel][rows]
        link = UplinkClients(
            join_s=np.maximum(line.join_s[rows], turn_s),
            n_attempts=attempts.n_attempts[rows],
            succeeds=attempts.succeeds[rows],
            tx_power_w=tx_draw_w,
            budget_j=stops.budget_j[rows] - line.spent_j[rows],
            kill_s=stops.stop_s[rows],
            kill_cause=stops.stop_cause[rows],
            snr_fixed=attempts.per_attempt[rows] if fixed else None,
            power_gain_w=None if fixed else attempts.per_attempt[rows],
            noise_psd_w_per_hz=world.cell.noise_psd_w_per_hz,
            fixed_se_bps_per_hz=channel.spectral_efficiency_bits_per_hz if rate_fixed else None,
            max_bps=radio.up_max_bps[sel][rows],
        )
        bandwidth = channel.uplink_bandwidth_hz
        if channel.access == "fdma":  # a policy's bands s_k B weigh the sharing
            weights = None if own_hz is None else own_hz[rows]
            result = fdma_uplink(link, world.uplink_bits, bandwidth, weights)
        elif own_hz is not None:
            result = own_band_uplink(link, world.uplink_bits, own_hz[rows])
        else:
            channels = 1 if channel.access == "tdma" else channel.resource_blocks
            result = queued_uplink(link, world.uplink_bits, bandwidth, channels)
        out.uplink_airtime_s[rows] = result.airtime_s
        out.energy_tx_j[rows] = np.where(
            radio.special[sel][rows],
            radio.transmit_energy_j(sel[rows], result.charged_bits, result.airtime_s, tx_draw_w),
            result.energy_tx_j,
        )
        out.uplink_bits[rows] = result.bits
        kinds = world.population.class_index[sel][rows]  # attempts above the measured range
        radio.ranges.add_counts(kinds, "uplink", result.over_range, result.top_rate_bps)
        out.uplink_attempts[rows] = result.attempts
        out.end_s[rows] = result.end_s
        out.outcome[rows] = result.outcome
        return result.end_s

    def _after_upload(self, sel, cells, up_end, stops, line, out) -> None:
        """After the upload: the backhaul, which only the deadline or the over-commit stop;
        with radio states, the promotion, idle and tail energy and the tail left running."""
        world, radio = self.world, self.radio
        stop_s, stop_cause = stops.stop_s, stops.stop_cause
        back_up = world.topology.cell_delay_s(cells, world.uplink_bits)
        uploaded = out.outcome == UPLOADED
        arrive_s = np.where(back_up > 0, up_end + back_up, up_end)
        cut = uploaded & np.isin(stop_cause, ["deadline", "overcommit"]) & (stop_s < arrive_s)
        out.end_s = np.where(uploaded, np.where(cut, stop_s, arrive_s), out.end_s)
        out.outcome[cut] = stop_cause[cut]
        out.outcome[uploaded & ~cut] = "arrived"
        if radio.any:
            reached, join_s = ~line.early, line.join_s
            wait_s = np.where(reached, up_end - join_s - out.uplink_airtime_s, 0.0)
            times = (line.t_a, line.t_d, line.t_b, line.t_c, join_s)
            self._radio_states(out, sel, line.early, line.kill_s, times, wait_s)
            out.tail_end_s = np.where(reached, up_end + radio.tail_s[sel], out.tail_end_s)
            out.settled_s = np.where(reached, up_end, out.settled_s)

    def _radio_states(self, out, sel, early, t_k, times, wait_s) -> None:
        """The selected clients' promotion, idle and tail energy up to the end of their
        radio's activity in the round (vector_radio.py), and the tail they leave running
        (out.tail_end_s, out.settled_s; unchanged where the client stopped before its
        download: its earlier tail runs on)."""
        radio = self.radio
        t_a, t_d, t_b, t_c, join_s = times
        tk = np.where(early, t_k, np.inf)
        tail_s, tail_w = radio.tail_s[sel], radio.tail_w[sel]
        idle_w = radio.idle_w[sel]
        old_end, old_settled = radio.tail_end_s[sel], radio.settled_s[sel]
        tail_end = t_b + tail_s
        # promotions: before the download (t_a .. t_d) and before the upload (t_c .. join)
        out.energy_radio_promotion_j = radio.promotion_energy_j(
            sel,
            np.clip(np.minimum(tk, t_d) - t_a, 0.0, None),
            np.clip(np.minimum(tk, join_s) - t_c, 0.0, None),
        )
        # the earlier tail, up to its end or its cut at t_a (once the download started)
        downloading = tk >= t_d
        old_j = tail_w * np.clip(np.minimum(old_end, t_a) - old_settled, 0.0, None)
        # the tail after the download up to its end or its cut by the upload's connect,
        # then idle (the window from the download's end to the upload)
        computed = tk >= t_c
        tail_j = tail_w * (np.minimum(t_c, tail_end) - t_b)
        out.energy_idle_j = idle_w * np.clip(np.minimum(tk, t_c) - tail_end, 0.0, None)
        out.energy_radio_tail_j = np.where(downloading, old_j, 0.0) + np.where(
            computed, tail_j, 0.0
        )
        out.energy_radio_tail_j += tail_w * np.clip(wait_s, 0.0, None)  # waiting, connected
        # the tail left running: stopped in the download, from the stop; in the
        # computation, the download's (the bank charges it); in the upload's promotion,
        # none (the download's ran out and is charged above); before the download, the
        # earlier one runs on
        in_down = early & downloading & (tk < t_b)
        in_comp = early & (tk >= t_b) & ~computed
        promoted = early & computed
        out.tail_end_s = np.select(
            [in_down, in_comp, promoted], [tk + tail_s, tail_end, t_c], old_end
        )
        out.settled_s = np.select([in_down, in_comp, promoted], [tk, t_b, t_c], old_settled)

    # ------------------------------------------------------------------ bookkeeping
    def close_row(self, row: dict, end_s: float, clients: ClientsOfRound, failed: bool, probe=()):
        """7. RoundKernel.close_row over arrays (round_row.py: the ledger, batteries, the
        row's counts and totals); radio tails, charging. `probe`: none without learning."""
        pop = self.world.population
        self.last_clients = clients
        k = clients.client
        book_clients(self.ledger, self.battery_j, pop.battery_threshold_j, clients)
        tails_j = 0.0
        if self.radio.any:  # the tails left running, then every tail up to the round's end
            self._check_radio_battery(row["round"], clients)
            self.radio.tail_end_s[k], self.radio.settled_s[k] = (
                clients.tail_end_s,
                clients.settled_s,
            )
            settled = self.charge_tails(self.radio.settle(end_s))
            tails_j = float(settled.sum())
            clients.spent_j = settled
            np.add.at(clients.spent_j, k, clients.energy_total_j)
        window = self.availability.charging_time_s
        if window is not None and end_s > self.sim_time_s:
            gained = pop.charge_power_w * window(self.sim_time_s, end_s)  # E = P_charge * t
            np.minimum(self.battery_j + gained, pop.battery_capacity_j, out=self.battery_j)
        return self.finish_row(row, end_s, failed, clients, clients, tails_j)

    # ------------------------------------------------------------------ radio tails
    def charge_tails(self, energy_j: np.ndarray, field: str = "energy_radio_tail_j"):
        """engine.Simulation.charge_tails for arrays: into the ledger's `field` and the
        batteries; returns `energy_j`."""
        self.ledger[field] += energy_j
        np.maximum(0.0, self.battery_j - energy_j, out=self.battery_j)
        return energy_j

    def settle_between_rounds(self, row: dict) -> None:
        """engine.Simulation.settle_between_rounds: the tails up to the next round's start
        (round.interval_s), charged to this row; after the last round, by
        energy.end_of_run_tail (charge, separate or drop)."""
        scenario, radio = self.world.scenario, self.radio
        gap_j = None  # every client's tails charged to this row up to the next round's start
        if row["round"] + 1 >= scenario.training.rounds:  # engine.Simulation.finished
            tails = radio.settle(math.inf) if radio.any else np.zeros(len(self.battery_j))
            self.end_of_run_tail_energy_j = float(tails.sum())
            row[END_OF_RUN_TAIL] = 0.0
            if scenario.energy.end_of_run_tail == "charge":
                row["energy_radio_tail_j"] += float(self.charge_tails(tails).sum())
            elif scenario.energy.end_of_run_tail == "separate":
                row[END_OF_RUN_TAIL] = float(self.charge_tails(tails, END_OF_RUN_TAIL).sum())
        elif scenario.round.interval_s and radio.any:
            next_start_s = max(
                (row["round"] + 1) * scenario.round.interval_s, row["sim_time_end_s"]
            )
            gap_j = self.charge_tails(radio.settle(next_start_s))
            row["energy_radio_tail_j"] += float(gap_j.sum())
        clients = self.last_clients
        if gap_j is not None and clients is not None and clients.spent_j is not None:
            clients.spent_j = clients.spent_j + gap_j  # each client's energy in the row, whole
        with_total(row)

    def _check_radio_battery(self, r: int, clients: ClientsOfRound) -> None:
        """A client with radio states whose round (its tails whole) could reach its battery
        budget: its stop is not placed here (vector_radio.py), the SimPy engine plays it."""
        special = self.radio.special[clients.client]
        running = self.radio.tail_w[clients.client] * np.clip(
            clients.tail_end_s - clients.settled_s, 0.0, None
        )
        reach = special & (clients.energy_total_j + running >= clients.budget_j)
        if reach.any():
            raise RadioBatteryStop(
                f"round {r}: client {int(clients.client[reach][0])} (radio states) could "
                "reach its battery threshold, a stop the numpy system engine does not place"
            )

    def run(self, last_round: int, on_round: Callable[[dict], None]) -> None:
        """Play rounds next_round .. last_round-1."""
        for r in range(self.next_round, last_round):
            tic = time.perf_counter()
            row = self.play_round(r)
            self.settle_between_rounds(row)
            wall_s = time.perf_counter() - tic
            self.cumulative_energy_j += row["energy_total_j"]
            row["cumulative_energy_j"] = self.cumulative_energy_j
            row["wall_time_s"] = wall_s
            self.next_round = r + 1
            self.sim_time_s = row["sim_time_end_s"]
            self.wall_time_s += wall_s
            on_round(row)
