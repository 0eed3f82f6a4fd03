"""Radio power models: what a device's radio draws while it transmits, receives, connects
from idle (promotion), stays connected after its last packet (tail) and idles between its
download and its upload (docs/models.md#measured-radio-models).

Models (`population.device_classes[].radio.model`):

- `radiated` (default): transmit at the radiated power p (`tx_power_dbm`), receive at
  `rx_power_w`; no states. The wireless-FL theory papers' model.
- `linear`: a linear power amplifier, P_tx = p / pa_efficiency + circuit_power_w, the
  ns-3 WiFi LinearWifiTxCurrentModel (I = p / (V eta) + I_idle, so P = V I); the same
  affine form as the EARTH model (Auer et al., "How much energy is needed to run a
  wireless network?", IEEE Wireless Communications 18(5), 2011: P_in = P_0 + Delta_p
  P_out), which is fitted there to base stations. Receive at `rx_power_w`; no states.
- `lte`, `wifi`, `nbiot`: measured device power, affine in the throughput T (Mbit/s) of
  the transfer (Huang et al., MobiSys 2012):

      P_up   = uplink_w_per_mbps   x T_up   + uplink_base_power_w
      P_down = downlink_w_per_mbps x T_down + base_power_w

  so a transfer of S bits in t seconds costs slope x S / 1e6 + base x t whatever its rate
  did meanwhile; and radio states (simulator/radio_states.py runs them):

      idle --transfer--> promotion (promotion_s at promotion_power_w) --> connected
      connected --last packet--> tail (tail_s at tail_power_w) --> idle
      a transfer inside the tail cuts it and pays no promotion

  Idle costs idle_power_w only while the device takes part in a round, between the end
  of its download and the start of its upload (energy_idle_j).
- `nr-nsa`, `nr-sa`, `nr-mmwave`: 5G NR, the same affine power and states, measured on a
  Galaxy S20 Ultra (fedjoule/devices/radio_nr.py, with the sources); NSA's promotion is
  the LTE anchor's (anchor_promotion_s at anchor_promotion_power_w), then the NR leg
  (promotion_s at promotion_power_w), and its tail the NR tail.

  Measured range: each direction's slope was fitted on throughputs up to
  uplink_max_mbps / downlink_max_mbps. Above it the power saturates at the range's top,
  slope x max + base (the highest power the fit was measured at): a transfer of S bits
  in t seconds costs slope x min(S, max x t) / 1e6 + base x t, and devices/radio_range.py
  counts it for summary.json's warnings (docs/models.md#measured-range).

Defaults (a scenario's null takes these). "checked": the value was read in the source,
or in public code that carries the source's values; "unverified": the source could not
be read here, the value is the issue's (#12) or an assumption, and says so.

model / parameter: default (source; checked or not)

- linear / pa_efficiency: 0.10 (ns-3 LinearWifiTxCurrentModel, attribute Eta,
  src/wifi/model/wifi-tx-current-model.cc; checked)
- linear / circuit_power_w: 0.82 W (the same model: Voltage 3.0 V x IdleCurrent
  0.273333 A; checked)
- lte / uplink_w_per_mbps: 0.43839 W (alpha_u = 438.39 mW per Mbit/s, Huang et al. 2012,
  Table 3, and ARO's LTE_ALPHA_UP; checked in ARO)
- lte / downlink_w_per_mbps: 0.05197 W (alpha_d = 51.97 mW per Mbit/s, idem,
  LTE_ALPHA_DOWN; checked in ARO)
- lte / base_power_w (both directions): 1.2 W (beta, ARO's LTE_BETA; checked in ARO.
  Huang et al. give 1288.04 mW: unverified, the paper's table could not be read)
- lte / promotion_s, promotion_power_w: 0.26 s, 1.21 W (ARO's T_PROMOTION, P_PROMOTION;
  checked in ARO. Huang et al.: 260.1 ms, 1210.7 mW, unverified)
- lte / tail_power_w: 1.06 W (ARO's P_TAIL; checked in ARO. Huang et al.: 1060.0 mW)
- lte / tail_s: 11.576 s (Huang et al. 2012, Table 3, T_tail; from the issue ("about
  11.6 s"), unverified: the paper's table could not be read. ARO's own timers add up to
  10.12 s: inactivity 0.1 + short DRX 0.02 + long DRX 10)
- lte / uplink_max_mbps, downlink_max_mbps: 5, 20 Mbit/s (the throughputs of the local
  power-throughput measurements Huang et al. 2012 fitted alpha_u and alpha_d on, on a
  2011 LTE phone on Verizon's network; unverified: that part of the paper could not be
  read here, only its abstract, whose median LTE throughputs over 3000 4GTest users are
  6 Mbit/s up and 13 Mbit/s down). wifi and nbiot have no throughput slope, so no range:
  their power is the same at any rate
- lte / idle_power_w: 0.01995 W (ARO's RRC_IDLE paging, P_IDLE_PING 0.594 W for
  T_IDLE_PING 0.043 s every T_IDLE_PING_PERIOD 1.28 s, P_IDLE 0 between; checked in ARO,
  the average is ours)
- wifi / base_power_w (both directions, no throughput slope): 0.403 W (ARO's
  POWER_WIFI_ACTIVE; checked in ARO)
- wifi / tail_s, tail_power_w: 0.25 s, 0.403 W (ARO's WIFI_TAIL_TIME; ARO charges the
  tail at the active power; checked in ARO); promotion: none (ARO has none)
- wifi / idle_power_w: 0.02 W (ARO's POWER_WIFI_STANDBY; checked in ARO)
- nbiot / uplink_base_power_w: 0.543 W, base_power_w: 0.09 W, idle_power_w: 15e-6 W
  (transmit at 23 dBm, receive, deep sleep (PSM) 0.015 mW: the 3GPP TR 45.820 power
  assumptions as used by Ratasuk et al., "NB-IoT system for M2M communication", IEEE
  WCNC Workshops 2016; unverified at the TR, which could not be read: checked in a public
  table citing Ratasuk et al.; the idle-mode light sleep there is 2.4 mW)
- nbiot / tail_s, tail_power_w: 10 s, 0.09 W (the RRC inactivity timer T_i = 10 s of
  the NB-IoT energy model of Andres-Maldonado et al., "Optimized LTE data transmission
  procedures for IoT: device side energy consumption analysis", IEEE ICC Workshops 2017,
  as set in its public implementation github.com/peteryej/LoRaWAN-NBIoTEnergyModels,
  NBIoTEnergyModel/config.py; checked there, not in the paper), spent at the receive power
- nbiot / promotion_s, promotion_power_w: 0.0825 s, 0.09 W (random access and connection
  set-up: 2.5 ms before the preamble + 10 ms random-access response + 16 ms contention
  resolution + 54 ms S1 processing, the same implementation's timings (checked there),
  at the receive power; the preamble's and Msg3's own transmissions are left out)

Huang et al. = J. Huang, F. Qian, A. Gerber, Z. M. Mao, S. Sen, O. Spatscheck, "A close
examination of performance and power characteristics of 4G LTE networks", MobiSys 2012.
ARO = AT&T Application Resource Optimizer, now VideoOptimizer
(github.com/attdevsupport/VideoOptimizer, ARO.Core/src/main/resources/lte.conf and WiFi.conf,
ProfileFactoryImpl.createLTE/createWiFi).
"""

