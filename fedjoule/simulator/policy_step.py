"""The policy step of a sync round, an async or buffered dispatch and a hierarchical edge
round (docs/policies.md): the scenario's selector over the observation (RoundSteps.select)
and its allocators filling an Allocation's local steps, CPU frequencies and band shares
(RoundSteps.allocate), every decision checked (policies.observation.check_decision).
Built only for a scenario with a policy."""

import numpy as np

from fedjoule import rng
from fedjoule.channel.units import db_to_linear
from fedjoule.devices.dvfs import freq_range_hz
from fedjoule.errors import FedjouleError
from fedjoule.policies.bandwidth import Uplink, equal_finish_shares
from fedjoule.policies.deadline import deadline_frequency_hz, deadline_steps
from fedjoule.policies.min_energy import InfeasibleAllocation, min_energy_weights
from fedjoule.policies.observation import Decision, check_decision
from fedjoule.policies.select import DRAWING, SELECTORS
from fedjoule.scenarios.schema.policy import LOSS_DRIVEN
from fedjoule.simulator.observe import Observer
from fedjoule.simulator.policy_plugin import PluginPolicy
from fedjoule.simulator.round_row import ClientsOfRound
from fedjoule.simulator.round_rules import selection_size


def make_policy_step(engine):
    """The engine's PolicyStep, or None for a scenario without a policy (no cost)."""
    policy = engine.world.scenario.policy
    if policy.is_default:
        return None
    if policy.select in LOSS_DRIVEN and not getattr(engine, "learns", False):
        raise FedjouleError(refusal_without_training(policy.select))
    return PolicyStep(engine.world)


def refusal_without_training(select: str) -> str:
    """Why a loss-driven selector does not run without a model."""
    return (
        f"policy.select={select} ranks clients by the training loss they report, which a "
        "run without training (--no-train, the system engines) does not have: run it with "
        "training, or choose a selector that needs no loss"
    )


def dvfs_ranges(world) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each client's DVFS range (lowest, highest Hz) and the frequency its step time was
    priced at: compute cpu, its dvfs table's training cluster (without one, its class's
    [cpu_freq_min_hz, cpu_freq_max_hz], widened to its fixed frequency), at its drawn or
    fixed frequency; measured with a dvfs table, the table's, at its cpu_freq_hz or the
    table's top speed (where it was measured). nan for a class without (the schema
    refuses frequency=deadline there)."""
    pop = world.population
    low, high, now = (np.full(pop.size, np.nan) for _ in range(3))
    for index, cls in enumerate(world.scenario.population.device_classes):
        rows = pop.class_index == index
        if cls.dvfs is not None and cls.compute in ("cpu", "measured"):
            low[rows], high[rows] = freq_range_hz(cls.dvfs)
        elif cls.compute == "cpu":
            low[rows] = np.minimum(cls.cpu_freq_min_hz, pop.cpu_freq_hz[rows])
            high[rows] = np.maximum(cls.cpu_freq_max_hz, pop.cpu_freq_hz[rows])
        if cls.compute == "cpu":
            now[rows] = pop.cpu_freq_hz[rows]
        elif cls.compute == "measured" and cls.dvfs is not None:
            now[rows] = cls.cpu_freq_hz if cls.cpu_freq_hz is not None else high[rows]
    return low, high, now


def cell_shares(uplink: Uplink, upload_left_s: np.ndarray | None) -> np.ndarray:
    """One cell's band shares: min-energy's within each client's time left for its upload
    (upload_left_s), equal-finish's without it or where no split meets them all."""
    if upload_left_s is not None:
        try:
            return min_energy_weights(uplink, upload_left_s)
        except InfeasibleAllocation:
            pass
    return equal_finish_shares(uplink)


