"""`fedjoule profiles --import FILE`: a power_profile.xml written here becomes a dvfs table
that a scenario takes as it is; hostile files (a DOCTYPE, billion laughs, a FIFO, a huge
file, bad numbers, mismatched lists) exit 2 with one error line naming file, field, value."""

import os

import pytest
import yaml

from fedjoule import cli
from fedjoule.datafile import MAX_BYTES
from fedjoule.scenarios.schema import DeviceClass

GOOD = """<?xml version="1.0" encoding="utf-8"?>
<!-- a comment -->
<device name="Android">
  <item name="battery.capacity">3000</item>
  <array name="cpu.clusters.cores"><value>4</value><value>2</value></array>
  <item name="cpu.active">10</item>
  <item name="cpu.cluster_power.cluster1">5</item>
  <array name="cpu.core_speeds.cluster0"><value>300000</value><value>1000000</value></array>
  <array name="cpu.core_power.cluster0"><value>20</value><value>40</value></array>
  <array name="cpu.core_speeds.cluster1">
    <value>1000000</value> <!-- 1 GHz -->
    <value>2000000</value>
  </array>
  <array name="cpu.core_power.cluster1"><value>100</value><value>200.5</value></array>
  <item name="modem.controller.voltage">3800</item>
  <item name="wifi.controller.voltage">0</item>
  <array name="wifi.controller.tx_levels">1 </array>
</device>
"""


def write(tmp_path, text: str, name: str = "power_profile.xml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_import_prints_a_dvfs_table_a_scenario_takes(tmp_path, capsys):
    """The YAML on stdout, the voltage from the file (3800 mV)."""
    path = write(tmp_path, GOOD)
    code, out, err = run(capsys, "--import", str(path))
    assert code == 0, err
    assert "# power = current x 3.8 V (the file's controller voltage)" in out
    fields = yaml.safe_load(out)
    table = fields["dvfs"]
    assert table["voltage_v"] == 3.8 and table["active_ma"] == 10.0
    assert table["cluster"] == 1 and table["cores_used"] == 2  # the highest top speed
    assert table["clusters"][1] == {
        "cores": 2,
        "core_speeds_khz": [1e6, 2e6],
        "core_power_ma": [100.0, 200.5],
        "cluster_power_ma": 5.0,
    }
    assert table["clusters"][0]["cluster_power_ma"] == 0.0  # not given: 0
    assert fields["battery_j"] == pytest.approx(3000 * 3.8 * 3.6)
    c = DeviceClass.model_validate({"compute": "cpu", "cpu_freq_hz": 1.5e9, **fields})
    assert c.dvfs.clusters[1].core_power_ma == [100.0, 200.5]


def run(capsys, *args) -> tuple[int, str, str]:
    code = cli.invoke(["profiles", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_voltage_option_wins_and_is_needed_when_the_file_gives_none(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("3800", "0"))
    code, _, err = run(capsys, "--import", str(path))
    assert code == 2
    assert err.count("error:") == 1 and "modem.controller.voltage" in err
    assert "--voltage-v" in err and str(path) in err
    code, out, _ = run(capsys, "--import", str(path), "--voltage-v", "3.85")
    assert code == 0 and yaml.safe_load(out)["dvfs"]["voltage_v"] == 3.85


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<device><item name="cpu.active">&lol3;</item></device>
"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE device SYSTEM "file:///etc/passwd"><device/>
"""
CASES = {
    "billion laughs": (BILLION_LAUGHS, ["has a DOCTYPE", "refused"]),
    "external DTD": (EXTERNAL, ["has a DOCTYPE"]),
    "not XML": ("<device><item>", ["not well-formed XML"]),
    "other element": ("<device><script/></device>", ["unexpected element <script>"]),
    "nan": (GOOD.replace("<value>200.5</value>", "<value>nan</value>"),
            ["field cpu.core_power.cluster1: value 'nan' is not a finite number"]),
    "inf": (GOOD.replace("<value>2000000</value>", "<value>inf</value>"),
            ["field cpu.core_speeds.cluster1: value 'inf'"]),
    "negative": (GOOD.replace("<value>20</value>", "<value>-20</value>"),
                 ["field cpu.core_power.cluster0: value '-20'", "a finite number of at least 0"]),
    "half a core": (GOOD.replace("<value>4</value>", "<value>4.5</value>"),
                    ["field cpu.clusters.cores: value '4.5' is not a whole number of at least 1"]),
    "mismatched": (GOOD.replace("<value>100</value>", ""),
                   ["field cpu.core_power.cluster1: value has 1 entries",
                    "cpu.core_speeds.cluster1 2"]),
    "missing cluster": (GOOD.replace("cpu.core_speeds.cluster1", "cpu.core_speeds.clusterX"),
                        ["field cpu.core_speeds.cluster1: missing"]),
    "twice": (GOOD.replace("</device>", '<item name="cpu.active">3</item></device>'),
              ["field cpu.active: given 2 times"]),
    "decreasing": (GOOD.replace("<value>300000</value>", "<value>3000000</value>"),
                   ["field dvfs.clusters.0", "core_speeds_khz must increase"]),
    "legacy form": ('<device><array name="cpu.speeds.cluster0"><value>1</value></array></device>',
                    ["field cpu.clusters.cores: missing", "older cpu.speeds form"]),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_or_broken_file_is_one_error_and_exit_2(case, tmp_path, capsys):
    text, words = CASES[case]
    path = write(tmp_path, text)
    code, out, err = run(capsys, "--import", str(path))
    assert code == 2 and out == ""
    assert err.count("error:") == 1 and "Traceback" not in err
    flat = " ".join(err.split())
    assert str(path) in flat
    for word in words:
        assert word in flat, flat


def test_a_fifo_a_folder_and_a_huge_file_are_refused_before_reading(tmp_path, capsys):
    fifo = tmp_path / "pipe.xml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.xml"
    with huge.open("wb") as f:
        f.truncate(MAX_BYTES["power profile"] + 1)
    for path, words in ((fifo, "a FIFO"), (tmp_path, "a folder"), (huge, "larger than")):
        code, _, err = run(capsys, "--import", str(path))
        assert code == 2 and err.count("error:") == 1 and words in err and str(path) in err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--voltage-v", "3.7"], "--voltage-v goes with --import FILE"),
        (["phone-5g", "--import", "x.xml"], "give no profile name with it"),
        (["--import", "x.xml", "--voltage-v", "nan"], "--voltage-v nan"),
        (["--import", "x.xml", "--voltage-v", "-1"], "--voltage-v -1.0"),
    ],
)
def test_option_misuse_is_one_error(args, words, capsys):
    code, _, err = run(capsys, *args)
    assert code == 2 and err.count("error:") == 1 and words in err
