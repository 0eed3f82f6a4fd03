"""The 5G NR radio models' measured numbers and their sources: NSA low-band, SA
low-band and NSA mmWave, on a Galaxy S20 Ultra (docs/models.md#5g-nr-radios).

Source: Narayanan et al., "A Variegated Look at 5G in the Wild: Performance, Power, and
QoE Implications", ACM SIGCOMM 2021, and its artifact github.com/SIGCOMM21-5G/artifact:

- powers of the RRC states: the paper's Table 2 (radio power, the idle phone's power
  subtracted, from its Monsoon traces RRC-Power/; the repository holds one sample trace,
  the full set is off-repository, so the table's means are taken as published, with no
  spread);
- timers and promotion delays: the paper's Table 7 (RRC-Probe), cross-checked on the
  artifact's RRC-Probe/data by scripts/fit_5g_power.py;
- the power against throughput: least-squares lines fitted by scripts/fit_5g_power.py to
  Data-Transfer-Power/MN-Transfer/data-processed/MN-Transfer_combined.csv (Verizon).

The states (simulator/radio_states.py runs them):

    NSA:  idle -> LTE anchor promotion (anchor_promotion_s) -> NR leg (promotion_s)
          -> connected -> NR tail (tail_s) -> idle
    SA:   idle -> NR promotion (promotion_s) -> connected -> NR tail -> idle

The paper finds one tail, the UE-inactivity timer, after which the phone goes straight to
RRC_IDLE (no second LTE tail). A transfer waits for the whole promotion (it runs at the
NR rate); in the network, data may already flow over the LTE anchor during the NR leg.
SA's RRC_INACTIVE (about 10-15 s of idle time in the paper's Fig. 10) has no measured
power and is not modelled: a transfer after the tail pays the whole promotion.
"""

_PAPER = "Narayanan et al., SIGCOMM 2021"
_TABLE2 = f"{_PAPER}, Table 2 (radio power during RRC states; a mean, no spread published)"
_TABLE7 = f"{_PAPER}, Table 7 (RRC-Probe)"
_FIT = (
    "least-squares slope fitted by scripts/fit_5g_power.py to the SIGCOMM'21 artifact "
    "(github.com/SIGCOMM21-5G/artifact) Data-Transfer-Power/MN-Transfer/data-processed/"
    "MN-Transfer_combined.csv, Galaxy S20 Ultra, Verizon"
)
# the lte model's values the NR models keep (fedjoule/devices/radio.py: ARO's, which
# carry Huang et al., MobiSys 2012)
_LTE_PROMOTION_W = 1.21  # ARO P_PROMOTION
_LTE_BETA_W = 1.2  # ARO LTE_BETA
_LTE_IDLE_W = 0.594 * 0.043 / 1.28  # ARO idle paging, averaged
_ANCHOR_W = (
    "the lte model's promotion power (ARO P_PROMOTION, Huang et al., MobiSys 2012): "
    "the paper does not give the power of the LTE promotion"
)
_IDLE = (
    "the lte model's idle paging power (ARO, averaged): the paper gives no idle power; "
    f"its idle DRX cycles (1.2-1.28 s, {_TABLE7}) match LTE's 1.28 s"
)
_BASE = (
    "the lte model's beta (ARO LTE_BETA, 1.2 W). The artifact's intercepts (NSALow minus "
    "LTE: +0.27 W up, +0.22 W down) lie within the fits' RMSE (0.41 W), so none is added"
)
_LOW_UP = f"{_FIT}, NSALow uplink, n=255, 1-46 Mbit/s: R^2 0.55, RMSE 0.412 W (Table 8: 0.02915)"
_LOW_DOWN = (
    f"{_FIT}, NSALow downlink, n=408, 1-120 Mbit/s: R^2 0.48, RMSE 0.411 W (Table 8: 0.01352)"
)
_NO_SA = (
    "no controlled SA transfer measurement in the artifact (its walking logs, "
    "Power-Model/MN-Wild/.../s20_t-mobile_sa_all.csv, fit with R^2 0.00), so the NSA "
    "low-band fit: "
)


