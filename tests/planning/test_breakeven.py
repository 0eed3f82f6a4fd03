"""The break-even staircase K*(x) = argmin_K R(K)(K + x): the issue's worked example with
exact breakpoints, and kstar_of_x / breakpoints against brute force."""

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedjoule.planning.breakeven import (
    breakpoints,
    cell_x,
    exact_breakpoints,
    kstar_of_x,
    plan_breakeven,
)

# Fashion-MNIST DRDM plan (docs/plan-example): R(K) for K = 1, 2, 5, 10, 20, 50
EXAMPLE = {1: 167, 2: 115, 5: 46, 10: 43, 20: 39, 50: 23}


def brute(rounds_by_k: dict, x) -> int:
    """argmin over the reached K of R(K)(K + x), exactly, ties to the smaller K."""
    x = Fraction(x)
    costs = {k: r * (k + x) for k, r in rounds_by_k.items() if r is not None}
    return min(costs, key=lambda k: (costs[k], k))


def test_worked_example_breakpoints_are_exact():
    # K=1 against K=5: 167 (1 + x) = 46 (5 + x) at x = 63/121; K=5 against K=50:
    # 46 (5 + x) = 23 (50 + x) at x = 40. K = 2, 10, 20 are never optimal.
    assert exact_breakpoints(EXAMPLE) == [
        (0, Fraction(63, 121), 1),
        (Fraction(63, 121), 40, 5),
        (40, None, 50),
    ]
    assert breakpoints(EXAMPLE) == [
        (0.0, 63 / 121, 1),
        (63 / 121, 40.0, 5),
        (40.0, math.inf, 50),
    ]
    assert 63 / 121 == pytest.approx(0.520661, abs=1e-6)
    assert kstar_of_x(EXAMPLE, 0.0) == 1
    assert kstar_of_x(EXAMPLE, 0.1) == 1
    for x in (1.0, 3.0, 10.0, 30.0):
        assert kstar_of_x(EXAMPLE, x) == 5
    for x in (40.0 + 1e-9, 100.0, 1e6, math.inf):
        assert kstar_of_x(EXAMPLE, x) == 50
    # at a breakpoint both K cost the same: the smaller K is reported
    assert kstar_of_x(EXAMPLE, Fraction(63, 121)) == 1
    assert kstar_of_x(EXAMPLE, 40.0) == 5
    assert kstar_of_x(EXAMPLE, 40.0 - 1e-9) == 5


def test_unreached_k_is_left_out_and_bad_input_is_refused():
    rounds = {1: 100, 5: None, 10: 30}
    # 100 (1 + x) = 30 (10 + x) at x = 20/7
    assert breakpoints(rounds) == [(0.0, 20 / 7, 1), (20 / 7, math.inf, 10)]
    assert kstar_of_x(rounds, 2.8) == 1 and kstar_of_x(rounds, 2.9) == 10
    assert breakpoints({1: None, 2: None}) == []
    with pytest.raises(ValueError, match="no K reaches"):
        kstar_of_x({1: None}, 1.0)
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="x="):
            kstar_of_x(EXAMPLE, bad)
    with pytest.raises(ValueError, match="an integer >= 1"):
        kstar_of_x({0: 5}, 1.0)
    with pytest.raises(ValueError, match=r"R\(K\) >= 1"):
        kstar_of_x({2: 0.5}, 1.0)
    # means over seeds: 100.5 (1 + x) = 30.25 (10 + x) at x = (302.5 - 100.5) / 70.25
    means = {1: 100.5, 10: 30.25}
    assert breakpoints(means) == [(0.0, 202 / 70.25, 1), (202 / 70.25, math.inf, 10)]
    assert breakpoints({7: 12}) == [(0.0, math.inf, 7)]
    # equal R K at x = 0: K=1 only at x = 0 itself (a range of zero width), K=2 beyond
    assert breakpoints({1: 10, 2: 5}) == [(0.0, 0.0, 1), (0.0, math.inf, 2)]


