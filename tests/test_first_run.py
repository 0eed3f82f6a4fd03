"""The first run (issue 26): `default` spends what measured devices spend (a phone pays
its RRC promotion and its whole tail per participation), and a run on the theory papers'
radiated radio says so."""

from collections import Counter, defaultdict

import pytest

import fedjoule
from fedjoule.cli import invoke
from fedjoule.devices.radio import promotion_energy_j, resolve
from fedjoule.scenarios.schema import RadioSection

SMALL = {"training.rounds": 3, "population.size": 30, "availability.kind": "always"}
RADIO = {"phone-5g": "nr-nsa", "nbiot-sensor": "nbiot"}  # the others: lte


def per_participation(clients: list[dict]) -> dict[str, Counter]:
    classes: dict[str, Counter] = defaultdict(Counter)
    for c in clients:
        for key, value in c.items():
            if key.startswith("energy_") or key == "selected":
                classes[c["device_class"]][key] += value
    return {
        name: {k: v / c["selected"] for k, v in c.items() if k != "selected"}
        for name, c in classes.items()
    }


def test_default_phones_pay_the_measured_promotion_and_tail_per_participation(tmp_path):
    """Rounds a minute apart: every participation starts from idle (one promotion: LTE
    0.26 s x 1.21 W; phone-5g's NSA 5G, its LTE anchor 0.21 s x 1.21 W then its NR leg
    1.23 s x 0.699 W) and ends with a whole tail (LTE 11.576 s x 1.06 W, NSA 5G 10.4 s x
    0.26 W; the last round's counted as the end-of-run tail), a little more where the
    upload cut the download's."""
    result = fedjoule.run("default", tmp_path / "d", overrides=SMALL, device="cpu", quiet=True)
    assert result.summary["notes"] == []
    energy = per_participation(result.clients)
    assert set(energy) == {"phone-5g", "phone-lte-highend", "phone-lte-midrange", "nbiot-sensor"}
    for name, e in energy.items():
        radio = resolve(RadioSection(model=RADIO.get(name, "lte")), 0.2, 0.1)
        promotion_j = promotion_energy_j(radio)  # nr-nsa: the LTE anchor, then the NR leg
        tail_j = radio.tail_s * radio.tail_power_w
        assert e["energy_radio_promotion_j"] == pytest.approx(promotion_j, rel=1e-9), name
        tails = e["energy_radio_tail_j"] + e["energy_end_of_run_tail_j"]
        assert tail_j <= tails < tail_j + 0.01, name
    phone = energy["phone-5g"]
    radio_j = sum(phone[k] for k in ("energy_radio_promotion_j", "energy_radio_tail_j"))
    assert 3.8 < radio_j + phone["energy_end_of_run_tail_j"] < 3.9  # joules, not mJ


def test_a_radiated_radio_run_notes_the_theory_model(tmp_path, capsys):
    out = tmp_path / "t"
    args = ["run", "default-theory", "--out", str(out), "-q"]
    for key, value in SMALL.items():
        args += ["--set", f"{key}={value}"]
    assert invoke(args) == 0
    captured = capsys.readouterr()
    note = (
        "energy model: device classes phone, iot use the radiated radio model (the "
        "wireless-FL theory papers'): energy = radiated power x airtime, no circuit power, "
        "no RRC promotion or tail"
    )
    assert captured.err.replace("\n", " ").count("note: " + note) == 1
    assert fedjoule.RunResult.from_folder(out).summary["notes"][0].startswith(note)
    assert "energy per participation: phone " in captured.out.replace("\n", " ")
