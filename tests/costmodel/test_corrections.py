"""sim.costmodel.corrections: inverse-distance interpolation of measured/model ratios in log2 space
(points and queries are sizes; distances are between their log2)."""

from __future__ import annotations

import pytest

from sim.costmodel.corrections import interpolate


def test_a_calibrated_point_returns_its_ratio() -> None:
    assert interpolate([((1024, 1024), 1.5)], (1024, 1024)) == 1.5


def test_far_from_every_point_the_model_stands_alone() -> None:
    # log2 distance from (10, 10) to (20, 20) is sqrt(200), beyond the radius of 1.5
    assert interpolate([((1024, 1024), 1.5)], (2**20, 2**20)) == 1.0
    assert interpolate([], (64, 64)) == 1.0


def test_weights_are_inverse_squared_log_distances() -> None:
    # x at log2 (10.25, 10): squared distances 0.0625 to (10, 10) and 0.5625 to (11, 10);
    # weights 16 and 16/9: (3 x 16 + 1 x 16/9) / (16 + 16/9) = 448 / 160 = 2.8
    points = [((1024, 1024), 3.0), ((2048, 1024), 1.0)]
    assert interpolate(points, (2**10.25, 2**10)) == pytest.approx(2.8)


def test_only_the_four_nearest_points_count() -> None:
    # four points at squared log distance 1 with ratio 2, a fifth at squared distance 2 with ratio 100
    points = [((2048, 1024), 2.0), ((512, 1024), 2.0), ((1024, 2048), 2.0), ((1024, 512), 2.0), ((2048, 2048), 100.0)]
    assert interpolate(points, (1024, 1024)) == pytest.approx(2.0)


def test_sizes_below_one_count_as_one() -> None:
    assert interpolate([((1,), 1.25)], (0.5,)) == 1.25