def _probe(seconds: float, carrier: str, name: str) -> str:
    return (
        f"UE-inactivity timer, {carrier}, {_TABLE7}; the artifact's RRC-Probe/data/{name} "
        f"shows {seconds} s by scripts/fit_5g_power.py's rule (first idle time with a "
        "median RTT over 500 ms)"
    )


NR_DEFAULTS: dict[str, dict[str, float]] = {
    "nr-nsa": {  # T-Mobile NSA low-band (Tables 2, 7); slopes: Verizon NSA low-band
        "uplink_w_per_mbps": 0.0322,
        "downlink_w_per_mbps": 0.0115,
        "base_power_w": _LTE_BETA_W,
        "anchor_promotion_s": 0.21,  # Table 7: 4G promotion delay 210 ms
        "anchor_promotion_power_w": _LTE_PROMOTION_W,
        "promotion_s": 1.23,  # Table 7: 5G promotion delay 1440 ms - 210 ms
        "promotion_power_w": 0.699,  # Table 2: 4G->5G switch 699 mW
        "tail_s": 10.4,  # Table 7: UE-inactivity timer 10400 ms
        "tail_power_w": 0.26,  # Table 2: tail 260 mW
        "idle_power_w": _LTE_IDLE_W,
        "uplink_max_mbps": 46,  # the fastest sample of the uplink fit
        "downlink_max_mbps": 120,  # the fastest sample of the downlink fit
    },
    "nr-sa": {  # T-Mobile SA low-band (Tables 2, 7)
        "uplink_w_per_mbps": 0.0322,
        "downlink_w_per_mbps": 0.0115,
        "base_power_w": _LTE_BETA_W,
        "anchor_promotion_s": 0.0,  # SA reaches NR_RRC_CONNECTED directly (Appendix A.3)
        "anchor_promotion_power_w": 0.0,
        "promotion_s": 0.341,  # Table 7: 5G promotion delay 341 ms
        "promotion_power_w": 0.245,  # Table 2: 245 mW (SA's "4G->5G switch" column)
        "tail_s": 10.4,  # Table 7: UE-inactivity timer 10400 ms
        "tail_power_w": 0.593,  # Table 2: tail 593 mW
        "idle_power_w": _LTE_IDLE_W,
        "uplink_max_mbps": 46,  # the fastest sample of the uplink fit
        "downlink_max_mbps": 120,  # the fastest sample of the downlink fit
    },
    "nr-mmwave": {  # Verizon NSA mmWave (Tables 2, 7; MN-Transfer fits)
        "uplink_w_per_mbps": 0.0089,
        "downlink_w_per_mbps": 0.0017,
        "base_power_w": 3.599,  # 1.2 + intercepts mmwave - LTE, downlink
        "uplink_base_power_w": 3.938,  # 1.2 + intercepts mmwave - LTE, uplink
        "anchor_promotion_s": 0.396,  # Table 7: 4G promotion delay 396 ms
        "anchor_promotion_power_w": _LTE_PROMOTION_W,
        "promotion_s": 1.511,  # Table 7: 5G promotion delay 1907 ms - 396 ms
        "promotion_power_w": 1.494,  # Table 2: 4G->5G switch 1494 mW
        "tail_s": 10.5,  # Table 7: UE-inactivity timer 10500 ms
        "tail_power_w": 1.092,  # Table 2: tail 1092 mW
        "idle_power_w": _LTE_IDLE_W,
        "uplink_max_mbps": 220,  # the fastest sample of the uplink fit
        "downlink_max_mbps": 2482,  # the fastest sample of the downlink fit
    },
}

def _range(fit: str) -> str:
    return (
        f"the fastest sample of the {fit} fit its slope comes from (the SIGCOMM'21 artifact, "
        "scripts/fit_5g_power.py); above it the power saturates"
    )


