"""A plug-in policy in the round's policy step (policies/plugin.py, docs/writing-a-policy.md):
built once from the scenario's policy.class and options; its select and allocate called
with the observation; a failure, or a decision that breaks the round's limits, refused
with one error naming its spec (plugins.call_plugin, policies.observation.check_decision);
its own state (state_dict), plain data only, saved with the checkpoint's policy state."""

import numpy as np

from fedjoule.errors import FedjouleError
from fedjoule.plugins import call_plugin
from fedjoule.policies.observation import Decision, Observation, check_decision
from fedjoule.policies.plugin import DECIDED, Plan, decides, policy_class
from fedjoule.scenarios.schema.policy import band_share_refusal
from fedjoule.simulator.checkpoint import as_numpy

PLAIN = "numbers, strings, None, lists, dicts with string keys, numpy arrays of numbers"


def plain_refusal(value, where: str) -> str | None:
    """What in `value` a checkpoint cannot hold as plain data (`where`: its path), or None."""
    if value is None or isinstance(value, bool | int | float | str | np.bool_):
        return None
    if isinstance(value, np.number | np.ndarray):  # what a tensor holds (torch.from_numpy):
        kind, size = value.dtype.kind, value.dtype.itemsize  # no long double, no complex
        if kind in "biu" or (kind == "f" and size <= 8):
            return None
        return f"{where}: an array of {value.dtype}" if value.ndim else f"{where}: a {value.dtype}"
    if isinstance(value, list | tuple):
        found = (plain_refusal(v, f"{where}[{i}]") for i, v in enumerate(value))
        return next((f for f in found if f), None)
    if isinstance(value, dict):
        for key, v in value.items():
            if not isinstance(key, str):
                return f"{where}: the key {key!r}"
            found = plain_refusal(v, f"{where}[{key!r}]")
            if found:
                return found
        return None
    return f"{where}: a {type(value).__name__}"