import math
from dataclasses import dataclass, fields

from fedjoule.channel.units import dbm_to_w
from fedjoule.devices.radio_nr import NR_DEFAULTS, NR_SOURCES

NR = ("nr-nsa", "nr-sa", "nr-mmwave")  # 5G NR (fedjoule/devices/radio_nr.py)
MODELS = ("radiated", "linear", "lte", "wifi", "nbiot", *NR)
MEASURED = ("lte", "wifi", "nbiot", *NR)  # affine in throughput
ANCHOR = ("anchor_promotion_s", "anchor_promotion_power_w")  # NSA's LTE anchor (NR only)
BITS_PER_MBIT = 1e6

# ARO LTE idle: a 0.043 s paging ping at 0.594 W every 1.28 s, 0 W between (lte.conf)
_LTE_IDLE_W = 0.594 * 0.043 / 1.28

# Per model, the parameters a scenario may leave null (RadioSection); a model not listing
# one has it 0. uplink_base_power_w absent: the resolved base_power_w.
DEFAULTS: dict[str, dict[str, float]] = {
    "radiated": {},
    "linear": {
        "pa_efficiency": 0.10,  # ns-3 LinearWifiTxCurrentModel Eta
        "circuit_power_w": 3.0 * 0.273333,  # ns-3: Voltage 3.0 V x IdleCurrent 0.273333 A
    },
    "lte": {
        "uplink_w_per_mbps": 438.39e-3,  # ARO LTE_ALPHA_UP (Huang et al. 2012, Table 3)
        "downlink_w_per_mbps": 51.97e-3,  # ARO LTE_ALPHA_DOWN
        "base_power_w": 1.2,  # ARO LTE_BETA (Huang et al.: 1288.04 mW, unverified)
        "promotion_s": 0.26,  # ARO T_PROMOTION (Huang et al.: 260.1 ms)
        "promotion_power_w": 1.21,  # ARO P_PROMOTION (Huang et al.: 1210.7 mW)
        "tail_s": 11.576,  # Huang et al. T_tail, from the issue, unverified
        "tail_power_w": 1.06,  # ARO P_TAIL (Huang et al.: 1060.0 mW)
        "idle_power_w": _LTE_IDLE_W,  # ARO idle paging, averaged
        "uplink_max_mbps": 5.0,  # Huang et al. 2012's measured uplink range (unverified)
        "downlink_max_mbps": 20.0,  # idem, downlink
    },
    "wifi": {
        "base_power_w": 0.403,  # ARO POWER_WIFI_ACTIVE
        "tail_s": 0.25,  # ARO WIFI_TAIL_TIME
        "tail_power_w": 0.403,  # ARO: the tail at the active power
        "idle_power_w": 0.02,  # ARO POWER_WIFI_STANDBY
    },
    "nbiot": {
        "uplink_base_power_w": 0.543,  # TR 45.820 via Ratasuk et al. 2016: transmit
        "base_power_w": 0.09,  # idem: receive
        "idle_power_w": 0.015e-3,  # idem: deep sleep (PSM)
        "tail_s": 10.0,  # RRC inactivity timer T_i (Andres-Maldonado et al. 2017's model)
        "tail_power_w": 0.09,  # receiving while connected
        "promotion_s": 0.0825,  # random access + set-up: 2.5 + 10 + 16 + 54 ms (idem)
        "promotion_power_w": 0.09,  # at the receive power
    },
    **NR_DEFAULTS,
}


