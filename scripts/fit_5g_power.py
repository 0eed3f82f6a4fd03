"""Fit fedjoule's 5G NR radio numbers to the SIGCOMM'21 artifact's published CSVs and
check them against the shipped ones (docs/models.md#5g-nr-radios).

    python scripts/fit_5g_power.py FOLDER

FOLDER is a checkout of github.com/SIGCOMM21-5G/artifact (Narayanan et al., "A
Variegated Look at 5G in the Wild", SIGCOMM 2021); the repository ships only the numbers,
never the data. Read from it:

- Data-Transfer-Power/MN-Transfer/data-processed/MN-Transfer_combined.csv: power against
  throughput of a Galaxy S20 Ultra on Verizon LTE, low-band NSA 5G and mmWave 5G (iPerf
  at set rates). Per network and direction a least-squares line P = slope x T + intercept
  (T in Mbit/s, P in W): the slopes, and the mmWave base power as the LTE base (ARO's
  beta, 1.2 W) plus the mmWave intercept minus the LTE intercept (same phone, same
  screen, so the difference is the radio's).
- RRC-Probe/data/*.csv: RTT against the idle time between probe packets. The tail timer
  shows as the first idle time whose median RTT exceeds 500 ms (the promotion's delay
  added); a cross-check of the paper's Table 7, whose timers are shipped.

Prints every coefficient with its fit quality (n, throughput range, R^2, RMSE) beside the
shipped value; exit 0 when every fitted value rounds to the shipped one (timers: within
0.5 s), 1 when one differs, 2 when FOLDER or a file is missing.
"""

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

TRANSFER = Path("Data-Transfer-Power/MN-Transfer/data-processed/MN-Transfer_combined.csv")
PROBE = Path("RRC-Probe/data")
LTE_BETA_W = 1.2  # ARO LTE_BETA, the lte model's base power (fedjoule/devices/radio.py)
IDLE_RTT_MS = 500.0  # above: the probe found the radio idle (promotion + paging wait)
TIMER_TOLERANCE_S = 0.5
# (model, radio parameter) <- (artifact network type, direction)
SLOPES = {
    ("nr-nsa", "uplink_w_per_mbps"): ("NSALow", "uplink"),
    ("nr-nsa", "downlink_w_per_mbps"): ("NSALow", "downlink"),
    ("nr-mmwave", "uplink_w_per_mbps"): ("mmwave", "uplink"),
    ("nr-mmwave", "downlink_w_per_mbps"): ("mmwave", "downlink"),
}
BASES = {
    ("nr-mmwave", "uplink_base_power_w"): "uplink",
    ("nr-mmwave", "base_power_w"): "downlink",
}
# (model) <- RRC-Probe file of the carrier and band of the paper's Table 7 row shipped
TIMERS = {
    "nr-nsa": "RASPBERRY_670_TMobile_NSA.csv",
    "nr-sa": "S20US_TMobile_SA.csv",
    "nr-mmwave": "SALMONBERRY_299_Verizon_NSAmmwave.csv",
}


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        fail(f"{path}: no such file (FOLDER must be a checkout of SIGCOMM21-5G/artifact)")
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def fit_line(x, y) -> dict:
    """Least-squares P = slope x T + intercept, with its quality."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    r2 = 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    rmse = float(np.sqrt((residual**2).mean()))
    return dict(slope=float(slope), intercept=float(intercept), r2=r2, rmse=rmse, n=len(x),
                low=float(x.min()), high=float(x.max()))  # fmt: skip


def transfer_fits(rows: list[dict]) -> dict:
    """{(network type, direction): fit_line} of the MN-Transfer rows (power mW -> W)."""
    points = defaultdict(lambda: ([], []))
    for r in rows:
        xs, ys = points[(r["network type"], r["direction"])]
        xs.append(float(r["throughput"]))
        ys.append(float(r["avg_power"]) / 1000.0)
    return {key: fit_line(*xy) for key, xy in points.items() if len(xy[0]) >= 2}


def probe_timer_s(rows: list[dict]) -> float:
    """The first idle time (s) whose median RTT of the kept probes exceeds IDLE_RTT_MS."""
    rtts = defaultdict(list)
    for r in rows:
        if r["KeepOrDrop"] == "YEP":
            rtts[round(float(r["interval"]), 1)].append((float(r["RTT1"]) + float(r["RTT2"])) / 2)
    for interval in sorted(rtts):
        if statistics.median(rtts[interval]) > IDLE_RTT_MS:
            return interval
    return float("nan")


def fitted_values(folder: Path) -> list[tuple[str, str, float, str, float]]:
    """(model, parameter, fitted, quality, tolerance) of every fitted number."""
    fits = transfer_fits(read_csv(folder / TRANSFER))
    out = []
    for (model, name), key in SLOPES.items():
        f = fits[key]
        quality = (f"{key[0]} {key[1]}: n={f['n']}, {f['low']:.0f}-{f['high']:.0f} Mbit/s, "
                   f"R^2 {f['r2']:.2f}, RMSE {f['rmse']:.3f} W")  # fmt: skip
        out.append((model, name, round(f["slope"], 4), quality, 0.0))
    for (model, name), direction in BASES.items():
        mm, lte = fits[("mmwave", direction)], fits[("LTE", direction)]
        base = LTE_BETA_W + mm["intercept"] - lte["intercept"]
        quality = (f"{LTE_BETA_W} + intercepts mmwave {mm['intercept']:.3f} - LTE "
                   f"{lte['intercept']:.3f} W ({direction}; RMSE {mm['rmse']:.3f} / "
                   f"{lte['rmse']:.3f} W)")  # fmt: skip
        out.append((model, name, round(base, 3), quality, 0.0))
    for model, name in TIMERS.items():
        timer = probe_timer_s(read_csv(folder / PROBE / name))
        quality = f"RRC-Probe {name}: first idle time with median RTT > {IDLE_RTT_MS:.0f} ms"
        out.append((model, "tail_s", timer, quality, TIMER_TOLERANCE_S))
    return out


def shipped() -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fedjoule.devices.radio_nr import NR_DEFAULTS

    return NR_DEFAULTS


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    if not folder.is_dir():
        fail(f"{folder}: no such folder (a checkout of SIGCOMM21-5G/artifact)")
    defaults = shipped()
    differ = 0
    print(f"{'model':<10} {'parameter':<20} {'fitted':>8} {'shipped':>8}  fit")
    for model, name, value, quality, tolerance in fitted_values(folder):
        ship = defaults[model][name]
        ok = abs(value - ship) <= tolerance + 1e-12
        differ += not ok
        flag = "" if ok else "  DIFFERS"
        print(f"{model:<10} {name:<20} {value:>8.4g} {ship:>8.4g}  {quality}{flag}")
    if differ:
        print(f"{differ} value(s) differ from the shipped coefficients")
        return 1
    print("every fitted value reproduces the shipped coefficient")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
