"""What one selected client does in a round, as a SimPy process, and what it spends."""

import math
from dataclasses import dataclass, field, make_dataclass

import simpy

from fedjoule.channel.link import Link
from fedjoule.channel.medium import TransmissionAborted
from fedjoule.devices.radio import RadioParams, transmit_energy_j, transmit_power_w
from fedjoule.energy_kinds import BUILT_IN, DEVICE, ENERGY_FIELDS

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
    downlink_bits: float = 0.0  # the broadcast's bits (the downlink span carries them)
    backhaul_up_s: float = 0.0  # base station -> server after the upload
    cell: int = 0
    # the radio (devices/radio.py); None: the plain radiated model, p while sending and
    # rx_power_w while receiving (rx_power_w above is then the class's, else the model's)
    radio: RadioParams | None = None
    # channel.interference=cochannel: the broadcast goes over this medium (its airtime
    # follows the downlink SINR) instead of taking downlink_s
    downlink_medium: object | None = None
    downlink_link: Link | None = None  # the broadcast's link (with downlink_medium)
    # cochannel with rate=fixed: an attempt fails when its SINR falls below this (2^r - 1)
    # at any instant of it (interference.py); attempt_fails then lists only False
    fail_below_sinr: float | None = None
    fail_band_hz: float = 0.0  # the nominal band that SINR is on (as the noise-only rule's)


# a client's energy in a round: a float field per built-in energy kind in the total, 0 to
# start with (fedjoule/energy_kinds.py; keyword-only, so that ClientRecord(client, ...)
# stays as it is); a registered kind is an attribute, 0 until spent (ClientRecord.spend)
ClientEnergy = make_dataclass(
    "ClientEnergy",
    [(k.column, float, 0.0) for k in BUILT_IN if k.spender == DEVICE and k.in_total],
    kw_only=True,
)
ClientEnergy.__module__ = __name__  # (pickled by name, as a class written here)


@dataclass
class ClientRecord(ClientEnergy):
    """What happened to one client in a round: time, energy (ClientEnergy's fields), bits,
    and how it ended."""

    client: int
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
    # |h|^2 of each possible upload attempt (index: a span's `attempt`); None: not recorded
    uplink_fades: list | None = None
    # time-mean linear SINR of each upload attempt (channel.interference=cochannel)
    uplink_sinr: list | None = None
    # what a policy decided for this client in the round (start_s and the decided values:
    # simulator/decisions.py), its events.jsonl `decision` line; None: nothing decided
    decision: dict | None = None

    @property
    def energy_total_j(self) -> float:
        return sum(getattr(self, name) for name in ENERGY_FIELDS)  # energy_kinds.total_j

    def __getattr__(self, name: str):
        if name in ENERGY_FIELDS:  # a registered kind this client has not spent
            return 0.0
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def spend(self, column: str, event: str, start_s: float, end_s: float, energy_j: float):
        """Charge `energy_j` of the energy kind `column` to this client, as an `event` span
        (events.jsonl) from start_s to end_s: how a model outside the package spends a
        registered kind (fedjoule/energy_kinds.py)."""
        setattr(self, column, getattr(self, column) + energy_j)
        _span(self, event, start_s, end_s, energy_j)


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

    def add_spent(self, energy_j: float) -> None:
        """Energy of this round spent before the guard started (a radio tail running since
        the previous round); counts from the next `set_power`."""
        self.spent_j += energy_j

    def _fire(self, generation: int) -> None:
        if generation == self._generation and self.process is not None and self.process.is_alive:
            self.process.interrupt("battery")


class _NoGuard:
    def set_power(self, power_w: float) -> None:
        pass

    def add_spent(self, energy_j: float) -> None:
        pass


class _Power:
    """The device's power, computation + radio; every change goes to the guard."""

    def __init__(self, guard) -> None:
        self.guard, self.compute_w, self.radio_w = guard, 0.0, 0.0

    def set(self, compute_w: float | None = None, radio_w: float | None = None) -> None:
        if compute_w is not None:
            self.compute_w = compute_w
        if radio_w is not None:
            self.radio_w = radio_w
        self.guard.set_power(self.compute_w + self.radio_w)

    def add_spent(self, energy_j: float) -> None:
        self.guard.add_spent(energy_j)


