"""DRFA/DRDM's projection onto the simplex: known projections, and huge or infinite dual
steps (a dual_lr of 1e30) give a distribution instead of a crash."""

import math

import pytest
import torch

from fedjoule.algorithms.drfa import project_simplex

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize(
    ("v", "expected"),
    [
        ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]),  # already on the simplex
        ([0.5, 0.1, -3.0], [0.7, 0.3, 0.0]),  # threshold 0.2 (by hand)
        ([100.5, 100.1, 97.0], [0.7, 0.3, 0.0]),  # the same, shifted: translation-invariant
        ([2.0, 0.0], [1.0, 0.0]),
        ([1e300, 2e300, -5.0], [0.0, 1.0, 0.0]),  # huge: shifted, no overflow
        ([INF, 1.0, INF], [0.5, 0.0, 0.5]),  # the limit: +inf entries share the mass
        ([NAN, 1.0, 2.0], [0.0, 0.0, 1.0]),  # NaN gets nothing
        ([-INF, -1e308, -1e308], [0.0, 0.5, 0.5]),
        ([NAN, NAN], [0.5, 0.5]),
    ],
)
def test_projection(v, expected):
    got = project_simplex(torch.tensor(v, dtype=torch.float64))
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    assert math.isclose(float(got.sum()), 1.0, abs_tol=1e-12)


def test_large_entries_keep_their_precision():
    """1e31 - (1e31 - 1) rounds to 0 in floats: the shift keeps the projection exact."""
    got = project_simplex(torch.tensor([1e31, 1e31 - 4e15, 3.0], dtype=torch.float64))
    assert torch.equal(got, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
