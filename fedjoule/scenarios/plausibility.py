"""Plausibility warnings: legal values that are almost surely a slip of unit or scale.

`plausibility_warnings(scenario)` returns one line per suspicious value, naming the field,
the value and why it looks wrong (`tx_power_dbm: 200` is 10^17 W; `uplink_bandwidth_hz: 5`
was probably meant in MHz). They are warnings, not errors: the schema's hard bounds keep
the simulation finite, these only catch values no real deployment has. Thresholds are
wide, so the built-in scenarios and ordinary studies raise none.
"""

import math

from fedjoule.scenarios.schema import Scenario

GB = 1024**3


def synthetic_data_bytes(scenario: Scenario) -> float:
    """About how many bytes a training run's synthetic data takes (0 for other datasets):
    per client, avg_samples (the log-normal mean with size_sigma) and test_samples
    samples of dim float32 features and a label."""
    if scenario.dataset.name != "synthetic":
        return 0.0
    synthetic = scenario.dataset.synthetic
    samples = synthetic.avg_samples * math.exp(synthetic.size_sigma**2 / 2) + synthetic.test_samples
    return 4.0 * scenario.population.size * samples * (synthetic.dim + 1)


def _fmt(value: float) -> str:
    return f"{value:g}"


def plausibility_warnings(scenario: Scenario) -> list[str]:
    """One line per value that is legal but implausible, naming field, value and reason."""
    out: list[str] = []

    def warn(field: str, value, why: str) -> None:
        shown = _fmt(value) if isinstance(value, int | float) else str(value)
        out.append(f"{field} = {shown}: {why}")

    _devices(scenario, warn)
    _channel(scenario, warn)
    _topology(scenario, warn)
    _time(scenario, warn)
    _training(scenario, warn)
    return out


def _devices(s: Scenario, warn) -> None:
    for i, c in enumerate(s.population.device_classes):
        at = f"population.device_classes.{i}"
        if c.tx_power_dbm > 40:
            warn(
                f"{at}.tx_power_dbm",
                c.tx_power_dbm,
                "above 40 dBm (10 W) is a base station's power, a phone sends at most about "
                "23 dBm (0.2 W); was it given in mW?",
            )
        elif c.tx_power_dbm < -30:
            warn(
                f"{at}.tx_power_dbm",
                c.tx_power_dbm,
                "below -30 dBm (1 uW) no radio transmits; was it given in W (e.g. 0.2)?",
            )
        if c.compute == "cpu":
            for name in ("cpu_freq_min_hz", "cpu_freq_max_hz"):
                value = getattr(c, name)
                if value < 1e6:
                    warn(
                        f"{at}.{name}",
                        value,
                        "below 1 MHz; the unit is Hz, was it given in GHz (2.0 for 2e9)?",
                    )
                elif value > 10e9:
                    warn(f"{at}.{name}", value, "above 10 GHz no CPU runs; was it given in kHz?")
            power = c.kappa * c.cpu_freq_max_hz**3
            if power > 100:
                warn(
                    f"{at}.kappa",
                    c.kappa,
                    f"kappa f^3 at cpu_freq_max_hz is {power:.3g} W, above 100 W (a phone's "
                    "CPU draws about 1 W; typical kappa is 1e-28)",
                )
        elif c.peak_flops < 1e6:
            warn(
                f"{at}.peak_flops",
                c.peak_flops,
                "below 1 MFLOP/s; the unit is FLOP/s, was it given in GFLOP/s or TFLOP/s?",
            )
        if c.battery_j < 100:
            warn(
                f"{at}.battery_j",
                c.battery_j,
                f"under 100 J, a coin cell's few seconds of radio (a CR2032 holds about "
                f"2,400 J, a phone about 50,000 J); the unit is J, was it given in Wh "
                f"({_fmt(c.battery_j)} Wh = {_fmt(c.battery_j * 3600)} J) or kJ?",
            )
        for name, limit in (
            ("active_power_w", 1_000),
            ("rx_power_w", 100),
            ("charge_power_w", 1_000),
        ):
            value = getattr(c, name)
            if value > limit:
                warn(f"{at}.{name}", value, f"above {limit} W for an edge device; was it in mW?")


