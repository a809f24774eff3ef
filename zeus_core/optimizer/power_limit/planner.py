"""What to profile next: pure functions of the measurements (no devices, no ranks).

:func:`next_action` is the whole profiling policy. The optimizer calls it after every
measurement, and when it resumes from a profile file or a checkpoint, so a resumed job continues
exactly where an uninterrupted one would. :func:`measured_enough` is the early stop of one
measurement.

Early stopping (``EarlyStopping``; ``early_stopping=None`` gives Zeus's exhaustive sweep of
every limit for ``profile_steps`` steps) has two phases; every decision is taken from the same
job-wide samples on every rank. A *sample* is a group of consecutive steps read once from the
energy counter and lasting at least ``min_sample_s`` (one step where steps are that long; see
:mod:`~zeus_core.optimizer.power_limit.sampling`); no measurement is judged before it has
``min_samples`` of them.

1. *Survey sweep.* Each limit, from the maximum down, gets ``warmup_steps`` then only
   ``min_steps`` measured steps (and at least ``min_samples`` samples): enough to see large
   differences. The sweep stops once no
   lower limit can win: the cost rose significantly, by more than ``margin``, at ``patience``
   consecutive limits after the best one (:class:`Time`, :class:`Energy`, :class:`ZeusCost`),
   or ``patience`` consecutive limits are significantly slower than the allowed slowdown
   (:class:`MaxSlowdownConstraint`).
2. *Refinement.* Only the contenders — limits whose cost is not significantly worse than the
   best's, given the confidence intervals — are measured again (warm-up, then more steps added
   to their earlier samples), fewest-steps first and, among equals, most promising first
   (:meth:`OptimumSelector.refine_priority`: lowest optimistic cost; the reference first for
   :class:`MaxSlowdownConstraint`); when the remaining step budget cannot pay a visit to every
   unsure contender, only the most promising of them (at least two) stay in play. In rounds: a
   visit adds up to
   ``profile_steps`` measured steps (at least ``min_steps``), never beyond ``max_refine_steps``
   (:meth:`EarlyStopping.refine_cap`, 3 × ``profile_steps`` by default) in all
   (:func:`visit_cap`). A contender's measurement stops early once it is tight enough
   (confidence half-widths of time per step and of average power within ``rel_tol``, 0.5 % by
   default), once it is no longer needed to tell contenders apart, or once the choice is
   *settled*: at ``confidence``, the current choice costs less than ``tie_tol`` (0.5 %) more
   than every other contender (:meth:`OptimumSelector.settled`), so whichever contender is
   truly best, the choice is within ``tie_tol`` of it. Profiling ends when one contender is
   left, the choice is settled, or every contender is tight or at ``max_refine_steps`` — and
   the measurements the choice rests on (:meth:`OptimumSelector.decisive`: the choice, and for
   :class:`MaxSlowdownConstraint` the reference) have ``profile_steps`` measured steps, Zeus's
   length for every limit, or are tight (:func:`short_of_profile`): a decision never rests on
   a survey's few steps, where one unlucky draw can make a limit look best or feasible, while
   the budget can pay a visit. Such a visit runs on to ``profile_steps`` in one go.
   Contenders are close to the optimum, so measuring them longer costs little; far-off
   limits, which cost the most per step, get only ``min_steps``. The survey measures every
   limit for at most ``profile_steps`` steps; only contenders still tied after
   ``profile_steps`` are measured beyond it.

Assumptions behind the rules: after warm-up, a limit's steps are independent draws around
a stable mean, so mean ± t·s/√n (s estimated from the samples, weighted by their steps, with
samples − 1 degrees of freedom) bounds the truth at the stated confidence. Readings without
synchronisation and the energy counter's own update period add jitter to each sample, which
only widens the intervals; strongly correlated steps, such as alternating long and short
batches, make them too narrow — raise ``min_steps`` then. Along descending limits time per
step does not fall and a cost falls and then rises, except for bumps that are smaller than
``margin`` or shorter than ``patience`` limits (the measured A40 profiles have bumps of up to
15 % over one limit).
Where these fail, the sweep may stop before the optimum; ``early_stopping=None`` profiles
every limit. The settled stop compares the choice with each of the ``k`` other contenders
(one-sided: the choice costs less than ``(1 + tie_tol)`` × that contender) at confidence
``1 − (1 − confidence) / k`` each (Bonferroni), so all ``k`` verdicts hold together at
``confidence``; it assumes the noise of the means is near normal, as the intervals do. Its
``tie_tol`` (0.5 %) is half the 1 % that usually matters, so the choice stays within target
even where the means drift a little between visits. Like every check here it is repeated as
steps accrue (every ``check_every`` steps), which makes the real error rate somewhat larger
than ``1 − confidence``. A selector of your own gets the survey and refinement
only if it implements :meth:`OptimumSelector.sweep_done` and :meth:`OptimumSelector.contenders`
(and the settled stop if it implements :meth:`OptimumSelector.settled`); otherwise every limit
is profiled, each until tight or ``profile_steps``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from zeus_core.optimizer.power_limit.measurement import EarlyStopping, PowerLimitMeasurement
from zeus_core.optimizer.power_limit.selectors import OptimumSelector

__all__ = [
    "ActionKind",
    "Action",
    "candidate_limits",
    "visit_cap",
    "next_action",
    "short_of_profile",
    "measured_enough",
]


class ActionKind(str, enum.Enum):
    """What to do next."""

    SWEEP = "sweep"
    """Profile the next lower limit."""
    REFINE = "refine"
    """Measure a contender again."""
    DONE = "done"
    """Profiling is over; set the optimum."""


@dataclass(frozen=True)
class Action:
    """The next step of profiling.

    Attributes:
        kind: Sweep, refine or done.
        power_limit_w: The limit to measure next, or the optimum when done, W.
        reason: Why the sweep ended (empty while sweeping).
    """

    kind: ActionKind
    power_limit_w: float
    reason: str = ""


def candidate_limits(max_w: float, min_w: float, step_w: float) -> list[float]:
    """Limits from ``max_w`` down to ``min_w`` in ``step_w`` steps, W, highest first.

    ``min_w`` is included only if the steps land on it (as in Zeus).
    """
    limits = []
    i = 0
    while max_w - i * step_w >= min_w - 1e-9:
        limits.append(round(max_w - i * step_w, 6))
        i += 1
    return limits


def visit_cap(prior: PowerLimitMeasurement | None, profile_steps: int, rule: EarlyStopping | None) -> int:
    """Most measured steps a limit may have in all at the end of its current visit.

    A first visit (survey or exhaustive sweep, ``prior`` is ``None``) stops at ``profile_steps``.
    A refinement visit adds up to ``profile_steps`` steps to the limit's earlier ones (each
    visit costs ``warmup_steps`` unmeasured steps, so visits are never short), and no limit gets
    more than :meth:`EarlyStopping.refine_cap` in all. A limit whose ``profile_steps`` held fewer
    than ``min_samples`` samples (steps too short for ``min_sample_s``) cannot be judged, so it
    is not measured beyond ``profile_steps`` (the optimizer warns to raise ``profile_steps``).

    Args:
        prior: The limit's measurement before this visit (``None`` for a first visit).
        profile_steps: Most measured steps per limit in the sweep.
        rule: Early-stopping knobs, or ``None`` (no refinement).

    Example:
        >>> from zeus_core.optimizer.power_limit.measurement import EarlyStopping
        >>> rule = EarlyStopping()
        >>> [visit_cap(PowerLimitMeasurement(250, n, 0.3, 75.0), 40, rule) for n in (10, 40, 85, 120)]
        [50, 80, 120, 120]
    """
    if rule is None or prior is None:
        return profile_steps
    if prior.steps >= profile_steps and prior.samples < rule.min_samples:  # type: ignore[operator]
        return max(profile_steps, prior.steps)
    return min(rule.refine_cap(profile_steps), prior.steps + profile_steps)


def next_action(
    measurements: Sequence[PowerLimitMeasurement],
    power_limits: Sequence[float],
    selector: OptimumSelector,
    rule: EarlyStopping | None,
    profile_steps: int,
    affordable_visits: int | None = None,
) -> Action:
    """Decide what to profile next from the measurements alone.

    Args:
        measurements: Every profiled limit so far, highest first.
        power_limits: The candidate limits, W, highest first.
        selector: What "best" means; its ``sweep_done`` and ``contenders`` drive early stopping.
        rule: Early-stopping knobs, or ``None`` for Zeus's exhaustive sweep.
        profile_steps: Most measured steps per limit.
        affordable_visits: Full refinement visits the step budget still pays for (``None``: no
            limit). When fewer than the unsure contenders, only the most promising of them
            (:meth:`OptimumSelector.refine_priority`; at least two) are refined further.
    """
    if not measurements:
        return Action(ActionKind.SWEEP, power_limits[0])
    lowest = min(m.power_limit_w for m in measurements)
    remaining = [w for w in power_limits if w < lowest]
    reason = selector.sweep_done(measurements, rule) if rule is not None else None
    if reason is None and remaining:
        return Action(ActionKind.SWEEP, remaining[0])
    reason = reason or f"every limit down to {lowest:g} W was profiled"
    if rule is not None and selector.supports_early_stopping:
        contenders = selector.contenders(measurements, rule)
        unsure = [  # a visit worth its warm-up: at least min_steps more measured steps
            m
            for m in contenders
            if visit_cap(m, profile_steps, rule) - m.steps >= rule.min_steps and not rule.is_tight(m)
        ]
        if len(contenders) > 1 and unsure and not selector.settled(measurements, rule):
            priority = {m.power_limit_w: selector.refine_priority(m, measurements, rule) for m in unsure}
            if affordable_visits is not None:  # only the most promising that the budget pays for
                unsure = sorted(unsure, key=lambda m: priority[m.power_limit_w])[: max(2, affordable_visits)]
            target = min(unsure, key=lambda m: (m.steps, priority[m.power_limit_w], -m.power_limit_w))
            return Action(ActionKind.REFINE, target.power_limit_w, reason)
        short = short_of_profile(measurements, selector, rule, profile_steps)
        if short:
            target = min(short, key=lambda m: (m.steps, -m.power_limit_w))
            return Action(ActionKind.REFINE, target.power_limit_w, reason)
    return Action(ActionKind.DONE, selector.select(measurements), reason)


def short_of_profile(
    measurements: Sequence[PowerLimitMeasurement],
    selector: OptimumSelector,
    rule: EarlyStopping,
    profile_steps: int,
) -> list[PowerLimitMeasurement]:
    """The measurements the choice rests on (:meth:`OptimumSelector.decisive`) that need more steps.

    Those with fewer than ``profile_steps`` measured steps that are not tight and that a visit may
    still add ``min_steps`` to: a decision never rests on a survey's few steps where it can help.
    """
    return [
        m
        for m in selector.decisive(measurements)
        if m.steps < profile_steps
        and not rule.is_tight(m)
        and visit_cap(m, profile_steps, rule) - m.steps >= rule.min_steps
    ]


def measured_enough(
    m: PowerLimitMeasurement,
    measurements: Sequence[PowerLimitMeasurement],
    selector: OptimumSelector,
    rule: EarlyStopping,
    profile_steps: int | None = None,
) -> bool:
    """Whether a running measurement may stop before ``profile_steps``.

    True once ``m`` is tight (:meth:`EarlyStopping.is_tight`), or, when ``m`` refines a limit in
    ``measurements``, once the contenders no longer include it, only one is left, or the choice
    is settled (:meth:`OptimumSelector.settled`) — but a measurement the choice rests on
    (:meth:`OptimumSelector.decisive`) goes on to ``profile_steps`` steps first, so one visit
    brings it there (see :func:`short_of_profile`).

    Args:
        m: The running measurement (pooled with the limit's earlier one when refining).
        measurements: Every profiled limit so far, highest first.
        selector: The optimum selector.
        rule: Early-stopping knobs.
        profile_steps: Zeus's measured steps per limit (``None``: no such floor).
    """
    if m.dof + 1 < rule.min_samples:  # too few samples to judge
        return False
    if rule.is_tight(m):
        return True
    if all(old.power_limit_w != m.power_limit_w for old in measurements):
        return False
    current = [m if old.power_limit_w == m.power_limit_w else old for old in measurements]
    short = profile_steps is not None and m.steps < profile_steps
    if short and any(d is m for d in selector.decisive(current)):
        return False
    contenders = selector.contenders(current, rule)
    return len(contenders) < 2 or all(c is not m for c in contenders) or selector.settled(current, rule)
