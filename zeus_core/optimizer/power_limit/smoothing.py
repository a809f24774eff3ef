"""Denoising a measured profile before the final choice: an empirical-Bayes smoother.

When profiling ends with several limits still tied (usually because the step budget is spent),
picking the smallest of their noisy means favours whichever limit was measured least and drew
luckiest: in a flat stretch of seven limits within 2 % of each other, each known to ±1 %, the
smallest mean is often one that is truly 1–2 % off. Neighbouring limits are informative, though:
time and energy per step change smoothly with the limit except at a few kinks and bumps.

:func:`smooth_profile` is a Whittaker smoother whose strength the data set. It finds the curve
``f`` that minimises::

    sum_i (y_i - f_i)² / se_i²  +  sum_i (Δ²f_i)² / τ²

``Δ²f`` being the second difference of ``f`` along the limits (a curve's bend), ``se_i`` each
mean's standard error and ``τ²`` how much the true curve bends. ``τ²`` comes from the data: the
observed second differences' mean square, less what the noise alone would give (empirical Bayes),
but never below a quarter of the observed mean square, so the smoother never flattens more than
the noise can explain: a real bump, known tightly, stays (its ``se`` is small against its bend),
and a noise-free profile (every ``se`` zero) is returned unchanged. The quarter was chosen on
generated profiles (a half to an eighth do about as well; with no floor, a profile whose bends
are all within noise is fitted by a straight line and its minimum lost) and checked on the
measured A40 profiles, whose choices it does not change.

Example:
    >>> smooth_profile([300, 250, 200, 150], [10.0, 9.0, 8.5, 9.1], [0.0] * 4)  # noise-free: as measured
    [10.0, 9.0, 8.5, 9.1]
    >>> # The lowest mean, 8.9 at 250 W, is within noise of a smooth curve whose least is at 200 W.
    >>> noisy = smooth_profile([300, 275, 250, 225, 200], [10.0, 9.6, 8.9, 9.3, 9.0], [0.4] * 5)
    >>> [round(v, 2) for v in noisy]
    [9.93, 9.54, 9.23, 9.11, 8.99]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

__all__ = ["smooth_profile"]

_CURVATURE_FLOOR = 0.25
"""Least share of the observed bend (mean square of the second differences) credited to the curve."""


def _second_differences(limits_w: Sequence[float]) -> np.ndarray:
    """Rows ``D``: ``D @ f`` are the second differences of ``f`` along ``limits_w`` (per mean spacing²).

    Unequal spacings (a limit left out) use divided differences, so the bend is per W² throughout.
    """
    import numpy as np

    x = np.asarray(limits_w, dtype=float)
    h = float(np.mean(np.abs(np.diff(x))))
    rows = np.zeros((len(x) - 2, len(x)))
    for i in range(len(x) - 2):
        left, right = x[i + 1] - x[i], x[i + 2] - x[i + 1]
        span = x[i + 2] - x[i]
        rows[i, i : i + 3] = (
            2 * h * h * np.array([1 / (left * span), -1 / (left * right), 1 / (right * span)])
        )
    return rows


def smooth_profile(
    limits_w: Sequence[float], values: Sequence[float], stderrs: Sequence[float]
) -> list[float]:
    """The smoothed values of a measured profile (see the module docstring), in the order given.

    Args:
        limits_w: The measured limits, W, distinct, in order (descending or ascending).
        values: The measured mean at each limit (any unit: a cost, a time or an energy per step).
        stderrs: The standard error of each mean, in the unit of ``values``.

    Returns:
        ``values`` unchanged where there is nothing to smooth (fewer than three limits, or a
        standard error that is zero or not finite); otherwise the smoothed values.
    """
    import numpy as np  # only when a choice is made: importing the optimizer stays light

    y = np.asarray(values, dtype=float)
    se = np.asarray(stderrs, dtype=float)
    if len(y) < 3 or not np.all(np.isfinite(y)) or not np.all(np.isfinite(se)) or np.any(se <= 0):
        return [float(v) for v in values]
    scale = float(np.mean(np.abs(y))) or 1.0  # keep the system well conditioned whatever the unit
    y, se = y / scale, se / scale
    d = _second_differences(limits_w)
    bends = d @ y
    noise = (d * d) @ (se * se)  # variance each second difference has from the noise alone
    observed = float(np.mean(bends * bends))
    # The tiny last floor only keeps the system solvable for a profile that is a straight line.
    curvature = max(
        float(np.mean(bends * bends - noise)), _CURVATURE_FLOOR * observed, 1e-9 * float(np.mean(noise))
    )
    weights = np.diag(curvature / (se * se))  # the objective times τ², so a small τ² stays well conditioned
    try:
        fitted = np.linalg.solve(weights + d.T @ d, weights @ y)
    except np.linalg.LinAlgError:
        return [float(v) for v in values]
    if not np.all(np.isfinite(fitted)):
        return [float(v) for v in values]
    return [float(v) * scale for v in fitted]