# The source of each default, as `fedjoule profiles NAME` shows it (the module docstring
# gives the details).
_HUANG = "Huang et al., MobiSys 2012"
_ARO = "AT&T ARO/VideoOptimizer"
_RATASUK = "3GPP TR 45.820 power assumptions as used by Ratasuk et al., IEEE WCNC Workshops 2016"
_ANDRES = "Andres-Maldonado et al., IEEE ICC Workshops 2017, as set in its public model"
DEFAULT_SOURCES: dict[str, dict[str, str]] = {
    "linear": {
        "pa_efficiency": "ns-3 LinearWifiTxCurrentModel, attribute Eta (checked)",
        "circuit_power_w": "ns-3 LinearWifiTxCurrentModel: 3.0 V x IdleCurrent 0.273333 A "
        "(checked)",
    },
    "lte": {
        "uplink_w_per_mbps": f"alpha_u, {_HUANG}, Table 3, as {_ARO} LTE_ALPHA_UP (checked "
        "in ARO)",
        "downlink_w_per_mbps": f"alpha_d, {_HUANG}, Table 3, as {_ARO} LTE_ALPHA_DOWN "
        "(checked in ARO)",
        "base_power_w": f"beta, {_ARO} LTE_BETA (checked in ARO; {_HUANG}: 1.28804 W, "
        "unverified)",
        "promotion_s": f"{_ARO} T_PROMOTION (checked in ARO; {_HUANG}: 260.1 ms)",
        "promotion_power_w": f"{_ARO} P_PROMOTION (checked in ARO; {_HUANG}: 1210.7 mW)",
        "tail_s": f"T_tail, {_HUANG}, Table 3 (unverified: the paper's table could not be "
        "read; ARO's timers add up to 10.12 s)",
        "tail_power_w": f"{_ARO} P_TAIL (checked in ARO; {_HUANG}: 1060.0 mW)",
        "idle_power_w": f"{_ARO} RRC_IDLE paging, 0.594 W for 0.043 s every 1.28 s, "
        "averaged (checked in ARO)",
        "uplink_max_mbps": f"the uplink throughputs alpha_u was fitted on, {_HUANG} "
        "(unverified: that part of the paper could not be read; its abstract's median LTE "
        "uplink over 3000 4GTest users is 6 Mbit/s); above it the power saturates",
        "downlink_max_mbps": f"the downlink throughputs alpha_d was fitted on, {_HUANG} "
        "(unverified: that part of the paper could not be read; its abstract's median LTE "
        "downlink is 13 Mbit/s); above it the power saturates",
    },
    "wifi": {
        "base_power_w": f"{_ARO} POWER_WIFI_ACTIVE (checked in ARO)",
        "tail_s": f"{_ARO} WIFI_TAIL_TIME (checked in ARO)",
        "tail_power_w": f"{_ARO}: the tail at the active power (checked in ARO)",
        "idle_power_w": f"{_ARO} POWER_WIFI_STANDBY (checked in ARO)",
    },
    "nbiot": {
        "uplink_base_power_w": f"transmit at 23 dBm, {_RATASUK} (unverified at the TR)",
        "base_power_w": f"receive, {_RATASUK} (unverified at the TR)",
        "idle_power_w": f"deep sleep (PSM), {_RATASUK} (unverified at the TR)",
        "tail_s": f"RRC inactivity timer T_i, {_ANDRES} (checked there)",
        "tail_power_w": f"receiving while connected, {_ANDRES} (checked there)",
        "promotion_s": f"random access and set-up, 2.5 + 10 + 16 + 54 ms, {_ANDRES} "
        "(checked there)",
        "promotion_power_w": f"at the receive power, {_ANDRES} (checked there)",
    },
    **NR_SOURCES,
}


