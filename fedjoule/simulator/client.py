"""What one selected client does in a round, as a SimPy process, and what it spends."""

from dataclasses import dataclass

import simpy

from fedjoule.channel.link import Link
from fedjoule.channel.medium import TransmissionAborted


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
    outcome: str = "running"  # "arrived", or the cause of the drop ("deadline", "offline")
    trained: bool = False  # finished its local computation
    end_s: float = 0.0

    @property
    def energy_total_j(self) -> float:
        return self.energy_compute_j + self.energy_tx_j + self.energy_rx_j


def client_round(env: simpy.Environment, plan: ClientPlan, medium, record: ClientRecord):
    """Receive the model, train K steps, upload; an interrupt (deadline, went offline) stops
    it where it is, and the energy of the part already done still counts."""
    phase, phase_start = "downlink", env.now
    try:
        yield env.timeout(plan.downlink_s)
        record.downlink_airtime_s = plan.downlink_s
        record.energy_rx_j = plan.rx_power_w * plan.downlink_s  # E_rx = p_rx * airtime

        phase, phase_start = "compute", env.now
        yield env.timeout(plan.compute_s)
        record.compute_time_s = plan.compute_s
        record.energy_compute_j = plan.compute_energy_j  # K * kappa * c * B * f^2
        record.trained = True

        phase = "uplink"
        airtime_s = yield from medium.transmit(plan.uplink_bits, plan.uplink)
        record.uplink_airtime_s = airtime_s
        record.energy_tx_j = plan.uplink.tx_energy_j(airtime_s)  # E_tx = p * airtime
        record.uplink_bits = plan.uplink_bits
        record.outcome = "arrived"
    except TransmissionAborted as stop:
        record.uplink_airtime_s = stop.airtime_s
        record.energy_tx_j = plan.uplink.tx_energy_j(stop.airtime_s)
        record.uplink_bits = stop.bits_sent
        record.outcome = stop.cause
    except simpy.Interrupt as stop:
        elapsed_s = env.now - phase_start
        if phase == "downlink":
            record.downlink_airtime_s = elapsed_s
            record.energy_rx_j = plan.rx_power_w * elapsed_s
        else:  # compute at constant power: the fraction of the K steps' energy done so far
            record.compute_time_s = elapsed_s
            fraction = elapsed_s / plan.compute_s if plan.compute_s > 0 else 1.0
            record.energy_compute_j = plan.compute_energy_j * fraction
        record.outcome = stop.cause
    record.end_s = env.now


def interrupt_at(env: simpy.Environment, process: simpy.Process, time_s: float, cause: str):
    """Interrupt `process` at simulated time `time_s` unless it has ended by then."""
    yield env.timeout(max(0.0, time_s - env.now)) | process
    if process.is_alive:
        process.interrupt(cause)