class PluginPolicy:
    """The scenario's plug-in policy object, and the checks on what it returns."""

    def __init__(self, section) -> None:
        self.spec = section.class_
        recorded = section.source.model_dump() if section.source else None
        cls, _ = policy_class(self.spec, (), recorded)
        what = f"policy {self.spec!r} (its constructor)"
        self.policy = call_plugin(what, cls, **section.options)
        self.allocates = decides(cls, "allocate")
        self.keeps_state = decides(cls, "state_dict")

    def select(self, obs: Observation, m: int, gen: np.random.Generator) -> np.ndarray:
        """Its selection: at most m of the candidates, each once, sorted."""
        chosen = call_plugin(f"policy {self.spec!r} select", self.policy.select, obs, m, gen)
        ids = self.ids(chosen)
        if len(ids) > m:
            raise FedjouleError(
                f"policy {self.spec!r} selected {len(ids)} clients; this round selects at most {m}"
            )
        check_decision(Decision(ids), self.spec, obs.client_id)
        return np.sort(ids)

    def state_dict(self) -> dict | None:
        """Its own state (Policy.state_dict), checked to be plain data; None when the class
        keeps none."""
        if not self.keeps_state:
            return None
        what = f"policy {self.spec!r} state_dict"
        state = call_plugin(what, self.policy.state_dict)
        refusal = plain_refusal(state, "") if isinstance(state, dict) else "not a dict"
        if refusal:
            raise FedjouleError(
                f"{what} returned {str(state)[:60]} ({refusal.lstrip(': ')}); a checkpoint "
                f"holds plain data only: a dict of {PLAIN}"
            )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Its state back from a checkpoint (its arrays as numpy arrays)."""
        what = f"policy {self.spec!r} load_state_dict"
        call_plugin(what, self.policy.load_state_dict, as_numpy(state))

    def ids(self, chosen) -> np.ndarray:
        ids = np.atleast_1d(np.asarray(chosen))
        if ids.ndim != 1 or not (ids.size == 0 or np.issubdtype(ids.dtype, np.integer)):
            raise FedjouleError(
                f"policy {self.spec!r} select returned {chosen!r}; expected client ids "
                "(integers from obs.client_id)"
            )
        return ids.astype(int)

    def allocate(self, step, allocation, r: int) -> None:
        """Its allocate over the round's plan (`step`: the PolicyStep); what it returns
        replaces the allocation's values, each checked."""
        sel, world = allocation.clients, step.world
        obs = step.observer.observation(r, sel, step.n_samples)
        plan = self.plan(step, allocation)
        given = call_plugin(f"policy {self.spec!r} allocate", self.policy.allocate, obs, plan)
        if given is None:
            return
        if not isinstance(given, dict) or not set(given) <= set(DECIDED):
            raise FedjouleError(
                f"policy {self.spec!r} allocate returned {given!r}; expected None or a dict "
                f"with any of {', '.join(DECIDED)}"
            )
        decided = {k: np.asarray(v) for k, v in given.items() if v is not None}
        for name, value in decided.items():
            if value.shape != sel.shape:
                raise FedjouleError(
                    f"policy {self.spec!r} gave {value.size} values of {name} for "
                    f"{len(sel)} selected clients"
                )
        self.check_physics(world, decided, plan)
        others = {k: v for k, v in decided.items() if k != "band_share"}
        ranges = (step.freq_low_hz[sel], step.freq_high_hz[sel])
        check_decision(Decision(sel, None, **others), self.spec, sel, ranges)
        if "band_share" in decided:
            serving = world.cell.serving_cell
            cells = np.zeros(len(sel), dtype=int) if serving is None else serving[sel]
            for c in np.unique(cells):  # each cell's shares of its own band
                rows = cells == c
                check_decision(
                    Decision(sel[rows], band_share=decided["band_share"][rows]), self.spec, sel
                )
            allocation.band_share = decided["band_share"].astype(float)
        if "local_steps" in decided:
            allocation.local_steps = decided["local_steps"].astype(int)
        if "cpu_freq_hz" in decided:
            allocation.cpu_freq_hz = decided["cpu_freq_hz"].astype(float)

    def plan(self, step, allocation) -> Plan:
        sel = allocation.clients
        freq_hz, step_s = step.freq_now_hz[sel], step.world.step_time_s[sel]
        if allocation.cpu_freq_hz is not None:  # c B / f: the step time scales by f_now / f
            step_s = step_s * freq_hz / allocation.cpu_freq_hz
            freq_hz = np.asarray(allocation.cpu_freq_hz, dtype=float)
        return Plan(
            client_id=sel,
            local_steps=np.asarray(allocation.local_steps),
            cpu_freq_hz=freq_hz,
            freq_min_hz=step.freq_low_hz[sel],
            freq_max_hz=step.freq_high_hz[sel],
            step_time_s=step_s,
            expected_comm_s=step.observer.expected_comm_s(sel),
            deadline_s=step.world.scenario.round.deadline_s,
        )

    def check_physics(self, world, decided: dict, plan: Plan) -> None:
        """A band share needs an FDMA band on the channel model; a CPU frequency a DVFS
        range and no capacity trace."""
        scenario = world.scenario
        refusal = band_share_refusal(scenario)
        if "band_share" in decided and refusal:
            raise FedjouleError(f"policy {self.spec!r} set band shares; a policy that {refusal}")
        if "cpu_freq_hz" not in decided:
            return
        if scenario.population.capacity_trace is not None:
            raise FedjouleError(
                f"policy {self.spec!r} set CPU frequencies, but population.capacity_trace "
                "sets the compute time"
            )
        fixed = np.flatnonzero(np.isnan(plan.freq_min_hz))
        if fixed.size:
            raise FedjouleError(
                f"policy {self.spec!r} set client {plan.client_id[fixed[0]]}'s CPU frequency, "
                "but its device class has no DVFS range (allowed: compute cpu, or measured "
                "with a dvfs table)"
            )
