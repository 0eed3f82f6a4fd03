"""Each client's radio as a state machine on the SimPy clock: idle -> promotion ->
connected -> tail -> idle (fedjoule/devices/radio.py has the powers and their sources).

Energy falls where time goes:

- promotion: before a transfer that finds the radio idle, promotion_s at
  promotion_power_w (it delays the transfer; NSA 5G first connects its LTE anchor,
  anchor_promotion_s at anchor_promotion_power_w, then the NR leg: one span each); a
  transfer inside the previous tail pays none and cuts that tail (energy_radio_promotion_j).
- connected without data: after a transfer the tail, tail_s at tail_power_w, and the wait
  for the medium (queued uploads) at the same power (energy_radio_tail_j). Every tail is
  charged in full, by the time it runs (engine.Simulation.settle_between_rounds): the
  part inside a round's time goes to that round's row; the part between two rounds (the
  wait for round.interval_s) to the row before the gap. So a tail that ends in the gap
  after its round is charged whole to the round it started in, whether or not the client
  is selected again; a later transfer of the client cuts a tail still running. The
  tails still running when the run ends follow energy.end_of_run_tail (charge, drop or
  separate).
- idle: idle_power_w, only while the client takes part in a round, from the end of its
  download to the start of its upload, once its tail has run out (energy_idle_j). Idle
  time outside that window is not the federated job's.

`RadioBank` holds the state between transfers and rounds as plain numbers (when each
client's tail ends, and up to when its energy was charged), kept in the Simulation and
its checkpoint, so a resumed run continues the same tails. `ClientRadio` runs one client's
radio during its round; its tail is a SimPy process (timeout to the tail's end, or
interrupted by the next transfer) that turns the radio idle and tells the BatteryGuard.
"""

import math

import numpy as np
import simpy

from fedjoule.devices.radio import (
    RadioParams,
    class_radios,
    has_states,
    is_plain_radiated,
    promotion_phases,
)
from fedjoule.devices.radio_range import RangeTally
from fedjoule.simulator.client import _span
from fedjoule.torch_import import load_torch


class RadioBank:
    """Every client's radio: its class's parameters and its tail, between rounds."""

    def __init__(
        self, classes: list[RadioParams], class_index: np.ndarray, names: list[str] = ()
    ) -> None:
        self.classes = classes
        self.class_index = np.asarray(class_index)
        n = len(self.class_index)
        self.tail_end_s = np.full(n, -math.inf)  # the running tail ends here (past: idle)
        self.settled_s = np.full(n, -math.inf)  # its energy is charged up to here
        self.stateful = any(has_states(p) for p in classes)
        # transfers above each class's measured range (devices/radio_range.py)
        self.ranges = RangeTally(list(names) or [p.model for p in classes], classes)

    @classmethod
    def for_world(cls, world) -> "RadioBank":
        pop = world.population
        names = [c.name for c in world.scenario.population.device_classes]
        return cls(class_radios(world.scenario.population), pop.class_index, names)

    def params(self, k: int) -> RadioParams:
        return self.classes[int(self.class_index[k])]

    def plan_params(self, k: int) -> RadioParams | None:
        """Client k's radio for its ClientPlan; None: the plain radiated model (today's
        formulas, bit for bit)."""
        p = self.params(k)
        return None if is_plain_radiated(p) else p

    def client(self, env: simpy.Environment, k: int, record) -> "ClientRadio | None":
        """Client k's radio for one round process; None when its model has no states."""
        p = self.params(k)
        return ClientRadio(env, self, k, p, record) if has_states(p) else None

    def settle(self, until_s: float) -> list[tuple[int, float, float, float]]:
        """Charge every running tail up to `until_s` (inf: to its end): (client, start_s,
        end_s, energy_j) of each stretch not charged yet, by client."""
        if not self.stateful:
            return []
        out = []
        for k in np.flatnonzero(self.tail_end_s > self.settled_s):
            k = int(k)
            start, end = float(self.settled_s[k]), min(until_s, float(self.tail_end_s[k]))
            if end > start:
                out.append((k, start, end, self.params(k).tail_power_w * (end - start)))
                self.settled_s[k] = end
        return out

    def state_dict(self) -> dict:
        torch = load_torch()  # the numpy system engine runs without torch
        return {
            "tail_end_s": torch.from_numpy(self.tail_end_s.copy()),
            "settled_s": torch.from_numpy(self.settled_s.copy()),
            "ranges": self.ranges.state_dict(),
        }

    def load_state_dict(self, saved: dict) -> None:
        self.tail_end_s = saved["tail_end_s"].numpy().copy()
        self.settled_s = saved["settled_s"].numpy().copy()
        self.ranges.load_state_dict(saved.get("ranges"))  # (absent: a checkpoint before it)