def check_against_brute(rounds_by_k: dict, xs) -> None:
    segments = exact_breakpoints(rounds_by_k)
    ks = [k for _, _, k in segments]
    rounds = [rounds_by_k[k] for k in ks]
    # K grows and R(K) falls from range to range; the ranges tile [0, inf)
    assert ks == sorted(ks) and len(set(ks)) == len(ks)
    assert rounds == sorted(rounds, reverse=True) and len(set(rounds)) == len(rounds)
    assert segments[0][0] == 0 and segments[-1][1] is None
    for (_, high, _), (low, _, _) in zip(segments, segments[1:], strict=False):
        assert high == low
    probes = [Fraction(x) for x in xs]
    for _, high, _ in segments:  # each breakpoint, and just either side of it
        if high is not None:
            probes += [high, high * (1 + Fraction(1, 10**9)), high * (1 - Fraction(1, 10**9))]
    for x in probes:
        if x < 0:
            continue
        want = brute(rounds_by_k, x)
        assert kstar_of_x(rounds_by_k, x) == want, (rounds_by_k, x)
        inside = [
            k for low, high, k in segments if (low < x or x == 0) and (high is None or x <= high)
        ]
        assert inside[0] == want, (rounds_by_k, x, segments)
    # the float view: the same ranges
    assert breakpoints(rounds_by_k) == [
        (float(lo), math.inf if hi is None else float(hi), k) for lo, hi, k in segments
    ]


def test_random_grids_against_brute_force():
    rng = random.Random(7)
    for _ in range(300):
        ks = rng.sample([1, 2, 3, 5, 8, 10, 16, 20, 32, 50, 64, 100], rng.randint(1, 8))
        rounds = {k: (rng.randint(1, 400) if rng.random() > 0.15 else None) for k in ks}
        if all(r is None for r in rounds.values()):
            continue
        xs = [0.0] + [10 ** rng.uniform(-3, 5) for _ in range(40)]
        check_against_brute(rounds, xs)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.integers(1, 200), st.one_of(st.none(), st.integers(1, 500)), min_size=1, max_size=7
    ),
    st.lists(st.floats(0, 1e6, allow_nan=False), max_size=20),
)
def test_hypothesis_against_brute_force(rounds, xs):
    if all(r is None for r in rounds.values()):
        assert breakpoints(rounds) == []
        return
    check_against_brute(rounds, xs)


def plan_rows(cell, e_step, e_comm, rounds_by_k, clients=5):
    """Rows of a plan cell whose every round costs clients (K e_step + e_comm)."""
    rows = []
    for k, r in rounds_by_k.items():
        reached = r is not None
        rows.append(
            {
                "K": k,
                "snr_db": cell[0],
                "bandwidth_hz": cell[1],
                "reached": int(reached),
                "rounds_to_target": r,
                "E_compute_j": clients * r * k * e_step if reached else None,
                "E_tx_j": clients * r * e_comm * 0.75 if reached else None,
                "E_rx_j": clients * r * e_comm * 0.20 if reached else None,
                # the radio's promotion and tail count as communication too
                "E_total_j": clients * r * (k * e_step + e_comm) if reached else None,
            }
        )
    return rows


def test_cell_x_recovers_the_ratio_and_the_cells_kstar():
    rounds = {**EXAMPLE, 100: None}
    for e_comm, want in ((0.001, 1), (0.3, 5), (5.0, 50)):
        rows = plan_rows((0.0, 1e6), 0.01, e_comm, rounds)
        x = cell_x(rows)
        assert x == pytest.approx(e_comm / 0.01, rel=1e-12)
        energies = {
            r["K"]: r["E_total_j"] for r in rows if r["reached"]
        }
        assert min(energies, key=lambda k: (energies[k], k)) == want == kstar_of_x(rounds, x)
    assert cell_x(plan_rows((0.0, 1e6), 0.01, 1.0, {1: None, 5: None})) is None
    assert cell_x(plan_rows((0.0, 1e6), 0.0, 1.0, {1: 10})) is None  # nothing computed


def test_plan_breakeven_reports_cells_off_the_staircase():
    table, best = [], []
    for cell, e_comm, k_star in (((0.0, 1e5), 5.0, 50), ((30.0, 1e7), 0.001, 2)):
        rows = plan_rows(cell, 0.01, e_comm, EXAMPLE)
        x = cell_x(rows)
        for r in rows:
            r["x"] = x
        table += rows
        best.append({"snr_db": cell[0], "bandwidth_hz": cell[1], "K_star": k_star})
    found = plan_breakeven(table, best, EXAMPLE, "kstar_breakeven.png")
    assert found["breakpoints"] == [
        {"x_low": 0.0, "x_high": 63 / 121, "K_star": 1},
        {"x_low": 63 / 121, "x_high": 40.0, "K_star": 5},
        {"x_low": 40.0, "x_high": None, "K_star": 50},
    ]
    assert [c["K_star_of_x"] for c in found["cells"]] == [50, 1]
    assert len(found["off_staircase"]) == 1
    assert found["off_staircase"][0].startswith("SNR 30 dB, 1e+07 Hz: K* = 2")
