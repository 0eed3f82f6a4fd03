"""Batteries: who may take part, energy left before the threshold, and charging."""

import math

import numpy as np


def charging_now(availability, client: int, time_s: float) -> bool:
    """Whether the client is plugged in at `time_s` (only diurnal availability charges)."""
    charging = getattr(availability, "charging", None)
    return bool(charging(client, time_s)) if charging else False


def eligible_mask(battery_j: np.ndarray, population, availability, time_s: float) -> np.ndarray:
    """Above the battery threshold, or below it but charging (docs/models.md#battery)."""
    above = battery_j > population.battery_threshold_j
    if getattr(availability, "charging", None) is None:
        return above
    plugged = np.array([charging_now(availability, k, time_s) for k in range(len(battery_j))])
    return above | plugged


def budget_j(battery_j: np.ndarray, population, availability, client: int, time_s: float):
    """Energy the client may spend this round before it reaches its threshold and goes
    offline (inf while charging: a plugged-in device does not run flat)."""
    if charging_now(availability, client, time_s):
        return math.inf
    return max(0.0, float(battery_j[client] - population.battery_threshold_j[client]))


def charge(battery_j: np.ndarray, population, availability, t0_s: float, t1_s: float) -> None:
    """Add the charge taken in [t0_s, t1_s] (charge power x time plugged in), capped at the
    capacity; in place."""
    window = getattr(availability, "charging_time_s", None)
    if window is None or t1_s <= t0_s:
        return
    gained = population.charge_power_w * window(t0_s, t1_s)  # E = P_charge * t
    np.minimum(battery_j + gained, population.battery_capacity_j, out=battery_j)