class PolicyStep:
    """The scenario's policy over its Observer (observe.py)."""

    def __init__(self, world) -> None:
        self.world = world
        self.policy = world.scenario.policy
        self.observer = Observer(world)
        data = getattr(world, "data", None)
        samples = data.client_samples if data is not None else world.client_samples
        n = world.population.size
        self.n_samples = np.ones(n) if samples is None else np.asarray(samples, dtype=float)
        self.freq_low_hz, self.freq_high_hz, self.freq_now_hz = dvfs_ranges(world)
        self.plugin = None if self.policy.class_ is None else PluginPolicy(self.policy)
        self.sent_by_dispatch: dict | None = None  # keep_sent_losses

    # ------------------------------------------------------------------ 2. select
    def select(
        self, candidates: np.ndarray, r: int, weights, key=(), members=None, m=None
    ) -> np.ndarray:
        """ceil(overcommit m) of the candidates (`m`: this many, an async dispatch's free
        slots) by the scenario's selector, its draws from the round's selection stream (as
        select=random's). `members`: an edge server's clients (sorted), the ring the
        selector sees as its population, numbered 0 .. len(members)-1."""
        name = self.policy.select
        if weights is not None:
            raise FedjouleError(
                f"policy.select={name} would replace the algorithm's own selection weights: "
                "use select=random with it"
            )
        if len(candidates) == 0:
            return candidates
        scenario = self.world.scenario
        if m is None:
            m = selection_size(
                scenario.training.clients_per_round, scenario.round.overcommit, len(candidates)
            )
        gen = None  # a selector that draws nothing needs no stream (DRAWING)
        if name in DRAWING or name == "custom":
            gen = rng.stream(scenario.seed, "selection", r, *key)
        if self.plugin is not None and name == "custom":  # checked there
            obs = self.observer.observation(r, candidates, self.n_samples)
            return self.plugin.select(obs, m, gen)
        local, n = None, None
        if members is not None:  # the edge's own ring (same order, so the same ties)
            local, n = np.searchsorted(members, candidates), len(members)
        obs = self.observer.lazy_observation(r, candidates, self.n_samples, local, n)
        chosen = np.asarray(SELECTORS[name](obs, m, gen, **self.selector_parameters()))
        if members is not None:
            chosen = np.asarray(members)[chosen.astype(int)]
        # a built-in selector returns candidates, each once (check_decision is for plug-ins)
        return chosen.astype(int)

    def selector_parameters(self) -> dict:
        """The scenario's parameters of its selector (schema/policy.py)."""
        p = self.policy
        if p.select == "power-of-choice":
            return {"d": p.choice_d}
        if p.select == "oort":
            preferred_s = p.oort_round_time_s or self.world.scenario.round.deadline_s
            return {"preferred_round_time_s": preferred_s, "alpha": p.oort_alpha}
        if p.select == "battery":
            return {"weighted": p.battery_weighted}
        return {}

    # ------------------------------------------------------------------ 3. allocate
    def allocate(self, allocation, r: int) -> None:
        """Fill the allocation's local steps, CPU frequencies and band shares as the
        policy says; each decision checked (a FedjouleError names the policy, client and
        value)."""
        p, world = self.policy, self.world
        sel = allocation.clients
        if len(sel) == 0:
            return
        deadline_s = world.scenario.round.deadline_s
        if p.steps == "deadline" or p.frequency == "deadline":
            comm_s = self.observer.expected_comm_s(sel)
            step_s = world.step_time_s[sel]
        if p.steps == "deadline":
            most = world.client_steps[sel] if p.max_steps is None else p.max_steps + 0 * sel
            fit = deadline_steps(step_s, comm_s, deadline_s, int(most.max()))
            allocation.local_steps = np.minimum(np.atleast_1d(fit), most).astype(int)
        ranges = None
        if p.frequency == "deadline" or allocation.cpu_freq_hz is not None:
            ranges = (self.freq_low_hz[sel], self.freq_high_hz[sel])
        if p.frequency == "deadline":
            allocation.cpu_freq_hz = np.atleast_1d(deadline_frequency_hz(
                step_s * self.freq_now_hz[sel], 1.0, allocation.local_steps, comm_s,
                deadline_s, *ranges,
            )).astype(float)  # fmt: skip
        decision = Decision(sel, None, allocation.cpu_freq_hz, allocation.local_steps)
        check_decision(decision, self.name(), sel, ranges)
        if p.bandwidth != "equal":
            allocation.band_share = self.band_shares(allocation, r)
        if self.plugin is not None and self.plugin.allocates:  # its values replace these
            self.plugin.allocate(self, allocation, r)

    def name(self) -> str:
        """The policy as its decisions, for the errors: 'steps=deadline, ...'."""
        p = self.policy
        decided = (("frequency", "fixed"), ("steps", "fixed"), ("bandwidth", "equal"))
        parts = [f"{n}={getattr(p, n)}" for n, default in decided if getattr(p, n) != default]
        return ", ".join(parts) or f"select={p.select}"

    def compute_s(self, allocation) -> np.ndarray:
        """The selected clients' expected computation: their steps at their frequency."""
        sel = allocation.clients
        time_s = allocation.local_steps * self.world.step_time_s[sel]
        if allocation.cpu_freq_hz is not None:  # c B K / f: the time scales by f_now / f
            time_s = time_s * self.freq_now_hz[sel] / allocation.cpu_freq_hz
        return time_s

    def band_shares(self, allocation, r: int) -> np.ndarray:
        """Each selected client's share of its cell's uplink band, cell by cell; min-energy
        falls back to equal-finish's shares in a cell where no split meets every deadline
        (the deadline then drops whom it drops)."""
        world, observer = self.world, self.observer
        sel = allocation.clients
        serving = world.cell.serving_cell
        cells = np.zeros(len(sel), dtype=int) if serving is None else serving[sel]
        shares = np.zeros(len(sel))
        upload_left_s = (
            world.scenario.round.deadline_s - observer.download_s[sel] - self.compute_s(allocation)
            if self.policy.bandwidth == "min-energy" else None
        )  # fmt: skip
        for c in np.unique(cells):
            rows = np.flatnonzero(cells == c)
            left_s = None if upload_left_s is None else upload_left_s[rows]
            shares[rows] = cell_shares(self.uplink(sel[rows], r), left_s)
            check_decision(Decision(sel[rows], band_share=shares[rows]), self.name(), sel)
        return shares

    def uplink(self, clients: np.ndarray, r: int) -> Uplink:
        """The clients' uplink as the server knows it (policies.bandwidth.Uplink): the
        scenario's rate model at the SNR its policy.csi shows (none: the mean)."""
        world, channel = self.world, self.world.scenario.channel
        snr_db = self.observer.known_snr_db(r, clients)
        common = {
            "bits": np.full(len(clients), float(world.uplink_bits)),
            "tx_power_w": world.population.tx_power_w[clients],
            "bandwidth_hz": float(channel.uplink_bandwidth_hz),
        }
        if channel.rate == "fixed":
            return Uplink(**common, fixed_se_bps_per_hz=channel.spectral_efficiency_bits_per_hz)
        if world.cell.large_scale_gain is None:  # the scenario's SNR, whatever the share
            return Uplink(**common, snr=db_to_linear(snr_db))
        noise = world.cell.noise_psd_w_per_hz
        rx_w = db_to_linear(snr_db) * noise * channel.uplink_bandwidth_hz  # p G |h|^2
        return Uplink(**common, rx_power_w=rx_w, noise_psd_w_per_hz=noise)

    # ------------------------------------------------------------------ 4, 7. observe
    @property
    def reads_loss(self) -> bool:
        """Whether the selector ranks clients by their training loss (the engine then
        records it in training, train_loss.py)."""
        return self.policy.select in LOSS_DRIVEN

    def trained(self, clients: np.ndarray, loss, r: int, loss_rms=None) -> None:
        """After step 4 of round or dispatch r: each client's mean training loss and the
        root mean square of its per-sample losses (None: not known, nan), sent with its
        update (and kept by dispatch, keep_sent_losses)."""
        clients, sent = np.asarray(clients), loss.cpu().numpy()
        rms = np.full(len(sent), np.nan) if loss_rms is None else loss_rms.cpu().numpy()
        self.observer.sent_loss[clients] = sent
        self.observer.sent_loss_rms[clients] = rms
        if self.sent_by_dispatch is not None:
            self.sent_by_dispatch[r] = (clients.copy(), sent.copy(), rms.copy())

    def keep_sent_losses(self) -> None:
        """For a protocol that replays its timeline without training on resume (async,
        buffered): keep, in the checkpoint, the losses each dispatch's clients sent, which
        the replay sends again (resend), so a loss-driven selector replays its choices."""
        if self.reads_loss:
            self.sent_by_dispatch = {}

    def resend(self, r: int) -> None:
        """A replayed dispatch r: the losses its clients sent in the run, as sent again."""
        if self.sent_by_dispatch is not None and r in self.sent_by_dispatch:
            clients, sent, rms = self.sent_by_dispatch[r]
            self.observer.sent_loss[clients] = sent
            self.observer.sent_loss_rms[clients] = rms

    def record(self, row: dict, clients, battery_j: np.ndarray, measure: bool = True) -> None:
        """After the row is closed: what the server learnt this round (Observer.record;
        `measure` False: a protocol measured its clients, `measure`)."""
        self.observer.record(row, clients, battery_j, measure)

    def measure(self, r: int, start_s: float, records, staleness=None) -> None:
        """A protocol's clients (ClientRecords) selected in dispatch or edge round r at
        start_s, as they end (Observer.measure)."""
        self.observer.measure(r, start_s, ClientsOfRound.from_records(records), staleness)

    def reset(self) -> None:
        """What the server knew at time 0 (a protocol's replay of its timeline), and the
        plug-in as built (its own state at time 0)."""
        self.observer = Observer(self.world)
        if self.plugin is not None:
            self.plugin = PluginPolicy(self.policy)

    def state_dict(self) -> dict:
        """The observer's kept arrays; a plug-in's own state under "plugin"."""
        saved = self.observer.state_dict()
        plugin = None if self.plugin is None else self.plugin.state_dict()
        if plugin is not None:
            saved["plugin"] = plugin
        if self.sent_by_dispatch is not None:
            sent = self.sent_by_dispatch.values()
            saved["sent_by_dispatch"] = {
                "dispatch": np.repeat(np.fromiter(self.sent_by_dispatch, int),
                                      [len(c) for c, _, _ in sent]),
                "client": np.concatenate([c for c, _, _ in sent] or [np.zeros(0, int)]),
                "loss": np.concatenate([v for _, v, _ in sent] or [np.zeros(0)]),
                "loss_rms": np.concatenate([v for _, _, v in sent] or [np.zeros(0)]),
            }  # fmt: skip
        return saved

    def load_state_dict(self, saved: dict) -> None:
        """A checkpoint's state (one without a plug-in's leaves it as built)."""
        self.observer.load_state_dict(saved)
        if self.plugin is not None and "plugin" in saved:
            self.plugin.load_state_dict(saved["plugin"])
        if self.sent_by_dispatch is not None and "sent_by_dispatch" in saved:
            rows = dict(saved["sent_by_dispatch"])
            # (a checkpoint that predates loss_rms: not known, nan)
            rows.setdefault("loss_rms", np.full(len(np.asarray(rows["loss"])), np.nan))
            ends = np.flatnonzero(np.diff(np.asarray(rows["dispatch"]))) + 1  # by dispatch
            kept = ("dispatch", "client", "loss", "loss_rms")
            split = (np.split(np.asarray(rows[k]), ends) for k in kept)
            self.sent_by_dispatch = {
                int(d[0]): (c, v, s) for d, c, v, s in zip(*split, strict=True) if d.size
            }  # (none kept yet: an empty dict)
