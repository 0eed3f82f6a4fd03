"""What one selected client does in a round, as a SimPy process, and what it spends."""

import math
from dataclasses import dataclass, field

import simpy

from fedjoule.channel.link import Link
from fedjoule.channel.medium import TransmissionAborted

# Causes of a client's drop from a round (rounds.csv has a `dropped_<cause>` column each).
DROP_CAUSES = ("deadline", "outage", "offline", "battery", "overcommit")


@dataclass
class ClientPlan:
    """The costs of one client's round, fixed when the round starts."""

    client: int
    downlink_s: float  # broadcast airtime at this client's downlink rate
    rx_power_w: float
    compute_s: float  # K local steps
    compute_energy_j: float
    uplink_bits: float
    uplink: Link
    # one Link per possible attempt (1 + max_retx); None: every attempt uses `uplink`
    attempt_links: list[Link] | None = None
    # which attempts fail (packet error drawn at the start of the round); None: none fail
    attempt_fails: list[bool] | None = None
    backhaul_down_s: float = 0.0  # server -> base station before the broadcast
    backhaul_up_s: float = 0.0  # base station -> server after the upload
    cell: int = 0


@dataclass
class ClientRecord:
    """What happened to one client in a round: time, energy, bits, and how it ended."""

    client: int
    energy_compute_j: float = 0.0
    energy_tx_j: float = 0.0
    energy_rx_j: float = 0.0
    downlink_airtime_s: float = 0.0
    compute_time_s: float = 0.0
    uplink_airtime_s: float = 0.0
    uplink_bits: float = 0.0
    uplink_attempts: int = 0
    outcome: str = "running"  # "arrived", or the cause of the drop (DROP_CAUSES)
    trained: bool = False  # finished its local computation
    end_s: float = 0.0
    cell: int = 0
    # (kind, start_s, end_s, energy_j, bits, attempt, ok): every transfer and computation
    spans: list = field(default_factory=list)

    @property
    def energy_total_j(self) -> float:
        return self.energy_compute_j + self.energy_tx_j + self.energy_rx_j


class BatteryGuard:
    """Interrupts a client process with cause "battery" when its spent energy reaches the
    budget (charge above the threshold at the round's start), given the power drawn now.

    The client calls `set_power` at every change of power (receive, compute, transmit,
    idle); the hit time is `now + (budget - spent) / power` (constant power per phase).
    """

    def __init__(self, env: simpy.Environment, budget_j: float) -> None:
        self.env = env
        self.budget_j = float(budget_j)
        self.spent_j = 0.0
        self.power_w = 0.0
        self.since_s = env.now
        self.process: simpy.Process | None = None
        self._generation = 0

    def set_power(self, power_w: float) -> None:
        now = self.env.now
        self.spent_j += self.power_w * (now - self.since_s)
        self.power_w, self.since_s = float(power_w), now
        self._generation += 1
        if not math.isfinite(self.budget_j) or self.power_w <= 0:
            return
        left_s = max(0.0, self.budget_j - self.spent_j) / self.power_w
        generation = self._generation
        timer = self.env.timeout(left_s)
        timer.callbacks.append(lambda _event: self._fire(generation))

    def _fire(self, generation: int) -> None:
        if generation == self._generation and self.process is not None and self.process.is_alive:
            self.process.interrupt("battery")


class _NoGuard:
    def set_power(self, power_w: float) -> None:
        pass


