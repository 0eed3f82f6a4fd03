"""scripts/fit_5g_power.py, run as a user runs it: on rows the test writes (exact lines,
so the fit returns their coefficients), on a mismatch, on a missing folder; and on the
SIGCOMM'21 artifact itself when FEDJOULE_5G_ARTIFACT names a checkout of it."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedjoule.devices.radio_nr import NR_DEFAULTS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fit_5g_power.py"
TRANSFER = "Data-Transfer-Power/MN-Transfer/data-processed/MN-Transfer_combined.csv"
PROBES = {
    "nr-nsa": "RASPBERRY_670_TMobile_NSA.csv",
    "nr-sa": "S20US_TMobile_SA.csv",
    "nr-mmwave": "SALMONBERRY_299_Verizon_NSAmmwave.csv",
}
LTE_INTERCEPT = {"uplink": 2.9, "downlink": 2.8}


def fit(folder) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True, timeout=120
    )


def lines() -> dict:
    """(network, direction) -> (slope W per Mbit/s, intercept W) giving the shipped values."""
    nsa, mm = NR_DEFAULTS["nr-nsa"], NR_DEFAULTS["nr-mmwave"]
    up_mm = LTE_INTERCEPT["uplink"] + mm["uplink_base_power_w"] - 1.2
    down_mm = LTE_INTERCEPT["downlink"] + mm["base_power_w"] - 1.2
    return {
        ("NSALow", "uplink"): (nsa["uplink_w_per_mbps"], 3.2),
        ("NSALow", "downlink"): (nsa["downlink_w_per_mbps"], 3.1),
        ("mmwave", "uplink"): (mm["uplink_w_per_mbps"], up_mm),
        ("mmwave", "downlink"): (mm["downlink_w_per_mbps"], down_mm),
        ("LTE", "uplink"): (0.0767, LTE_INTERCEPT["uplink"]),
        ("LTE", "downlink"): (0.0115, LTE_INTERCEPT["downlink"]),
    }


def write_artifact(folder: Path, changed: dict | None = None) -> None:
    """A few rows per network and direction on exact lines, and RRC-Probe files whose RTT
    jumps above 500 ms at the shipped tail timer."""
    path = folder / TRANSFER
    path.parent.mkdir(parents=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["throughput", "time_since_start", "avg_power", "target bandwidth",
                    "direction", "network type", "provider"])  # fmt: skip
        for (network, direction), (slope, intercept) in {**lines(), **(changed or {})}.items():
            for t in (1.0, 10.0, 40.0, 100.0):
                power_mw = (slope * t + intercept) * 1000
                w.writerow([t, 0.0, power_mw, t, direction, network, "Verizon"])
    probe = folder / "RRC-Probe" / "data"
    probe.mkdir(parents=True)
    for model, name in PROBES.items():
        timer = NR_DEFAULTS[model]["tail_s"]
        with open(probe / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["enabled_radio_type", "carrier", "interval", "RTT1", "RTT2",
                        "active_radio_type", "KeepOrDrop"])  # fmt: skip
            for interval in np.round(np.arange(0.0, 20.0, 0.1), 1):
                rtt = 100 if interval < timer - 1e-9 else 1000
                w.writerow(["5G", "c", interval, rtt, rtt, 5, "YEP"])
                w.writerow(["5G", "c", interval, 5000, 5000, 5, "BAD"])  # dropped


def test_the_fit_returns_the_lines_coefficients_and_matches_the_shipped(tmp_path):
    write_artifact(tmp_path)
    done = fit(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every fitted value reproduces the shipped coefficient" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines()[1:-1]]
    assert len(rows) == 9  # 4 slopes, 2 mmWave base powers, 3 tail timers
    for model, name, fitted, shipped, *_fit in rows:
        assert float(fitted) == pytest.approx(NR_DEFAULTS[model][name], rel=1e-9), name
        assert float(shipped) == pytest.approx(NR_DEFAULTS[model][name], rel=1e-9), name
    assert "R^2 1.00, RMSE 0.000 W" in done.stdout  # exact lines: a perfect fit


def test_a_slope_off_the_shipped_value_exits_1_and_names_it(tmp_path):
    write_artifact(tmp_path, {("NSALow", "uplink"): (0.05, 3.2)})
    done = fit(tmp_path)
    assert done.returncode == 1
    (differs,) = [line for line in done.stdout.splitlines() if "DIFFERS" in line]
    assert differs.split()[:3] == ["nr-nsa", "uplink_w_per_mbps", "0.05"]
    assert "1 value(s) differ from the shipped coefficients" in done.stdout


def test_a_missing_folder_or_file_exits_2_with_one_error_line(tmp_path):
    done = fit(tmp_path / "nowhere")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nowhere'}: no such folder (a checkout of SIGCOMM21-5G/artifact)"
    ]
    done = fit(tmp_path)  # the folder exists, its CSVs do not
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / TRANSFER}: no such file")


ARTIFACT = os.environ.get("FEDJOULE_5G_ARTIFACT")


@pytest.mark.skipif(
    not ARTIFACT,
    reason="FEDJOULE_5G_ARTIFACT is not set: point it at a checkout of "
    "github.com/SIGCOMM21-5G/artifact to check the shipped 5G coefficients against it",
)
def test_the_artifact_reproduces_the_shipped_coefficients():
    done = fit(ARTIFACT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every fitted value reproduces the shipped coefficient" in done.stdout