def parameters_used(model: str) -> tuple[str, ...]:
    """The parameters (PARAMETERS) the `model` radio's powers and states use; the others
    are ignored unless a scenario sets them (radiated with states)."""
    if model == "linear":
        return ("pa_efficiency", "circuit_power_w")
    if model in MEASURED:
        unused = {"pa_efficiency", "circuit_power_w", *(() if model in NR else ANCHOR)}
        if not DEFAULTS[model].get("uplink_w_per_mbps"):  # no slope: no range (wifi, nbiot)
            unused |= {"uplink_max_mbps", "downlink_max_mbps"}
        return tuple(n for n in PARAMETERS if n not in unused)
    return ()


def default_source(model: str, name: str) -> str:
    """Where the `model` radio's default for parameter `name` comes from."""
    if name in DEFAULT_SOURCES.get(model, {}):
        return f"the {model} radio model's default: {DEFAULT_SOURCES[model][name]}"
    if name == "uplink_base_power_w" and model in MEASURED and name not in DEFAULTS[model]:
        basis = "as the lte model" if model in NR else _HUANG
        return f"the {model} radio model: = base_power_w (one base power both ways, {basis})"
    if name in ("uplink_max_mbps", "downlink_max_mbps"):
        return f"inf: the {model} radio model has no throughput slope, no range to leave"
    return f"0: the {model} radio model has none"


@dataclass(frozen=True)
class RadioParams:
    """A device class's radio, every parameter resolved to a float."""

    model: str = "radiated"
    tx_power_w: float = 0.2  # radiated power p (the class's tx_power_dbm)
    rx_power_w: float = 0.1  # receive power of the radiated and linear models
    pa_efficiency: float = 1.0
    circuit_power_w: float = 0.0
    uplink_w_per_mbps: float = 0.0
    downlink_w_per_mbps: float = 0.0
    base_power_w: float = 0.0
    uplink_base_power_w: float = 0.0
    promotion_s: float = 0.0
    promotion_power_w: float = 0.0
    tail_s: float = 0.0
    tail_power_w: float = 0.0
    idle_power_w: float = 0.0
    # the measured range: the highest throughput each slope was fitted on (inf: none)
    uplink_max_mbps: float = math.inf
    downlink_max_mbps: float = math.inf
    # NSA 5G: the LTE anchor's promotion, before the NR leg (promotion_s); 0 elsewhere
    anchor_promotion_s: float = 0.0
    anchor_promotion_power_w: float = 0.0


