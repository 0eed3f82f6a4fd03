"""The measured range of each device class's radio: the transfers a run made faster than
the throughputs its power slope was measured at, counted per class and direction for
summary.json's warnings (docs/models.md#measured-range).

Above its range a measured radio's power saturates at the range's top (devices/radio.py);
the count says how often a run leaned on that, and how far (the highest mean rate seen).
A transfer: a download, or one upload attempt; its rate: bits / airtime. Both engines
count the same transfers: the SimPy engine from its records' spans, the numpy engine from
its downlink rates and channel/sharing.py's per-attempt counts.
"""

import math

import numpy as np

from fedjoule.devices.radio import BITS_PER_MBIT, MEASURED, RadioParams, class_radios

DIRECTIONS = ("uplink", "downlink")
_SPAN_DIRECTION = {"downlink": "downlink", "uplink": "uplink", "uplink_aborted": "uplink"}


class RangeTally:
    """Per device class and direction: transfers above the range, and the fastest."""

    def __init__(self, class_names: list[str], radios: list[RadioParams]) -> None:
        self.class_names, self.radios = list(class_names), list(radios)
        self.counts: dict[tuple[int, str], list[float]] = {}  # -> [transfers, top rate]

    @classmethod
    def for_population(cls, population_section) -> "RangeTally":
        names = [c.name for c in population_section.device_classes]
        return cls(names, class_radios(population_section))

    def top_bps(self, index: int, direction: str) -> float:
        """The top of class `index`'s range in `direction` (bit/s; inf: none)."""
        p = self.radios[index]
        if p.model not in MEASURED:
            return math.inf
        top = p.uplink_max_mbps if direction == "uplink" else p.downlink_max_mbps
        return top * BITS_PER_MBIT

    def add(self, index: int, direction: str, transfers: int, top_rate_bps: float) -> None:
        """Count `transfers` of class `index` above its range, the fastest at top_rate_bps."""
        if transfers <= 0:
            return
        entry = self.counts.setdefault((int(index), direction), [0, 0.0])
        entry[0] += int(transfers)
        entry[1] = max(entry[1], float(top_rate_bps))

    def add_rates(self, class_index: np.ndarray, direction: str, rates_bps: np.ndarray) -> None:
        """Count the transfers (their classes, their mean rates) above their class's range."""
        class_index, rates_bps = np.asarray(class_index), np.asarray(rates_bps, dtype=float)
        for index in np.unique(class_index):
            rates = rates_bps[class_index == index]
            over = rates[rates > self.top_bps(int(index), direction)]
            if over.size:
                self.add(int(index), direction, over.size, float(over.max()))

    def add_counts(self, class_index, direction: str, transfers, top_rates_bps) -> None:
        """Per transfer-maker (their classes): how many of its transfers were above the
        range and the fastest of them (channel/sharing.py's over_range, top_rate_bps)."""
        class_index, transfers = np.asarray(class_index), np.asarray(transfers)
        top_rates_bps = np.asarray(top_rates_bps, dtype=float)
        for index in np.unique(class_index[transfers > 0]):
            rows = (class_index == index) & (transfers > 0)
            self.add(int(index), direction, int(transfers[rows].sum()), top_rates_bps[rows].max())

    def add_records(self, records, class_index: np.ndarray) -> None:
        """The SimPy engine's: every download and upload attempt in the records' spans."""
        for rec in records:
            index = int(class_index[rec.client])
            for kind, start_s, end_s, _energy, bits, *_ in rec.spans:
                direction = _SPAN_DIRECTION.get(kind)
                if direction is None or end_s <= start_s:
                    continue
                rate_bps = bits / (end_s - start_s)
                if rate_bps > self.top_bps(index, direction):
                    self.add(index, direction, 1, rate_bps)

    def warnings(self) -> list[str]:
        """One line per class and direction that left its range (summary.json)."""
        lines = []
        order = sorted(self.counts.items(), key=lambda kv: (kv[0][0], DIRECTIONS.index(kv[0][1])))
        for (index, direction), (transfers, top_rate_bps) in order:
            p = self.radios[index]
            top_mbps = self.top_bps(index, direction) / BITS_PER_MBIT
            slope, base = (
                (p.uplink_w_per_mbps, p.uplink_base_power_w)
                if direction == "uplink"
                else (p.downlink_w_per_mbps, p.base_power_w)
            )
            lines.append(
                f"radio range: device class {self.class_names[index]} ({p.model} radio, "
                f"{direction} measured up to {top_mbps:g} Mbit/s): {transfers:,} "
                f"{direction} transfer{'s' if transfers != 1 else ''} faster, the fastest at "
                f"{top_rate_bps / BITS_PER_MBIT:.4g} Mbit/s; charged at the range's top power "
                f"{slope * top_mbps + base:.4g} W ({slope:g} W per Mbit/s x {top_mbps:g} + "
                f"{base:g} W), not extrapolated (docs/models.md#measured-range)"
            )
        return lines

    def state_dict(self) -> dict:
        """The counts as plain data (a checkpoint's)."""
        return {f"{i}:{d}": list(v) for (i, d), v in self.counts.items()}

    def load_state_dict(self, saved: dict | None) -> None:
        self.counts = {}
        for key, (transfers, top) in (saved or {}).items():
            index, direction = key.split(":")
            self.counts[(int(index), direction)] = [int(transfers), float(top)]