NR_SOURCES: dict[str, dict[str, str]] = {
    "nr-nsa": {
        "uplink_w_per_mbps": _LOW_UP,
        "downlink_w_per_mbps": _LOW_DOWN,
        "base_power_w": _BASE,
        "anchor_promotion_s": f"4G promotion delay, T-Mobile NSA low-band, {_TABLE7}",
        "anchor_promotion_power_w": _ANCHOR_W,
        "promotion_s": f"the NR leg: 5G minus 4G promotion delay, 1440 - 210 ms, T-Mobile NSA "
        f"low-band, {_TABLE7}",
        "promotion_power_w": f"4G->5G switch, T-Mobile NSA low-band, {_TABLE2}",
        "tail_s": _probe(9.9, "T-Mobile NSA low-band", "RASPBERRY_670_TMobile_NSA.csv"),
        "tail_power_w": f"tail, T-Mobile NSA low-band, {_TABLE2}",
        "idle_power_w": _IDLE,
        "uplink_max_mbps": _range("NSALow uplink (46 Mbit/s)"),
        "downlink_max_mbps": _range("NSALow downlink (120 Mbit/s)"),
    },
    "nr-sa": {
        "uplink_w_per_mbps": _NO_SA + _LOW_UP,
        "downlink_w_per_mbps": _NO_SA + _LOW_DOWN,
        "base_power_w": _BASE,
        "anchor_promotion_s": f"none: SA promotes straight to NR_RRC_CONNECTED ({_PAPER}, "
        "Appendix A.3)",
        "anchor_promotion_power_w": f"none: no LTE anchor ({_PAPER}, Appendix A.3)",
        "promotion_s": f"5G promotion delay, T-Mobile SA low-band, {_TABLE7}",
        "promotion_power_w": f"T-Mobile SA low-band, {_TABLE2}, its '4G->5G switch' column "
        "(SA has no switch: read as its promotion's power)",
        "tail_s": _probe(10.2, "T-Mobile SA low-band", "S20US_TMobile_SA.csv"),
        "tail_power_w": f"tail, T-Mobile SA low-band, {_TABLE2}",
        "idle_power_w": _IDLE,
        "uplink_max_mbps": _range("NSALow uplink (46 Mbit/s)"),
        "downlink_max_mbps": _range("NSALow downlink (120 Mbit/s)"),
    },
    "nr-mmwave": {
        "uplink_w_per_mbps": f"{_FIT}, mmwave uplink, n=1020, 1-220 Mbit/s: R^2 0.84, RMSE "
        "0.231 W (Table 8: 0.00942)",
        "downlink_w_per_mbps": f"{_FIT}, mmwave downlink, n=1632, 1-2482 Mbit/s: R^2 0.87, "
        "RMSE 0.405 W (Table 8: 0.00181)",
        "base_power_w": "the lte model's beta 1.2 W plus the artifact's downlink intercepts, "
        "mmwave 5.237 minus LTE 2.839 W (same phone and screen; RMSE 0.405 / 0.315 W), "
        "scripts/fit_5g_power.py",
        "uplink_base_power_w": "the lte model's beta 1.2 W plus the artifact's uplink "
        "intercepts, mmwave 5.664 minus LTE 2.926 W (RMSE 0.231 / 0.421 W), "
        "scripts/fit_5g_power.py",
        "anchor_promotion_s": f"4G promotion delay, Verizon NSA mmWave, {_TABLE7}",
        "anchor_promotion_power_w": _ANCHOR_W,
        "promotion_s": f"the NR leg: 5G minus 4G promotion delay, 1907 - 396 ms, Verizon NSA "
        f"mmWave, {_TABLE7}",
        "promotion_power_w": f"4G->5G switch, Verizon NSA mmWave, {_TABLE2}",
        "tail_s": _probe(10.2, "Verizon NSA mmWave", "SALMONBERRY_299_Verizon_NSAmmwave.csv"),
        "tail_power_w": f"tail, Verizon NSA mmWave, {_TABLE2}",
        "idle_power_w": _IDLE,
        "uplink_max_mbps": _range("mmwave uplink (220 Mbit/s)"),
        "downlink_max_mbps": _range("mmwave downlink (2482 Mbit/s)"),
    },
}