class ClientRadio:
    """One client's radio during one round process.

    The client process calls `begin` when it starts, `connect` (a generator: the
    promotion takes time) before each transfer, `sending` when the transfer starts,
    `release(open_window)` when it ends, and `end` when the process ends, however it ends.
    Powers go to `power.set(radio_w=...)`, so the BatteryGuard sees every change.
    """

    def __init__(self, env, bank: RadioBank, k: int, p: RadioParams, record) -> None:
        self.env, self.bank, self.k, self.p, self.record = env, bank, k, p, record
        self.power = None
        self.state = "tail" if env.now < bank.tail_end_s[k] else "idle"
        self.window = False  # between the download and the upload: idle costs idle_power_w
        self.since = env.now  # start of the current promotion, wait or idle stretch
        self.last_wait_j = 0.0  # the last wait for the medium's energy (its queue span)
        self.promotion_w = p.promotion_power_w  # the power of the promotion phase running
        self._tail_process: simpy.Process | None = None

    # ------------------------------------------------------------------ the process's calls
    def begin(self, power) -> None:
        """At the process's start: charge the tail that ran since the last settlement (it
        is this round's, whether it still runs or ran out before this process started; the
        battery the guard's budget came from does not know it yet), and draw the tail's
        power until it runs out."""
        self.power = power
        power.add_spent(self._charge_tail(self.env.now))
        if self.state == "tail":
            power.set(radio_w=self.p.tail_power_w)
            self._start_tail(self.bank.tail_end_s[self.k] - self.env.now)

    def connect(self):
        """Before a transfer (SimPy generator): cut the tail, or promote from idle."""
        env, p = self.env, self.p
        if self.state == "tail":
            self._charge_tail(env.now)
            self.bank.tail_end_s[self.k] = env.now  # cut: no promotion
            self._stop_tail()
        else:
            self._charge_idle(env.now)
            for seconds, watts in promotion_phases(p):  # NSA 5G: LTE anchor, then NR leg
                self.state, self.since, self.promotion_w = "promotion", env.now, watts
                self.power.set(radio_w=watts)
                yield env.timeout(seconds)
                self._charge_promotion(env.now, ok=True)
        self.window = False
        self.state, self.since = "connected", env.now
        self.power.set(radio_w=p.tail_power_w)  # connected, no data yet

    def sending(self) -> float:
        """The transfer starts: returns the energy of the wait since `connect` (connected
        at the tail's power, booked as tail energy)."""
        self.last_wait_j = self._charge_wait(self.env.now)
        self.state = "busy"
        return self.last_wait_j

    def release(self, open_window: bool = False) -> None:
        """The transfer ended: the tail starts (then idle). `open_window`: the download
        ended, so idle counts from here until the upload."""
        env, p, k = self.env, self.p, self.k
        self.window = self.window or open_window
        self.bank.tail_end_s[k] = env.now + p.tail_s
        self.bank.settled_s[k] = env.now
        if p.tail_s > 0:
            self.state = "tail"
            self.power.set(radio_w=p.tail_power_w)
            self._start_tail(p.tail_s)
        else:
            self.state, self.since = "idle", env.now
            self.power.set(radio_w=p.idle_power_w if self.window else 0.0)

    def end(self) -> None:
        """The process ends (arrived or dropped): charge the state it is in up to now."""
        now = self.env.now
        if self.state == "promotion":  # cut short: the connection never came up
            self._charge_promotion(now, ok=False)
            self.state, self.since = "idle", now
        elif self.state == "connected":  # stopped while waiting for the medium
            e = self._charge_wait(now)
            if now > self.since:
                _add_span(self.record, "queue", self.since, now, e, ok=False)
            self.release()
        elif self.state == "busy":  # stopped while sending or receiving
            self.release()
        if self.state == "tail":
            self._charge_tail(now)
            self._stop_tail()
        else:
            self._charge_idle(now)
        self.window = False

    # ------------------------------------------------------------------ the tail process
    def _start_tail(self, delay_s: float) -> None:
        self._tail_process = self.env.process(self._tail(max(0.0, delay_s)))

    def _stop_tail(self) -> None:
        process, self._tail_process = self._tail_process, None
        if process is not None and process.is_alive:
            process.interrupt("cut")

    def _tail(self, delay_s: float):
        """The tail runs out unless the next transfer cuts it (an interrupt)."""
        try:
            yield self.env.timeout(delay_s)
        except simpy.Interrupt:
            return
        self._tail_process = None
        self._charge_tail(float(self.bank.tail_end_s[self.k]))
        self.state, self.since = "idle", float(self.bank.tail_end_s[self.k])
        self.power.set(radio_w=self.p.idle_power_w if self.window else 0.0)

    # ------------------------------------------------------------------ charging
    def _charge_tail(self, until_s: float) -> float:
        bank, k = self.bank, self.k
        start, end = float(bank.settled_s[k]), min(until_s, float(bank.tail_end_s[k]))
        if not end > start:
            return 0.0
        e = self.p.tail_power_w * (end - start)
        bank.settled_s[k] = end
        self.record.energy_radio_tail_j += e
        _add_span(self.record, "tail", start, end, e)
        return e

    def _charge_wait(self, until_s: float) -> float:
        e = self.p.tail_power_w * (until_s - self.since) if until_s > self.since else 0.0
        self.record.energy_radio_tail_j += e
        self.since = until_s
        return e

    def _charge_idle(self, until_s: float) -> None:
        if self.state != "idle" or not self.window or not until_s > self.since:
            return
        e = self.p.idle_power_w * (until_s - self.since)
        self.record.energy_idle_j += e
        _add_span(self.record, "idle", self.since, until_s, e)
        self.since = until_s

    def _charge_promotion(self, until_s: float, ok: bool) -> None:
        if not until_s > self.since:
            return
        e = self.promotion_w * (until_s - self.since)
        self.record.energy_radio_promotion_j += e
        _add_span(self.record, "promotion", self.since, until_s, e, ok=ok)


def _add_span(record, kind, start_s, end_s, energy_j, ok=True) -> None:
    _span(record, kind, start_s, end_s, energy_j, ok=ok)
