"""A plug-in policy (docs/writing-a-policy.md): the fullest batteries take part, but no client
waits more than `max_wait_rounds` rounds; a client low on charge runs half its local steps."""

import numpy as np

from fedjoule.policies.plugin import Policy


class FullestWithFloor(Policy):
    """Overdue clients first (the longest waiting), then the fullest batteries."""

    def __init__(self, max_wait_rounds: int = 4, low_battery: float = 0.5):
        self.max_wait_rounds = max_wait_rounds
        self.low_battery = low_battery

    def select(self, obs, m, gen):
        overdue = obs.age_rounds > self.max_wait_rounds
        # sort keys, the last first: overdue, then age (overdue only), battery, then id
        wait = np.where(overdue, obs.age_rounds, 0)
        order = np.lexsort((obs.client_id, -obs.battery_fraction, -wait, ~overdue))
        return np.sort(obs.client_id[order[:m]])

    def allocate(self, obs, plan):
        low = obs.battery_fraction < self.low_battery
        halved = np.maximum(1, plan.local_steps // 2)
        return {"local_steps": np.where(low, halved, plan.local_steps)}