def client_round(
    env: simpy.Environment,
    plan: ClientPlan,
    medium,
    record: ClientRecord,
    guard: BatteryGuard | None = None,
):
    """Receive the model, train K steps, upload (retransmitting failed attempts); an
    interrupt (deadline, went offline, battery, over-commit) stops it where it is, and the
    energy of the part already done still counts."""
    guard = guard or _NoGuard()
    record.cell = plan.cell
    phase, phase_start = "backhaul_down", env.now
    try:
        if plan.backhaul_down_s > 0:  # the model crosses the backhaul to this cell
            yield env.timeout(plan.backhaul_down_s)
            _span(record, "backhaul_down", phase_start, env.now)
        phase, phase_start = "downlink", env.now
        guard.set_power(plan.rx_power_w)
        yield env.timeout(plan.downlink_s)
        record.downlink_airtime_s = plan.downlink_s
        record.energy_rx_j = plan.rx_power_w * plan.downlink_s  # E_rx = p_rx * airtime
        _span(record, "downlink", phase_start, env.now, record.energy_rx_j)

        phase, phase_start = "compute", env.now
        guard.set_power(plan.compute_energy_j / plan.compute_s if plan.compute_s > 0 else 0.0)
        yield env.timeout(plan.compute_s)
        record.compute_time_s = plan.compute_s
        record.energy_compute_j = plan.compute_energy_j  # K * kappa * c * B * f^2
        record.trained = True
        _span(record, "compute", phase_start, env.now, record.energy_compute_j)
        guard.set_power(0.0)

        phase = "uplink"
        if not (yield from _upload(env, plan, medium, record, guard)):
            record.outcome = "outage"
            record.end_s = env.now
            return
        guard.set_power(0.0)
        phase, phase_start = "backhaul_up", env.now
        if plan.backhaul_up_s > 0:
            yield from _backhaul_up(env, plan.backhaul_up_s)
            _span(record, "backhaul_up", phase_start, env.now)
        record.outcome = "arrived"
    except simpy.Interrupt as stop:
        elapsed_s = env.now - phase_start
        if phase == "downlink":
            record.downlink_airtime_s = elapsed_s
            record.energy_rx_j = plan.rx_power_w * elapsed_s
            _span(record, "downlink", phase_start, env.now, record.energy_rx_j, ok=False)
        elif phase == "compute":  # constant power: the fraction of the K steps' energy done
            record.compute_time_s = elapsed_s
            fraction = elapsed_s / plan.compute_s if plan.compute_s > 0 else 1.0
            record.energy_compute_j = plan.compute_energy_j * fraction
            _span(record, "compute", phase_start, env.now, record.energy_compute_j, ok=False)
        elif phase.startswith("backhaul"):
            _span(record, phase, phase_start, env.now, ok=False)
        record.outcome = stop.cause
    record.end_s = env.now


def _upload(env, plan: ClientPlan, medium, record: ClientRecord, guard):
    """Up to 1 + max_retx attempts; each costs airtime and energy. True if one got through."""
    fails = plan.attempt_fails or [False]
    for attempt, failed in enumerate(fails):
        link = plan.attempt_links[attempt] if plan.attempt_links else plan.uplink
        started = {"s": env.now}

        def on_start(started=started, link=link):
            started["s"] = env.now
            guard.set_power(link.tx_power_w)

        request_s = env.now
        record.uplink_attempts += 1
        try:
            airtime_s = yield from medium.transmit(plan.uplink_bits, link, on_start=on_start)
        except TransmissionAborted as stop:
            _add_attempt(record, link, stop.airtime_s, stop.bits_sent)
            _span(record, "queue", request_s, started["s"])
            end = started["s"] + stop.airtime_s
            _span(
                record,
                "uplink_aborted",
                started["s"],
                end,
                link.tx_energy_j(stop.airtime_s),
                stop.bits_sent,
                attempt,
                ok=False,
            )
            raise
        guard.set_power(0.0)
        _add_attempt(record, link, airtime_s, plan.uplink_bits)
        _span(record, "queue", request_s, env.now - airtime_s)
        _span(
            record,
            "uplink",
            env.now - airtime_s,
            env.now,
            link.tx_energy_j(airtime_s),
            plan.uplink_bits,
            attempt,
            ok=not failed,
        )
        if not failed:
            return True
    return False


def _add_attempt(record: ClientRecord, link: Link, airtime_s: float, bits: float) -> None:
    record.uplink_airtime_s += airtime_s
    record.energy_tx_j += link.tx_energy_j(airtime_s)  # E_tx = p * airtime, every attempt
    record.uplink_bits += bits


def _backhaul_up(env: simpy.Environment, delay_s: float):
    """The update crosses the backhaul; the device is done, so only the deadline (or the
    round's over-commit quota) can stop it now."""
    until_s = env.now + delay_s
    while env.now < until_s:
        try:
            yield env.timeout(until_s - env.now)
        except simpy.Interrupt as stop:
            if stop.cause in ("deadline", "overcommit"):
                raise


def _span(record, kind, start_s, end_s, energy_j=0.0, bits=0.0, attempt=None, ok=True):
    if end_s > start_s or kind not in ("queue", "backhaul_down", "backhaul_up"):
        record.spans.append((kind, start_s, end_s, energy_j, bits, attempt, ok))


def interrupt_at(env: simpy.Environment, process: simpy.Process, time_s: float, cause: str):
    """Interrupt `process` at simulated time `time_s` unless it has ended by then."""
    yield env.timeout(max(0.0, time_s - env.now)) | process
    if process.is_alive:
        process.interrupt(cause)
