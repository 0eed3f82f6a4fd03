"""Issue 29's acceptance for the bandwidth allocators on the default scenario, both system
engines, through the CLI in-process: equal-finish does not lengthen the mean round against
equal, and min-energy spends no more transmit energy than equal under the same deadline
(round.deadline_s) (docs/policies.md#bandwidth-allocators)."""

import csv
import math

import pytest

from fedjoule.cli import invoke

ROUNDS = 25
ENGINES = ("numpy", "simpy")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each (engine, policy.bandwidth): its (mean round time s, summed energy_tx_j) over
    rounds.csv of `run default --no-train` for ROUNDS rounds."""
    folder, figures = tmp_path_factory.mktemp("acceptance"), {}
    for engine in ENGINES:
        for bandwidth in ("equal", "equal-finish", "min-energy"):
            out = folder / f"{engine}-{bandwidth}"
            args = ["run", "default", "--no-train", "-q", "--engine", engine, "--out", str(out)]
            sets = [f"policy.bandwidth={bandwidth}", f"training.rounds={ROUNDS}"]
            assert invoke([*args, *(x for s in sets for x in ("--set", s))]) == 0
            with open(out / "rounds.csv", newline="") as f:
                rows = list(csv.DictReader(f))
            assert len(rows) == ROUNDS
            round_s = [float(r["sim_time_end_s"]) - float(r["sim_time_start_s"]) for r in rows]
            tx_j = math.fsum(float(r["energy_tx_j"]) for r in rows)
            figures[engine, bandwidth] = (math.fsum(round_s) / ROUNDS, tx_j)
    return figures


@pytest.mark.parametrize("engine", ENGINES)
def test_equal_finish_does_not_lengthen_the_mean_round(runs, engine):
    equal_s, _ = runs[engine, "equal"]
    finish_s, _ = runs[engine, "equal-finish"]
    assert finish_s <= equal_s * (1 + 1e-9)


def test_both_engines_give_the_same_figures(runs):
    for bandwidth in ("equal", "equal-finish", "min-energy"):
        numpy_figures, simpy_figures = runs["numpy", bandwidth], runs["simpy", bandwidth]
        assert simpy_figures == pytest.approx(numpy_figures, rel=1e-9)


@pytest.mark.parametrize("engine", ENGINES)
def test_min_energy_spends_no_more_transmit_energy_than_equal(runs, engine):
    _, equal_j = runs[engine, "equal"]
    _, min_energy_j = runs[engine, "min-energy"]
    assert min_energy_j <= equal_j * (1 + 1e-9)
