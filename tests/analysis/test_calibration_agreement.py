"""Calibration error and judge agreement on cases built to fool them."""

from __future__ import annotations

import math

import pytest

from searchbox.analysis.agreement import agreement
from searchbox.analysis.calibration import calibration, reliability_figure


def test_perfectly_calibrated_is_zero_and_overconfident_is_not():
    conf = [0.05] * 20 + [0.95] * 20
    correct = [1] + [0] * 19 + [1] * 19 + [0]
    assert calibration(conf, correct).calibration_error == pytest.approx(0.0)
    over = calibration([0.9] * 10, [1, 0] * 5)
    assert over.calibration_error == pytest.approx(0.4) and over.ece == pytest.approx(0.4)


def test_bins_do_not_average_away_miscalibration():
    # Pooled, mean confidence 0.5 equals accuracy 0.5; per bin, both halves are off by 0.5.
    cal = calibration([0.0] * 10 + [1.0] * 10, [1] * 10 + [0] * 10)
    assert cal.calibration_error == pytest.approx(1.0) and len(cal.bins) == 2 and cal.bins[-1]["hi"] == 1.0


def test_unstated_is_left_out_not_zero(tmp_path):
    cal = calibration([None, float("nan"), 0.8], [1, 0, 1])
    assert cal.n == 1 and cal.unstated == 2 and cal.calibration_error == pytest.approx(0.2)
    empty = calibration([None], [1])
    assert empty.calibration_error is None and empty.ece is None
    assert reliability_figure(cal, tmp_path / "r.svg").stat().st_size > 0


def test_kappa_percent_and_disagreements():
    ids = ["a", "b", "c", "d", "e", "f"]
    same = agreement(ids, [1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0])
    assert same.percent == 1.0 and same.kappa == pytest.approx(1.0) and same.disagree == []
    opp = agreement(ids, [1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1])
    assert opp.kappa == pytest.approx(-1.0) and opp.disagree == ids
    # 90% agreement that chance alone gives: one judge says "correct" to everything
    lazy = agreement([str(i) for i in range(10)], [1] * 9 + [0], [1] * 10)
    assert lazy.percent == 0.9 and lazy.kappa == pytest.approx(0.0) and lazy.disagree == ["9"]
    assert agreement(ids, [1] * 6, [1] * 6).kappa is None  # both constant: agreement says nothing
    assert agreement(["x", "y"], [None, 1], [1, math.nan]).n == 0
