"""The empirical-Bayes smoother behind the final choice, and the selectors' use of it."""

from __future__ import annotations

import random
import statistics

import pytest

from zeus_core.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_core.optimizer.power_limit.smoothing import smooth_profile

LIMITS = [300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0]


def _convex(w: float) -> float:
    """A smooth cost with its least at 200 W."""
    return 10.0 + 0.0004 * (w - 200.0) ** 2


@pytest.mark.parametrize("stderrs", [[0.0] * 7, [0.1, 0.0, 0.1, 0.1, 0.1, 0.1, 0.1], [float("inf")] * 7])
def test_noise_free_or_unknown_noise_is_left_as_measured(stderrs: list[float]) -> None:
    values = [12.0, 10.5, 13.0, 9.0, 11.0, 9.5, 14.0]  # bumpy, like the measured A40 profiles
    assert smooth_profile(LIMITS, values, stderrs) == values


def test_fewer_than_three_limits_are_left_as_measured() -> None:
    assert smooth_profile([300.0, 250.0], [10.0, 9.0], [0.5, 0.5]) == [10.0, 9.0]


def test_a_real_bump_known_tightly_stays() -> None:
    values = [_convex(w) for w in LIMITS]
    values[3] += 1.5  # a 15 % bump at one limit, measured to ±0.2 %
    fitted = smooth_profile(LIMITS, values, [0.02] * 7)
    assert all(abs(f - v) < 0.05 for f, v in zip(fitted, values))


def test_noise_on_a_smooth_curve_is_mostly_removed() -> None:
    rng = random.Random(0)
    truth = [_convex(w) for w in LIMITS]
    raw_errors, fitted_errors, raw_misses, fitted_misses = [], [], 0, 0
    for _ in range(400):
        values = [t + rng.gauss(0.0, 0.15) for t in truth]
        fitted = smooth_profile(LIMITS, values, [0.15] * 7)
        raw_errors += [(v - t) ** 2 for v, t in zip(values, truth)]
        fitted_errors += [(f - t) ** 2 for f, t in zip(fitted, truth)]
        raw_misses += truth[values.index(min(values))] > 1.01 * min(truth)
        fitted_misses += truth[fitted.index(min(fitted))] > 1.01 * min(truth)
    assert statistics.mean(fitted_errors) < 0.85 * statistics.mean(raw_errors)
    assert fitted_misses < 0.7 * raw_misses  # the least of the fit is more often the true optimum's


def test_unequal_spacing_is_a_divided_difference() -> None:
    # A straight line stays straight whatever the spacing (its second differences are all zero).
    limits = [300.0, 275.0, 200.0, 175.0, 100.0]
    values = [0.02 * w for w in limits]
    assert smooth_profile(limits, values, [0.3] * 5) == pytest.approx(values)


def _measured(w: float, cost: float, steps: int) -> PowerLimitMeasurement:
    """Time and energy per step both ``cost`` (5 % jitter per step over ``steps`` steps)."""
    var = (0.05 * cost) ** 2
    return PowerLimitMeasurement(w, steps, cost, cost, var, var, var, samples=steps)


def test_a_lucky_poorly_measured_limit_does_not_win() -> None:
    # True costs are flat around 200 W; 250 W, measured for 12 steps, drew 2 % low.
    costs = {300: 10.4, 275: 10.2, 250: 9.85, 225: 10.05, 200: 10.0, 175: 10.05, 150: 10.2}
    steps = {250: 12}
    ms = [_measured(w, c, steps.get(w, 120)) for w, c in costs.items()]
    assert Time().select(ms) == Energy().select(ms) == ZeusCost(1.0).select(ms) != 250
    exact = [PowerLimitMeasurement(w, 40, c, c) for w, c in costs.items()]
    assert Time().select(exact) == 250  # measured exactly, the dip is real and chosen


def test_slowdown_bound_is_judged_on_smoothed_times() -> None:
    # Time rises smoothly, 200 W truly 9 % slower; a lucky 12-step draw makes 175 W look 9.5 % slower.
    rows = [
        (300, 1.00, 100),
        (275, 1.02, 97),
        (250, 1.045, 94),
        (225, 1.065, 92),
        (200, 1.09, 90),
        (175, 1.095, 88),
        (150, 1.16, 87),
    ]
    steps = {175: 12}
    ms = [
        PowerLimitMeasurement(w, n, t, e, (0.05 * t) ** 2, (0.05 * e) ** 2, 0.0, samples=n)
        for w, t, e in rows
        for n in [steps.get(w, 150)]
    ]
    assert MaxSlowdownConstraint(1.1, tolerance=0.0).select(ms) == 200
    exact = [PowerLimitMeasurement(w, 40, t, e) for w, t, e in rows]
    assert MaxSlowdownConstraint(1.1, tolerance=0.0).select(exact) == 175
