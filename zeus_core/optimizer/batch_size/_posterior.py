"""Belief about each arm's mean cost: the model behind the batch-size bandit's choices.

A converged trial's cost is its cost per epoch (the batch size fixes it) times the epochs it took
to reach the target (which vary from run to run). Each arm's mean cost has a conjugate Gaussian
posterior whose noise variance is shrunk towards the relative variance pooled over all arms, and
whose epochs-to-target are shrunk towards the count pooled over all arms by empirical Bayes. A
failed trial counts as at least the early-stop threshold plus a retry at the best cost. See
docs/optimizers/batch-size.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from zeus_core.optimizer.batch_size._observation import Observation
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = ["ArmPosterior", "posteriors", "epochs_to_target"]

# Pseudo-observations of the pooled relative variance mixed into each arm's sample variance.
_SHRINK_PSEUDO_OBS = 2.0
# Relative standard deviation of a trial's cost assumed before any arm has two observations.
_FALLBACK_RELATIVE_STD = 0.25
# Most trials' worth of weight the pooled epochs-to-target gets in an arm's estimate. Without a
# cap, arms whose mean epochs happen to agree would be judged by their cost per epoch alone.
_MAX_EPOCH_PSEUDO_OBS = 10.0
# Below these a cost (J) or a cost variance (J²) is zero: no meter resolves a microjoule, and
# dividing by such figures would overflow (e.g. 1 / (1e-300)²).
_TINY_COST_J = 1e-6
_TINY_VARIANCE_J2 = 1e-12


@dataclass(frozen=True)
class ArmPosterior:
    """Belief about one arm's mean cost, from its windowed observations.

    Attributes:
        mean: Posterior mean of the arm's (effective) cost, J; NaN without data or prior.
        std: Posterior standard deviation of that mean, J; ``inf`` without data or prior.
        count: Observations in the window.
        failures: Failed (non-converged or early-stopped) trials among them.

    Example:
        >>> ArmPosterior(mean=1000.0, std=50.0, count=2, failures=0).mean
        1000.0
    """

    mean: float
    std: float
    count: int
    failures: int


def epochs_to_target(window: Sequence[Observation]) -> list[int] | None:
    """Epoch counts of an arm's windowed trials, if all converged and reported epochs."""
    if window and all(o.converged and o.epochs > 0 for o in window):
        return [o.epochs for o in window]
    return None


def posteriors(
    spec: JobSpec, windows: dict[int, list[Observation]], best: float | None
) -> dict[int, ArmPosterior]:
    """Each arm's posterior from its windowed observations.

    Args:
        spec: The job (prior, ``beta_knob``).
        windows: Arm -> its windowed observations, in order (arms in play only).
        best: The best converged recurring cost in the windows, J (``None``: none converged).

    Returns:
        Arm -> posterior of its effective mean cost, J.
    """
    samples: dict[int, list[float]] = {}
    failures: dict[int, int] = {}
    epochs: dict[int, list[int] | None] = {}
    retry = best or 0.0
    floor = 0.0 if best is None or spec.beta_knob is None else spec.beta_knob * best
    for b, window in windows.items():
        failures[b] = sum(not o.converged for o in window)
        samples[b] = [
            o.recurring_cost if o.converged else max(o.recurring_cost, floor) + retry for o in window
        ]
        epochs[b] = epochs_to_target(window)
    rel_var = _pooled_relative_variance(samples)
    pooled_epochs, epoch_weight = _epoch_prior(epochs)
    prior_prec = 0.0 if spec.prior_std is None else 1.0 / spec.prior_std**2
    prior_mean = spec.prior_mean or 0.0
    out: dict[int, ArmPosterior] = {}
    for b, xs in samples.items():
        n = len(xs)
        if n == 0:
            std = math.inf if spec.prior_std is None else spec.prior_std
            out[b] = ArmPosterior(prior_mean if spec.prior_mean is not None else math.nan, std, 0, 0)
            continue
        m = sum(xs) / n
        ss = sum((x - m) ** 2 for x in xs)
        noise_var = (ss + _SHRINK_PSEUDO_OBS * rel_var * m * m) / ((n - 1) + _SHRINK_PSEUDO_OBS)
        weight = 0.0
        arm_epochs = epochs[b]
        if arm_epochs is not None and epoch_weight > 0.0:
            # Cost per epoch × epochs-to-target shrunk towards the pooled count.
            weight = epoch_weight
            m = sum(xs) / sum(arm_epochs) * (sum(arm_epochs) + weight * pooled_epochs) / (n + weight)
        if noise_var <= _TINY_VARIANCE_J2:
            out[b] = ArmPosterior(m, 0.0, n, failures[b])
            continue
        data_prec = (n + weight) / noise_var
        prec = prior_prec + data_prec
        mean = (prior_prec * prior_mean + data_prec * m) / prec
        out[b] = ArmPosterior(mean, math.sqrt(1.0 / prec), n, failures[b])
    return out


def _epoch_prior(epochs: dict[int, list[int] | None]) -> tuple[float, float]:
    """The pooled mean epochs-to-target and its weight in trials (empirical Bayes).

    The weight is the run-to-run variance of epochs within an arm over the variance of the arms'
    true means (estimated by moments), capped at ``_MAX_EPOCH_PSEUDO_OBS``; it is 0 with fewer
    than two arms to compare.
    """
    arms = [e for e in epochs.values() if e is not None]
    if len(arms) < 2:
        return math.nan, 0.0
    counts = [x for e in arms for x in e]
    pooled = sum(counts) / len(counts)
    means = [sum(e) / len(e) for e in arms]
    dof = sum(len(e) - 1 for e in arms)
    within = (
        sum((x - m) ** 2 for e, m in zip(arms, means) for x in e) / dof
        if dof
        else (_FALLBACK_RELATIVE_STD * pooled) ** 2
    )
    grand = sum(means) / len(means)
    spread = sum((m - grand) ** 2 for m in means) / (len(means) - 1)
    between = spread - within * sum(1 / len(e) for e in arms) / len(arms)
    if between * _MAX_EPOCH_PSEUDO_OBS <= within:
        return pooled, _MAX_EPOCH_PSEUDO_OBS
    return pooled, within / between


def _pooled_relative_variance(samples: dict[int, list[float]]) -> float:
    num = 0.0
    dof = 0
    for xs in samples.values():
        n = len(xs)
        if n < 2:
            continue
        m = sum(xs) / n
        if m <= _TINY_COST_J:
            continue
        num += sum((x / m - 1.0) ** 2 for x in xs)
        dof += n - 1
    return num / dof if dof else _FALLBACK_RELATIVE_STD**2