def _channel(s: Scenario, warn) -> None:
    ch = s.channel
    for name in ("uplink_bandwidth_hz", "downlink_bandwidth_hz"):
        value = getattr(ch, name)
        if value < 1e3:
            warn(
                f"channel.{name}",
                value,
                "below 1 kHz; the unit is Hz, was it given in MHz (5 for 5e6)?",
            )
        elif value > 10e9:
            warn(f"channel.{name}", value, "above 10 GHz of bandwidth; was it given in bit/s?")
    if ch.bs_tx_power_dbm > 50:
        warn(
            "channel.bs_tx_power_dbm",
            ch.bs_tx_power_dbm,
            "above 50 dBm (100 W); macro base stations send at 43-46 dBm; was it in mW?",
        )
    for name in ("snr_db", "downlink_snr_db"):
        value = getattr(ch, name)
        if value is not None and not -30 <= value <= 60:
            warn(
                f"channel.{name}",
                value,
                "outside -30 to 60 dB, where links are; was a linear SNR given as dB?",
            )
    if ch.snr_db is None:
        if ch.cell_radius_m < 1:
            warn("channel.cell_radius_m", ch.cell_radius_m, "a cell under 1 m; was it in km?")
        elif ch.cell_radius_m > 100_000:
            warn("channel.cell_radius_m", ch.cell_radius_m, "a cell over 100 km; was it in m?")
        if ch.path_loss == "free-space" and ch.carrier_hz < 1e6:
            warn(
                "channel.carrier_hz",
                ch.carrier_hz,
                "a carrier below 1 MHz; the unit is Hz, was it given in GHz (2.0 for 2e9)?",
            )
    if not -200 <= ch.noise_dbm_per_hz <= -120:
        warn(
            "channel.noise_dbm_per_hz",
            ch.noise_dbm_per_hz,
            "thermal noise is -174 dBm/Hz; was the total noise power (dBm) given instead?",
        )
    if ch.noise_figure_db > 30:
        warn("channel.noise_figure_db", ch.noise_figure_db, "receivers have 2-15 dB")
    if ch.shadowing_sigma_db > 20:
        warn("channel.shadowing_sigma_db", ch.shadowing_sigma_db, "measured sigmas are 4-12 dB")


def _topology(s: Scenario, warn) -> None:
    t = s.topology
    if t.layout in ("hexagonal", "grid") and t.inter_site_distance_m < 1:
        warn(
            "topology.inter_site_distance_m",
            t.inter_site_distance_m,
            "base stations under 1 m apart; was it in km?",
        )


def _time(s: Scenario, warn) -> None:
    r, a = s.round, s.availability
    if r.deadline_s is not None and r.deadline_s < 1e-3:
        warn(
            "round.deadline_s", r.deadline_s, "a deadline under 1 ms; the unit is s, was it in ms?"
        )
    elif r.deadline_s is not None and r.deadline_s > 3600:
        warn(
            "round.deadline_s",
            r.deadline_s,
            f"a round deadline over an hour ({r.deadline_s / 3600:.3g} h; cross-device rounds "
            f"last minutes); the unit is s, was it given in ms ({_fmt(r.deadline_s / 1000)} s)?",
        )
    if r.interval_s is not None and r.interval_s * s.training.rounds > 1e9:
        warn(
            "round.interval_s",
            r.interval_s,
            f"x training.rounds = {r.interval_s * s.training.rounds:.3g} s of simulated time, "
            "over 30 years (float64 times there resolve only about 1e-7 s)",
        )
    if a.kind == "markov" and min(a.mean_on_s, a.mean_off_s) < 1:
        warn(
            "availability.mean_on_s" if a.mean_on_s < 1 else "availability.mean_off_s",
            min(a.mean_on_s, a.mean_off_s),
            "Markov periods under 1 s: devices flip on and off many times a round; the unit "
            "is s, was it in minutes or hours?",
        )


def _training(s: Scenario, warn) -> None:
    t, n = s.training, s.population.size
    if t.participation == "bernoulli" and n * t.participation_prob < 1:
        warn(
            "training.participation_prob",
            t.participation_prob,
            f"x population.size = {n * t.participation_prob:.3g} expected participants a "
            "round: most rounds are redrawn until somebody takes part",
        )
    timeline = [r for r in s.output.timeline_rounds if r >= t.rounds]
    if timeline:
        warn(
            "output.timeline_rounds",
            str(timeline[:5]),
            f"rounds at or past training.rounds ({t.rounds}) are never drawn (rounds count from 0)",
        )
    data_bytes = synthetic_data_bytes(s)
    if data_bytes > 8 * GB:
        warn(
            "population.size",
            n,
            f"about {data_bytes / 1e9:.0f} GB of synthetic data (training and test samples, "
            "dim + 1 values of 4 bytes each) for a training run (`--no-train` needs none)",
        )
    if t.lr > 100:
        warn("training.lr", t.lr, "a learning rate above 100 diverges for every model here")