def client_round(
    env: simpy.Environment,
    plan: ClientPlan,
    medium,
    record: ClientRecord,
    guard: BatteryGuard | None = None,
    radio=None,
):
    """Receive the model, train K steps, upload (retransmitting failed attempts); an
    interrupt (deadline, went offline, battery, over-commit) stops it where it is, and the
    energy of the part already done still counts. `radio`: the client's radio states
    (radio_states.ClientRadio: promotion before a transfer from idle, tail after it, idle
    between download and upload); None: a radio without states."""
    power = _Power(guard or _NoGuard())
    record.cell = plan.cell
    if radio is not None:
        radio.begin(power)
    phase, phase_start = "backhaul_down", env.now
    try:
        if plan.backhaul_down_s > 0:  # the model crosses the backhaul to this cell
            yield env.timeout(plan.backhaul_down_s)
            _span(record, "backhaul_down", phase_start, env.now)
        if radio is not None:  # connect: cut the tail, or promote from idle
            phase = "promotion"
            yield from radio.connect()
            radio.sending()
        phase, phase_start = "downlink", env.now
        yield from _download(env, plan, record, power)
        phase, phase_start = "compute", env.now
        yield from _compute(env, plan, record, power, radio)

        phase = "uplink"
        if not (yield from _upload(env, plan, medium, record, power, radio)):
            record.outcome = "outage"
            if radio is not None:
                radio.end()
            record.end_s = env.now
            return
        if radio is None:
            power.set(radio_w=0.0)
        phase, phase_start = "backhaul_up", env.now
        if plan.backhaul_up_s > 0:
            yield from _backhaul_up(env, plan.backhaul_up_s)
            _span(record, "backhaul_up", phase_start, env.now)
        record.outcome = "arrived"
    except simpy.Interrupt as stop:
        _stopped(env, plan, record, stop, phase, phase_start)
    if radio is not None:
        radio.end()
    record.end_s = env.now


def _download(env, plan: ClientPlan, record: ClientRecord, power: _Power):
    """Receive the model at rx power: the downlink's airtime, energy and span."""
    start_s = env.now
    power.set(radio_w=plan.rx_power_w)
    if plan.downlink_medium is not None:  # the airtime follows the downlink SINR
        yield from _receive(env, plan)
        record.downlink_airtime_s = env.now - start_s
    else:
        yield env.timeout(plan.downlink_s)
        record.downlink_airtime_s = plan.downlink_s
    record.energy_rx_j = plan.rx_power_w * record.downlink_airtime_s  # E_rx = p_rx * t
    _span(record, "downlink", start_s, env.now, record.energy_rx_j, plan.downlink_bits)


def _compute(env, plan: ClientPlan, record: ClientRecord, power: _Power, radio=None):
    """Train the K local steps at constant power: the compute time, energy and span."""
    start_s = env.now
    if radio is not None:
        radio.release(open_window=True)  # the tail, then idle until the upload
    power.set(
        compute_w=plan.compute_energy_j / plan.compute_s if plan.compute_s > 0 else 0.0,
        radio_w=None if radio is not None else 0.0,
    )
    yield env.timeout(plan.compute_s)
    record.compute_time_s = plan.compute_s
    record.energy_compute_j = plan.compute_energy_j  # K * kappa * c * B * f^2
    record.trained = True
    _span(record, "compute", start_s, env.now, record.energy_compute_j)
    power.set(compute_w=0.0)


def _stopped(env, plan: ClientPlan, record: ClientRecord, stop, phase: str, phase_start: float):
    """The part of the interrupted phase already done: its time, energy and span; the
    stop's cause as the outcome."""
    elapsed_s = env.now - phase_start
    if phase == "downlink":
        record.downlink_airtime_s = elapsed_s
        record.energy_rx_j = plan.rx_power_w * elapsed_s
        # bits received before the stop, at the constant downlink rate
        got = plan.downlink_bits * elapsed_s / plan.downlink_s if plan.downlink_s > 0 else 0.0
        if isinstance(stop, TransmissionAborted):  # over the co-channel medium
            got = stop.bits_sent
        _span(record, "downlink", phase_start, env.now, record.energy_rx_j, got, ok=False)
    elif phase == "compute":  # constant power: the fraction of the K steps' energy done
        record.compute_time_s = elapsed_s
        fraction = elapsed_s / plan.compute_s if plan.compute_s > 0 else 1.0
        record.energy_compute_j = plan.compute_energy_j * fraction
        _span(record, "compute", phase_start, env.now, record.energy_compute_j, ok=False)
    elif phase.startswith("backhaul"):
        _span(record, phase, phase_start, env.now, ok=False)
    record.outcome = stop.cause


