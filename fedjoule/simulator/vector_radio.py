"""The radio states of simulator/radio_states.py in closed form over arrays, for the numpy
system engine (docs/system-engine.md).

A client's radio in a round, as the SimPy client process runs it (client.client_round):

- at the download's connect (after the backhaul, at t_a): a tail still running from an
  earlier round is cut there (its energy up to t_a), else a promotion of promotion_s at
  promotion_power_w delays the download (NSA 5G: anchor_promotion_s at
  anchor_promotion_power_w first, `promotion_s` here is both phases);
- after the download (t_b) the tail runs, tail_s at tail_power_w; the upload's connect at
  the computation's end (t_c) cuts it, or, the tail ended, pays idle_power_w from its end
  to t_c and a promotion that delays the upload;
- waiting for the medium costs tail_power_w (booked as tail energy); a retransmission
  follows its attempt at once (the tail it leaves is cut at once);
- after the last attempt, or a stop while waiting or sending, a tail starts; it runs on
  after the round (the bank: `tail_end_s`, `settled_s`) and is charged by the time it runs
  (`settle`): to the round's row up to its end, to the gap after it, or at the end of the
  run by energy.end_of_run_tail.

Measured radios (lte, wifi, nbiot, nr-*) draw power affine in the rate, so a transfer of S bits
in t seconds costs slope x S / 1e6 + base x t whatever its rate did meanwhile
(devices/radio.py). The battery stop of a client whose power follows these states is not
placed here: a round where such a client could reach its battery threshold raises
RadioBatteryStop (the SimPy engine plays it).
"""

import math

import numpy as np

from fedjoule.devices.radio import BITS_PER_MBIT, MEASURED, class_radios, promotion_time_s
from fedjoule.devices.radio_range import RangeTally
from fedjoule.errors import FedjouleError


class RadioBatteryStop(FedjouleError):
    """A client with radio states could reach its battery threshold in this round."""


class VectorRadio:
    """Every client's radio parameters as (N,) arrays, and the tails between rounds."""

    def __init__(self, population_section, class_index: np.ndarray) -> None:
        classes = class_radios(population_section)
        index = np.asarray(class_index)

        def column(get) -> np.ndarray:
            return np.array([float(get(p)) for p in classes])[index]

        self.measured = column(lambda p: p.model in MEASURED) > 0
        self.promotion_s = column(promotion_time_s)  # every phase
        self.promotion_w = column(lambda p: p.promotion_power_w)
        self.anchor_s = column(lambda p: p.anchor_promotion_s)  # NSA's first phase
        self.anchor_w = column(lambda p: p.anchor_promotion_power_w)
        self.tail_s = column(lambda p: p.tail_s)
        self.tail_w = column(lambda p: p.tail_power_w)
        self.idle_w = column(lambda p: p.idle_power_w)
        self.up_slope = column(lambda p: p.uplink_w_per_mbps)
        self.up_base = column(lambda p: p.uplink_base_power_w)
        self.down_slope = column(lambda p: p.downlink_w_per_mbps)
        self.down_base = column(lambda p: p.base_power_w)
        # the measured ranges' tops in bit/s (inf: none, or a radio without a rate term)
        top = BITS_PER_MBIT  # (Mbit/s x 1e6, as devices/radio.charged_bits multiplies)
        self.up_max_bps = column(
            lambda p: p.uplink_max_mbps * top if p.model in MEASURED else math.inf
        )
        self.down_max_bps = column(
            lambda p: p.downlink_max_mbps * top if p.model in MEASURED else math.inf
        )
        # clients whose power the numpy engine's battery stops cannot follow
        self.special = self.measured | (self.promotion_s > 0) | (self.tail_s > 0)
        self.special |= self.idle_w > 0
        # transfers above each class's measured range (devices/radio_range.py)
        self.ranges = RangeTally.for_population(population_section)
        n = len(index)
        self.tail_end_s = np.zeros(n)  # the running tail ends here (past: idle)
        self.settled_s = np.zeros(n)  # its energy is charged up to here

    @property
    def any(self) -> bool:
        return bool(self.special.any())

    def receive_power_w(self, sel: np.ndarray, rate_bps: np.ndarray, plain_w: np.ndarray):
        """Power while receiving at `rate_bps` (devices/radio.receive_power_w)."""
        rate_bps = np.minimum(rate_bps, self.down_max_bps[sel])  # saturated at the range
        affine = self.down_slope[sel] * rate_bps / BITS_PER_MBIT + self.down_base[sel]
        return np.where(self.measured[sel], affine, plain_w)

    def transmit_energy_j(self, sel, bits, airtime_s, plain_w) -> np.ndarray:
        """Energy of sending `bits` in `airtime_s` (devices/radio.transmit_energy_j);
        `bits`: the bits the slope charges (channel/sharing.py's charged_bits: each
        attempt's bits, capped at the range's top rate x its airtime)."""
        affine = self.up_slope[sel] * bits / BITS_PER_MBIT + self.up_base[sel] * airtime_s
        return np.where(self.measured[sel], affine, plain_w * airtime_s)

    def promotion_energy_j(self, sel, *elapsed_s) -> np.ndarray:
        """Energy of the promotions whose first `elapsed_s` ran (each <= promotion_s):
        the anchor phase at anchor_w, the rest at promotion_w (devices/radio.py
        promotion_energy_j); without an anchor, promotion_w x their sum."""
        anchor_s = self.anchor_s[sel]
        extra_w = self.anchor_w[sel] - self.promotion_w[sel]
        return self.promotion_w[sel] * sum(elapsed_s) + extra_w * sum(
            np.minimum(e, anchor_s) for e in elapsed_s
        )

    def settle(self, until_s: float) -> np.ndarray:
        """Charge every running tail up to `until_s` (inf: to its end): each client's
        energy (N,), as RadioBank.settle."""
        end = np.minimum(until_s, self.tail_end_s)
        due = end > self.settled_s
        energy = np.zeros(len(self.tail_s))
        energy[due] = self.tail_w[due] * (end[due] - self.settled_s[due])
        self.settled_s[due] = end[due]
        return energy
