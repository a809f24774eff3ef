"""Optimum selectors: which profiled power limit is best for the user's goal (Strategy pattern).

A selector sees the measurements in profiling order (highest limit first). It must implement
:meth:`OptimumSelector.select`. Selectors that set ``supports_early_stopping = True`` also
implement the two hooks the early-stopping optimizer uses:

* :meth:`OptimumSelector.sweep_done`: no limit below the last measured one can win, so the sweep
  stops there;
* :meth:`OptimumSelector.contenders`: the measured limits that could still be the choice given
  the measurement noise; the optimizer measures them further until one is left or they are all
  tight;
* :meth:`OptimumSelector.settled` (optional, default ``False``): the choice is, at the rule's
  confidence, within ``rule.tie_tol`` of every contender, so the contenders need not be told
  apart;
* :meth:`OptimumSelector.decisive` (optional, default: the choice's own measurement): the
  measurements the choice rests on, each measured for at least ``profile_steps`` steps before
  the optimizer decides, where the budget allows.

A selector without these hooks (``supports_early_stopping = False``, the default for your own
subclasses) gets Zeus's exhaustive sweep, with each limit measured until its estimates are tight.

:class:`LinearCostSelector` implements both hooks for any cost ``a·energy + b·time`` per step;
:class:`Time`, :class:`Energy` and :class:`ZeusCost` are such costs. :class:`MaxSlowdownConstraint`
is a constrained choice with its own rules. Subclass :class:`LinearCostSelector` and implement
``cost_weights`` to get early stopping for your own linear cost.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import ClassVar, Sequence

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.power_limit.measurement import EarlyStopping, PowerLimitMeasurement
from zeus_core.optimizer.power_limit.smoothing import smooth_profile

__all__ = ["OptimumSelector", "LinearCostSelector", "Time", "Energy", "ZeusCost", "MaxSlowdownConstraint"]

Measurements = Sequence[PowerLimitMeasurement]


def _by_limit(measurements: Measurements) -> list[PowerLimitMeasurement]:
    """The measurements, highest limit first (the order profiling takes them in)."""
    return sorted(measurements, key=lambda m: -m.power_limit_w)


def _require(measurements: Measurements, who: str) -> None:
    if not measurements:
        raise ZeusConfigError(f"{who}.select: no measurements to choose from; profile at least one limit.")


class OptimumSelector(ABC):
    """Chooses the optimal power limit from profiling measurements.

    Attributes:
        supports_early_stopping: Whether :meth:`sweep_done` and :meth:`contenders` are implemented.
    """

    supports_early_stopping: ClassVar[bool] = False

    @abstractmethod
    def select(self, measurements: Measurements) -> float:
        """The optimal power limit, W, among ``measurements`` (highest limit first).

        Raises:
            ZeusConfigError: ``measurements`` is empty.
        """

    def sweep_done(self, measurements: Measurements, rule: EarlyStopping) -> str | None:
        """Why no limit below the last measured one can be selected, or ``None`` to keep sweeping.

        Args:
            measurements: Everything profiled so far, highest limit first.
            rule: Confidence, patience and margin to apply.
        """
        return None

    def contenders(self, measurements: Measurements, rule: EarlyStopping) -> list[PowerLimitMeasurement]:
        """Measured limits that could still be selected once noise is accounted for.

        Returns fewer than two when the choice is settled.
        """
        return []

    def refine_priority(
        self, m: PowerLimitMeasurement, measurements: Measurements, rule: EarlyStopping
    ) -> float:
        """Order of refinement among contenders measured for equally many steps (lower first).

        When the step budget cannot refine every contender, the most promising go first. The
        default, ``0``, refines the highest limit first.
        """
        return 0.0

    def decisive(self, measurements: Measurements) -> list[PowerLimitMeasurement]:
        """The measurements the choice (:meth:`select`) rests on: by default, the choice's own.

        Before deciding, the early-stopping optimizer measures each of them for at least
        ``profile_steps`` steps (Zeus's length for every limit) where the budget allows, so a
        decision never rests on a survey's few steps.
        """
        if not measurements:
            return []
        choice = self.select(measurements)
        return [m for m in measurements if m.power_limit_w == choice]

    def settled(self, measurements: Measurements, rule: EarlyStopping) -> bool:
        """Whether the current choice is, at ``rule.confidence``, within ``rule.tie_tol`` of every contender.

        Then refinement may stop although contenders are still tied: whichever is best, the
        choice costs at most ``tie_tol`` more. The default, ``False``, never stops early.
        """
        return False

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


def _rose(
    m: PowerLimitMeasurement,
    best: PowerLimitMeasurement,
    a: float,
    b: float,
    margin: float,
    rule: EarlyStopping,
) -> bool:
    """Whether ``m`` costs significantly more than ``(1 + margin)`` × ``best``."""
    scale = 1.0 + margin
    return rule.significantly_greater(
        m.cost(a, b),
        m.cost_stderr(a, b),
        m.dof,
        scale * best.cost(a, b),
        scale * best.cost_stderr(a, b),
        best.dof,
    )


def _within_tol(
    choice_cost: float,
    choice_se: float,
    choice_dof: int,
    other_cost: float,
    other_se: float,
    other_dof: int,
    rule: EarlyStopping,
) -> bool:
    """Whether ``choice − other < tie_tol · choice`` at ``rule.confidence`` (a one-sided bound).

    Equivalently ``other + tie_tol·choice`` is significantly greater than ``choice``; the
    tolerance is taken as exact (its own error is ``tie_tol`` times smaller than the cost's).
    """
    if rule.tie_tol <= 0:
        return False
    return rule.significantly_greater(
        other_cost + rule.tie_tol * choice_cost, other_se, other_dof, choice_cost, choice_se, choice_dof
    )


def _per_comparison(rule: EarlyStopping, comparisons: int) -> EarlyStopping:
    """``rule`` with its confidence raised for ``comparisons`` simultaneous tests (Bonferroni)."""
    if comparisons <= 1:
        return rule
    return replace(rule, confidence=1.0 - (1.0 - rule.confidence) / comparisons)


def _patience_reason(
    measurements: Measurements,
    best: PowerLimitMeasurement,
    a: float,
    b: float,
    rule: EarlyStopping,
    what: str,
) -> str | None:
    """The rise rule: the last ``patience`` limits, all after ``best``, rose by more than the margin."""
    tail = measurements[-rule.patience :]
    if len(measurements) <= rule.patience or any(m is best for m in tail):
        return None
    if all(_rose(m, best, a, b, rule.margin, rule) for m in tail):
        return (
            f"{what} rose by more than {rule.margin:.0%} at the last {rule.patience} limit(s) "
            f"({'/'.join(f'{m.power_limit_w:g}' for m in tail)} W) after the best, {best.power_limit_w:g} W"
        )
    return None


class LinearCostSelector(OptimumSelector):
    """Picks the limit with the least ``a·energy + b·time`` per step, with early stopping.

    * Sweep: done once the last ``rule.patience`` limits each cost significantly more than
      ``1 + rule.margin`` times the cheapest so far. Assumes the cost along descending limits
      falls and then rises, with bumps smaller than the margin or shorter than the patience.
    * Contenders: every measured limit not significantly costlier than the cheapest.
    * Settled: the cheapest is, at the rule's confidence, less than ``rule.tie_tol`` costlier
      than every other contender (so it is within ``tie_tol`` of whichever is truly cheapest
      among them).
    """

    supports_early_stopping: ClassVar[bool] = True

    @abstractmethod
    def cost_weights(self, measurements: Measurements) -> tuple[float, float]:
        """``(a, b)``: weight of energy per step (unitless) and of time per step (W)."""

    def costs(self, measurements: Measurements) -> list[float]:
        """The cost of each measurement, in the order given (J-equivalent per step)."""
        a, b = self.cost_weights(measurements)
        return [m.cost(a, b) for m in measurements]

    def _best(self, measurements: Measurements) -> PowerLimitMeasurement:
        costs = self.costs(measurements)
        return measurements[costs.index(min(costs))]

    def select(self, measurements: Measurements) -> float:
        """See :meth:`OptimumSelector.select`: the least cost on the smoothed profile.

        The costs are smoothed along the limits first (:func:`~.smoothing.smooth_profile`), so a
        poorly measured limit whose mean drew lucky does not win over neighbours that say
        otherwise; noise-free measurements are used as they are.
        """
        _require(measurements, type(self).__name__)
        a, b = self.cost_weights(measurements)
        ordered = _by_limit(measurements)
        costs = smooth_profile(
            [m.power_limit_w for m in ordered], self.costs(ordered), [m.cost_stderr(a, b) for m in ordered]
        )
        return ordered[costs.index(min(costs))].power_limit_w

    def sweep_done(self, measurements: Measurements, rule: EarlyStopping) -> str | None:
        """See :meth:`OptimumSelector.sweep_done` (rules in the class docstring)."""
        if not measurements:
            return None
        a, b = self.cost_weights(measurements)
        return _patience_reason(measurements, self._best(measurements), a, b, rule, "the cost")

    def contenders(self, measurements: Measurements, rule: EarlyStopping) -> list[PowerLimitMeasurement]:
        """See :meth:`OptimumSelector.contenders` (rules in the class docstring)."""
        if not measurements:
            return []
        a, b = self.cost_weights(measurements)
        best = self._best(measurements)
        return [m for m in measurements if m is best or not _rose(m, best, a, b, 0.0, rule)]

    def refine_priority(
        self, m: PowerLimitMeasurement, measurements: Measurements, rule: EarlyStopping
    ) -> float:
        """Lowest optimistic cost first (the cost minus its confidence half-width)."""
        a, b = self.cost_weights(measurements)
        return m.cost(a, b) - rule.quantile(m.dof) * m.cost_stderr(a, b)

    def settled(self, measurements: Measurements, rule: EarlyStopping) -> bool:
        """See :meth:`OptimumSelector.settled` (rules in the class docstring)."""
        if not measurements:
            return False
        a, b = self.cost_weights(measurements)
        best = self._best(measurements)
        cost, se = best.cost(a, b), best.cost_stderr(a, b)
        others = [m for m in self.contenders(measurements, rule) if m is not best]
        strict = _per_comparison(rule, len(others))
        return all(
            _within_tol(cost, se, best.dof, m.cost(a, b), m.cost_stderr(a, b), m.dof, strict) for m in others
        )


class Time(LinearCostSelector):
    """The fastest limit (least time per step).

    Noise can make a limit below the maximum look fastest; it is then chosen, which costs no
    measurable time and saves energy.

    Example:
        >>> from zeus_core.optimizer.power_limit import PowerLimitMeasurement as M
        >>> Time().select([M(300, 40, 0.50, 140.0), M(250, 40, 0.55, 120.0)])
        300.0
    """

    def cost_weights(self, measurements: Measurements) -> tuple[float, float]:
        """See :meth:`LinearCostSelector.cost_weights`."""
        return 0.0, 1.0


class Energy(LinearCostSelector):
    """The limit with the least GPU energy per step.

    Example:
        >>> from zeus_core.optimizer.power_limit import PowerLimitMeasurement as M
        >>> Energy().select([M(300, 40, 0.50, 140.0), M(250, 40, 0.55, 120.0)])
        250.0
    """

    def cost_weights(self, measurements: Measurements) -> tuple[float, float]:
        """See :meth:`LinearCostSelector.cost_weights`."""
        return 1.0, 0.0


class ZeusCost(LinearCostSelector):
    """The least Zeus cost per step, ``eta·E + (1 − eta)·MaxPower·T`` (NSDI'23).

    ``MaxPower`` is the highest profiled limit times the number of GPUs, so time is priced at
    what the whole job draws at full power.

    Args:
        eta_knob: Weight of energy in ``[0, 1]`` (1: energy only, 0: time only).
        world_size: GPUs in the job; ``None`` uses the count recorded in the measurements
            (every monitored GPU of every rank).

    Raises:
        ZeusConfigError: ``eta_knob`` outside ``[0, 1]`` or ``world_size < 1``.

    Example:
        >>> from zeus_core.optimizer.power_limit import PowerLimitMeasurement as M
        >>> ZeusCost(0.5).select([M(300, 40, 0.50, 140.0), M(250, 40, 0.55, 120.0)])
        250.0
    """

    def __init__(self, eta_knob: float, world_size: int | None = None) -> None:
        if not 0.0 <= eta_knob <= 1.0:
            raise ZeusConfigError(f"ZeusCost(eta_knob={eta_knob}): eta_knob must be within [0, 1].")
        if world_size is not None and world_size < 1:
            raise ZeusConfigError(
                f"ZeusCost(world_size={world_size}): use the number of GPUs (>= 1) or None."
            )
        self.eta_knob = float(eta_knob)
        self.world_size = world_size

    def max_power_w(self, measurements: Measurements) -> float:
        """``MaxPower``: highest profiled limit × GPUs in the job, W."""
        gpus = self.world_size if self.world_size is not None else max(m.num_gpus for m in measurements)
        return max(m.power_limit_w for m in measurements) * gpus

    def cost_weights(self, measurements: Measurements) -> tuple[float, float]:
        """See :meth:`LinearCostSelector.cost_weights`."""
        return self.eta_knob, (1.0 - self.eta_knob) * self.max_power_w(measurements)

    def costs(self, measurements: Measurements) -> list[float]:
        """Zeus cost of each measurement (:func:`zeus_core._cost.zeus_cost`), J per step."""
        max_power = self.max_power_w(measurements)
        return [
            zeus_cost(m.energy_per_step_j, m.time_per_step_s, self.eta_knob, max_power) for m in measurements
        ]


class MaxSlowdownConstraint(OptimumSelector):
    """The least energy among limits whose time per step is within ``factor`` of the highest limit's.

    As in Zeus, the slowdown is measured against the highest profiled limit (the GPU's default:
    how the job runs without the optimizer). Comparing with the fastest *measured* limit instead
    would tighten the bound by the noise of the minimum of several estimates.

    * Sweep: done once the last ``rule.patience`` limits are each significantly slower than
      ``factor`` × the reference (assuming time per step does not fall as the limit falls, apart
      from bumps shorter than the patience), or once energy rose as in :class:`Energy` compared
      with the best feasible limit.
    * Contenders: limits that may be feasible and whose energy is not significantly above the
      best feasible one's, plus the reference limit when the feasibility of one of them (the
      best one included) is unsure.
    * Settled: at the rule's confidence, the best feasible limit is no slower than ``1 +
      rule.tie_tol`` times the allowed slowdown (``factor`` × the reference) and its energy is
      less than ``rule.tie_tol`` above every other contender's.

    A limit counts as within the bound when its *measured* slowdown is at most ``factor × (1 +
    tolerance)``. A few hundred steps with a few percent of jitter know a slowdown to about ±1 %,
    so a strict bound rejects an optimum that sits just under it about half the time, for the
    next limit up: a whole limit step more energy. The default half a percent takes such an
    optimum most of the time while a limit truly more than 1 % over the bound is rarely taken;
    ``tolerance=0`` makes the measured bound strict.

    Args:
        factor: Allowed slowdown, >= 1 (1.1: at most 10 % slower than at the highest limit).
        tolerance: Relative allowance on the measured slowdown, in ``[0, 0.05]`` (0.005: 0.5 %).

    Raises:
        ZeusConfigError: ``factor < 1`` or ``tolerance`` outside ``[0, 0.05]``.

    Example:
        >>> from zeus_core.optimizer.power_limit import PowerLimitMeasurement as M
        >>> MaxSlowdownConstraint(1.1).select([M(300, 40, 0.50, 140.0), M(250, 40, 0.54, 125.0),
        ...                                    M(200, 40, 0.60, 110.0)])
        250.0
    """

    supports_early_stopping: ClassVar[bool] = True

    def __init__(self, factor: float, tolerance: float = 0.005) -> None:
        if not factor >= 1.0:
            raise ZeusConfigError(
                f"MaxSlowdownConstraint(factor={factor}): the allowed slowdown must be >= 1.0 (e.g. 1.1)."
            )
        if not 0.0 <= tolerance <= 0.05:
            raise ZeusConfigError(
                f"MaxSlowdownConstraint(tolerance={tolerance}): use a fraction in [0, 0.05] "
                "(0.005 allows measured slowdowns 0.5 % over the bound; 0 makes it strict)."
            )
        self.factor = float(factor)
        self.tolerance = float(tolerance)

    @staticmethod
    def reference(measurements: Measurements) -> PowerLimitMeasurement:
        """The measurement the slowdown is relative to: the highest limit's."""
        return max(measurements, key=lambda m: m.power_limit_w)

    def allowed_time_s(self, reference_time_s: float) -> float:
        """Longest time per step within the bound: ``factor × (1 + tolerance)`` × the reference's, s."""
        return self.factor * (1.0 + self.tolerance) * reference_time_s

    def feasible(self, measurements: Measurements) -> list[PowerLimitMeasurement]:
        """Measurements whose time per step is within ``factor × (1 + tolerance)`` of the highest limit's."""
        allowed = self.allowed_time_s(self.reference(measurements).time_per_step_s)
        return [m for m in measurements if m.time_per_step_s <= allowed]

    def _best(self, measurements: Measurements) -> PowerLimitMeasurement:
        return min(self.feasible(measurements), key=lambda m: m.energy_per_step_j)

    def select(self, measurements: Measurements) -> float:
        """See :meth:`OptimumSelector.select`: the rule of :meth:`feasible` on the smoothed profile.

        Times and energies are smoothed along the limits first (:func:`~.smoothing.smooth_profile`),
        the reference's time included; noise-free measurements are used as they are.
        """
        _require(measurements, type(self).__name__)
        ordered = _by_limit(measurements)
        limits = [m.power_limit_w for m in ordered]
        times = smooth_profile(
            limits, [m.time_per_step_s for m in ordered], [m.time_stderr() for m in ordered]
        )
        energies = smooth_profile(
            limits, [m.energy_per_step_j for m in ordered], [m.cost_stderr(1.0, 0.0) for m in ordered]
        )
        allowed = self.allowed_time_s(times[0])  # times[0]: the reference, the highest limit
        feasible = [i for i, t in enumerate(times) if t <= allowed]
        return limits[min(feasible, key=lambda i: energies[i])]

    def _slower(
        self, m: PowerLimitMeasurement, fastest: PowerLimitMeasurement, rule: EarlyStopping, factor: float
    ) -> bool:
        """Whether ``m`` is significantly slower than ``factor`` × ``fastest``."""
        return rule.significantly_greater(
            m.time_per_step_s,
            m.time_stderr(),
            m.dof,
            factor * fastest.time_per_step_s,
            factor * fastest.time_stderr(),
            fastest.dof,
        )

    def _surely_feasible(
        self, m: PowerLimitMeasurement, fastest: PowerLimitMeasurement, rule: EarlyStopping
    ) -> bool:
        return m is fastest or rule.significantly_greater(
            self.factor * fastest.time_per_step_s,
            self.factor * fastest.time_stderr(),
            fastest.dof,
            m.time_per_step_s,
            m.time_stderr(),
            m.dof,
        )

    def sweep_done(self, measurements: Measurements, rule: EarlyStopping) -> str | None:
        """See :meth:`OptimumSelector.sweep_done` (rules in the class docstring)."""
        if len(measurements) <= rule.patience:
            return None
        fastest = self.reference(measurements)
        tail = measurements[-rule.patience :]
        if all(self._slower(m, fastest, rule, self.factor) for m in tail):
            return (
                f"the last {rule.patience} limit(s) ({'/'.join(f'{m.power_limit_w:g}' for m in tail)} W) are "
                f"significantly slower than {self.factor:g} × the highest ({fastest.power_limit_w:g} W)"
            )
        return _patience_reason(measurements, self._best(measurements), 1.0, 0.0, rule, "energy")

    def contenders(self, measurements: Measurements, rule: EarlyStopping) -> list[PowerLimitMeasurement]:
        """See :meth:`OptimumSelector.contenders` (rules in the class docstring)."""
        if not measurements:
            return []
        fastest = self.reference(measurements)
        best = self._best(measurements)
        out = [
            m
            for m in measurements
            if m is best
            or (not self._slower(m, fastest, rule, self.factor) and not _rose(m, best, 1.0, 0.0, 0.0, rule))
        ]
        unsure = not all(self._surely_feasible(m, fastest, rule) for m in out)
        if unsure and all(m is not fastest for m in out):
            out.append(fastest)
        return out

    def decisive(self, measurements: Measurements) -> list[PowerLimitMeasurement]:
        """See :meth:`OptimumSelector.decisive`: the choice, and the reference its slowdown is judged by."""
        if not measurements:
            return []
        reference = self.reference(measurements)
        return [*(m for m in super().decisive(measurements) if m is not reference), reference]

    def refine_priority(
        self, m: PowerLimitMeasurement, measurements: Measurements, rule: EarlyStopping
    ) -> float:
        """The reference first (every feasibility verdict rests on it), then lowest optimistic energy."""
        if m is self.reference(measurements):
            return -math.inf
        return m.energy_per_step_j - rule.quantile(m.dof) * m.cost_stderr(1.0, 0.0)

    def settled(self, measurements: Measurements, rule: EarlyStopping) -> bool:
        """See :meth:`OptimumSelector.settled` (rules in the class docstring)."""
        if not measurements or rule.tie_tol <= 0:
            return False
        fastest = self.reference(measurements)
        best = self._best(measurements)
        others = [m for m in self.contenders(measurements, rule) if m is not best]
        strict = _per_comparison(rule, len(others) + (best is not fastest))
        allowed = (1.0 + rule.tie_tol) * self.factor
        if best is not fastest and not strict.significantly_greater(
            allowed * fastest.time_per_step_s,
            allowed * fastest.time_stderr(),
            fastest.dof,
            best.time_per_step_s,
            best.time_stderr(),
            best.dof,
        ):
            return False
        energy, se = best.energy_per_step_j, best.cost_stderr(1.0, 0.0)
        return all(
            _within_tol(energy, se, best.dof, m.energy_per_step_j, m.cost_stderr(1.0, 0.0), m.dof, strict)
            for m in others
        )