def _upload(env, plan: ClientPlan, medium, record: ClientRecord, power: _Power, radio=None):
    """Up to 1 + max_retx attempts; each costs airtime and energy. True if one got through.
    With radio states each attempt first connects (cut tail or promotion), waits for the
    medium connected, and leaves a tail."""
    fails = plan.attempt_fails or [False]
    for attempt, failed in enumerate(fails):
        link = plan.attempt_links[attempt] if plan.attempt_links else plan.uplink
        if radio is not None:
            yield from radio.connect()
        started, wait = {"s": env.now}, {"j": 0.0}

        def on_start(started=started, wait=wait, link=link):
            started["s"] = env.now
            if radio is not None:
                wait["j"] = radio.sending()  # the wait for the medium, connected
            power.set(radio_w=_tx_power_w(plan, link, 0.0))

        def on_rate(rate_bps: float, link=link):  # a measured radio's power follows the rate
            power.set(radio_w=_tx_power_w(plan, link, rate_bps))

        request_s = env.now
        record.uplink_attempts += 1
        stats: dict = {"nominal_band_hz": plan.fail_band_hz}
        extra = {"client": plan.client, "stats": stats} if _reports_sinr(medium) else {}
        try:
            airtime_s = yield from medium.transmit(
                plan.uplink_bits,
                link,
                on_start=on_start,
                on_rate=None if plan.radio is None else on_rate,
                **extra,
            )
        except TransmissionAborted as stop:
            _note_sinr(record, stats)
            energy_j = _tx_energy_j(plan, link, stop.bits_sent, stop.airtime_s)
            _add_attempt(record, energy_j, stop.airtime_s, stop.bits_sent)
            _span(record, "queue", request_s, started["s"], wait["j"])
            end = started["s"] + stop.airtime_s
            _span(
                record,
                "uplink_aborted",
                started["s"],
                end,
                energy_j,
                stop.bits_sent,
                attempt,
                ok=False,
            )
            raise
        _note_sinr(record, stats)
        if plan.fail_below_sinr is not None and "sinr_min_nominal" in stats:
            # the minimum over the attempt, on the nominal band
            failed = stats["sinr_min_nominal"] < plan.fail_below_sinr
        if radio is None:
            power.set(radio_w=0.0)
        else:
            radio.release()
        energy_j = _tx_energy_j(plan, link, plan.uplink_bits, airtime_s)
        _add_attempt(record, energy_j, airtime_s, plan.uplink_bits)
        _span(record, "queue", request_s, env.now - airtime_s, wait["j"])
        _span(
            record,
            "uplink",
            env.now - airtime_s,
            env.now,
            energy_j,
            plan.uplink_bits,
            attempt,
            ok=not failed,
        )
        if not failed:
            return True
    return False


def _reports_sinr(medium) -> bool:
    return getattr(medium, "reports_sinr", False)


def _note_sinr(record: ClientRecord, stats: dict) -> None:
    if "sinr_mean" in stats:
        if record.uplink_sinr is None:
            record.uplink_sinr = []
        record.uplink_sinr.append(float(stats["sinr_mean"]))


def _receive(env, plan: ClientPlan):
    """The broadcast over the co-channel downlink medium (its rate follows the SINR)."""
    yield from plan.downlink_medium.transmit(
        plan.downlink_bits, plan.downlink_link, client=plan.client
    )


def _tx_power_w(plan: ClientPlan, link: Link, rate_bps: float) -> float:
    """Power while sending: p (plain radiated), else the radio model's at `rate_bps`."""
    if plan.radio is None:
        return link.tx_power_w
    return transmit_power_w(plan.radio, rate_bps, link.tx_power_w)


def _tx_energy_j(plan: ClientPlan, link: Link, bits: float, airtime_s: float) -> float:
    if plan.radio is None:
        return link.tx_energy_j(airtime_s)  # E_tx = p * airtime, every attempt
    return transmit_energy_j(plan.radio, bits, airtime_s, link.tx_power_w)


def _add_attempt(record: ClientRecord, energy_j: float, airtime_s: float, bits: float) -> None:
    record.uplink_airtime_s += airtime_s
    record.energy_tx_j += energy_j
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