PARAMETERS = tuple(
    f.name for f in fields(RadioParams) if f.name not in ("model", "tx_power_w", "rx_power_w")
)
_UNSET = {f.name: f.default for f in fields(RadioParams)}  # a parameter no model sets


def resolve(radio_section, tx_power_w: float, rx_power_w: float) -> RadioParams:
    """A RadioSection (or None: radiated) with each null parameter replaced by the model's
    default (DEFAULTS); `tx_power_w`, `rx_power_w`: the class's radiated and receive power."""
    model = getattr(radio_section, "model", "radiated")
    if model not in MODELS:
        raise ValueError(f"unknown radio model {model!r}; valid: {', '.join(MODELS)}")
    table = DEFAULTS[model]
    values = {}
    for name in PARAMETERS:
        given = getattr(radio_section, name, None)
        values[name] = float(given if given is not None else table.get(name, _UNSET[name]))
    if getattr(radio_section, "uplink_base_power_w", None) is None and (
        "uplink_base_power_w" not in table
    ):  # lte, wifi: one base power beta in both directions
        values["uplink_base_power_w"] = values["base_power_w"]
    return RadioParams(model, float(tx_power_w), float(rx_power_w), **values)


def has_states(p: RadioParams) -> bool:
    """Whether the radio has promotion, tail or idle costs (the SimPy state machine)."""
    return p.promotion_s > 0 or p.anchor_promotion_s > 0 or p.tail_s > 0 or p.idle_power_w > 0


def is_plain_radiated(p: RadioParams) -> bool:
    """Today's model exactly: radiated power while sending, rx_power_w while receiving."""
    return p.model == "radiated" and not has_states(p)


def theory_radio_note(device_classes) -> str | None:
    """One note naming the device classes whose radio is the plain radiated model (the
    theory papers' idealisation), or None when no class uses it."""
    names = [
        c.name for c in device_classes if is_plain_radiated(resolve(c.radio, 0.0, 0.0))
    ]
    if not names:
        return None
    return (
        f"energy model: device class{'es' if len(names) > 1 else ''} {', '.join(names)} "
        "use the radiated radio model (the wireless-FL theory papers'): energy = radiated "
        "power x airtime, no circuit power, no RRC promotion or tail; a measured phone "
        "radio spends joules per participation (radio.model lte/wifi/nbiot, or a profile: "
        "fedjoule profiles)"
    )


# ---------------------------------------------------------------------- powers (W)
def transmit_power_w(p: RadioParams, rate_bps: float, radiated_w: float | None = None) -> float:
    """Power drawn while sending at `rate_bps` with radiated power `radiated_w` (default:
    the class's p)."""
    radiated_w = p.tx_power_w if radiated_w is None else radiated_w
    if p.model == "radiated":
        return radiated_w  # E_tx = p * airtime (the wireless-FL papers' model)
    if p.model == "linear":
        return radiated_w / p.pa_efficiency + p.circuit_power_w  # P = p / eta + P_c
    # Huang et al. 2012: P_up = alpha_u * T_up (Mbit/s) + beta, T_up saturated at the range
    rate_bps = min(rate_bps, p.uplink_max_mbps * BITS_PER_MBIT)
    return p.uplink_w_per_mbps * rate_bps / BITS_PER_MBIT + p.uplink_base_power_w


def receive_power_w(p: RadioParams, rate_bps: float) -> float:
    """Power drawn while receiving at `rate_bps`."""
    if p.model in MEASURED:  # Huang et al. 2012: P_down = alpha_d * T_down (Mbit/s) + beta
        rate_bps = min(rate_bps, p.downlink_max_mbps * BITS_PER_MBIT)
        return p.downlink_w_per_mbps * rate_bps / BITS_PER_MBIT + p.base_power_w
    return p.rx_power_w


