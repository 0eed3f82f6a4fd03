"""Pareto fronts against hand-worked examples."""

import math

from fedjoule.planning.pareto import Objective, front_mask, front_table, mark_fronts

# (energy J, accuracy): b dominates a (less energy, more accuracy); d costs more than c for the
# same accuracy; e equals c exactly (both kept); f has no accuracy (never on the front)
ENERGY = [5.0, 4.0, 6.0, 7.0, 6.0, 1.0, 9.0]
ACCURACY = [0.70, 0.72, 0.80, 0.80, 0.80, None, 0.85]


def test_front_of_a_hand_example():
    assert front_mask(ENERGY, ACCURACY) == [False, True, True, False, True, False, True]


def test_front_ignores_missing_and_nan_values():
    assert front_mask([1.0, None, 2.0, 3.0], [0.5, 0.9, math.nan, 0.6]) == [
        True,
        False,
        False,
        True,
    ]
    assert front_mask([], []) == []


def test_single_point_and_strict_domination():
    assert front_mask([3.0], [0.1]) == [True]
    # same energy, higher accuracy wins; same accuracy, lower energy wins
    assert front_mask([2.0, 2.0, 1.0], [0.5, 0.6, 0.6]) == [False, False, True]


def test_mark_fronts_and_table_use_energy_and_time():
    rows = [
        {"final_accuracy": 0.9, "energy_total_j": 10.0, "sim_time_s": 1.0},
        {"final_accuracy": 0.8, "energy_total_j": 5.0, "sim_time_s": 3.0},
        {"final_accuracy": 0.7, "energy_total_j": 6.0, "sim_time_s": 0.5},
    ]
    marked = mark_fronts(rows)
    assert [r["pareto_energy"] for r in marked] == [1, 1, 0]
    assert [r["pareto_time"] for r in marked] == [1, 0, 1]
    table = front_table(rows, ["a", "b", "c"], "energy")
    assert table == [
        {"run": "b", "energy_total_j": 5.0, "final_accuracy": 0.8},
        {"run": "a", "energy_total_j": 10.0, "final_accuracy": 0.9},
    ]


def test_to_target_costs_leave_out_runs_that_never_reached_it():
    rows = [
        {"worst_client_accuracy": 0.5, "energy_to_target_j": None, "time_to_target_s": None},
        {"worst_client_accuracy": 0.4, "energy_to_target_j": 3.0, "time_to_target_s": 2.0},
        {"worst_client_accuracy": 0.45, "energy_to_target_j": 4.0, "time_to_target_s": 1.0},
    ]
    marked = mark_fronts(rows, Objective("worst_client_accuracy", to_target=True))
    assert [r["pareto_energy"] for r in marked] == [0, 1, 1]
    assert [r["pareto_time"] for r in marked] == [0, 0, 1]
