"""Tests for dB conversions and path-loss models against closed forms."""

import numpy as np
import pytest

from fedjoule.channel.pathloss import free_space_db, log_distance_db, macro_3gpp_db
from fedjoule.channel.units import db_to_linear, dbm_to_w, linear_to_db, w_to_dbm


def test_db_conversions():
    assert db_to_linear(10.0) == pytest.approx(10.0)
    assert db_to_linear(3.0) == pytest.approx(1.9952623)
    assert linear_to_db(100.0) == pytest.approx(20.0)
    assert dbm_to_w(30.0) == pytest.approx(1.0)
    assert dbm_to_w(23.0) == pytest.approx(0.19952623)
    assert w_to_dbm(0.001) == pytest.approx(0.0)
    x = np.array([-20.0, 0.0, 13.0])
    np.testing.assert_allclose(linear_to_db(db_to_linear(x)), x)
    np.testing.assert_allclose(w_to_dbm(dbm_to_w(x)), x)


def test_macro_path_loss_at_1km_and_slope():
    assert macro_3gpp_db(1000.0) == pytest.approx(128.1)
    d = np.array([10.0, 100.0, 1000.0, 10000.0])
    np.testing.assert_allclose(np.diff(macro_3gpp_db(d)), 37.6)
    assert macro_3gpp_db(500.0) == pytest.approx(128.1 + 37.6 * np.log10(0.5))


def test_free_space_path_loss():
    # 20 log10(4 pi d f / c): 1 km at 2 GHz is about 98.5 dB
    assert free_space_db(1000.0, 2e9) == pytest.approx(98.46, abs=0.01)
    # 20 dB per decade of distance and of frequency
    assert free_space_db(10000.0, 2e9) - free_space_db(1000.0, 2e9) == pytest.approx(20.0)
    assert free_space_db(1000.0, 2e10) - free_space_db(1000.0, 2e9) == pytest.approx(20.0)


def test_log_distance_path_loss():
    assert log_distance_db(1.0, 40.0, 3.0) == pytest.approx(40.0)
    assert log_distance_db(100.0, 40.0, 3.0) == pytest.approx(100.0)
    assert log_distance_db(100.0, 40.0, 2.0, d0_m=10.0) == pytest.approx(60.0)
    np.testing.assert_allclose(log_distance_db(np.array([1.0, 10.0]), 30.0, 3.5), [30.0, 65.0])