def charged_bits(bits: float, airtime_s: float, max_mbps: float) -> float:
    """The bits a measured radio's slope charges: all of them, or, sent faster than the
    range's top `max_mbps`, max x airtime (the power saturates there)."""
    if math.isinf(max_mbps):
        return bits
    return min(bits, max_mbps * BITS_PER_MBIT * airtime_s)


# ---------------------------------------------------------------------- energies (J)
def transmit_energy_j(
    p: RadioParams, bits: float, airtime_s: float, radiated_w: float | None = None
) -> float:
    """Energy of sending `bits` in `airtime_s` (every rate profile: the power is affine in
    the rate, so its integral is slope x bits + base x time; a transfer whose mean rate
    bits / airtime is above the measured range is charged at the range's top power)."""
    if p.model in MEASURED:
        bits = charged_bits(bits, airtime_s, p.uplink_max_mbps)
        return p.uplink_w_per_mbps * bits / BITS_PER_MBIT + p.uplink_base_power_w * airtime_s
    return transmit_power_w(p, 0.0, radiated_w) * airtime_s


def receive_energy_j(p: RadioParams, bits: float, airtime_s: float) -> float:
    """Energy of receiving `bits` in `airtime_s`."""
    if p.model in MEASURED:
        bits = charged_bits(bits, airtime_s, p.downlink_max_mbps)
        return p.downlink_w_per_mbps * bits / BITS_PER_MBIT + p.base_power_w * airtime_s
    return p.rx_power_w * airtime_s


def promotion_phases(p: RadioParams) -> list[tuple[float, float]]:
    """(seconds, watts) of each phase of a promotion from idle: NSA 5G's LTE anchor, then
    the NR leg (or the one promotion of every other radio); phases of 0 s left out."""
    phases = [(p.anchor_promotion_s, p.anchor_promotion_power_w)]
    phases.append((p.promotion_s, p.promotion_power_w))
    return [(s, w) for s, w in phases if s > 0]


def promotion_time_s(p: RadioParams) -> float:
    """How long a promotion from idle delays the transfer (every phase)."""
    return p.anchor_promotion_s + p.promotion_s


def promotion_energy_j(p: RadioParams, elapsed_s: float | None = None) -> float:
    """Energy of a promotion (of its first `elapsed_s` when it was cut short)."""
    left = promotion_time_s(p) if elapsed_s is None else max(0.0, elapsed_s)
    energy = 0.0
    for seconds, watts in promotion_phases(p):
        energy += watts * min(left, seconds)
        left -= min(left, seconds)
    return energy


def tail_energy_j(p: RadioParams, elapsed_s: float | None = None) -> float:
    """Energy of a tail: the whole tail, or its first `elapsed_s` (a tail cut by the next
    transfer)."""
    t = p.tail_s if elapsed_s is None else min(max(0.0, elapsed_s), p.tail_s)
    return p.tail_power_w * t


def isolated_transfer_energy_j(
    p: RadioParams, bits: float, rate_bps: float, uplink: bool = True
) -> float:
    """Closed form of one transfer with no other transfer within a tail before or after it:
    promotion + the transfer + the whole tail."""
    airtime = bits / rate_bps if rate_bps > 0 else math.inf
    moved = transmit_energy_j(p, bits, airtime) if uplink else receive_energy_j(p, bits, airtime)
    return promotion_energy_j(p) + moved + tail_energy_j(p)


# ---------------------------------------------------------------------- scenarios
def class_radios(population_section) -> list[RadioParams]:
    """Every device class's resolved radio, in class order."""
    return [
        resolve(getattr(c, "radio", None), float(dbm_to_w(c.tx_power_dbm)), c.rx_power_w)
        for c in population_section.device_classes
    ]


def transmit_draw_w(population_section, population):
    """(N,) power each client draws while sending, for radios whose power does not depend
    on the rate (radiated: p itself; linear: p / eta + P_c); the numpy system engine's."""
    draw = population.tx_power_w.copy()
    for i, p in enumerate(class_radios(population_section)):
        if p.model == "linear":
            rows = population.class_index == i
            draw[rows] = draw[rows] / p.pa_efficiency + p.circuit_power_w
    return draw
