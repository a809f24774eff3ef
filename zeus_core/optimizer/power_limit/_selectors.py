"""Optimum selectors: what "the best power limit" means (docs/optimizers/power-limit.md, "Selectors")."""

from __future__ import annotations

from typing import Sequence

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement

__all__ = ["OptimumSelector", "Time", "Energy", "ZeusCost", "MaxSlowdownConstraint"]

Measurements = Sequence[PowerLimitMeasurement]


class OptimumSelector:
    """Chooses the optimal power limit from measurements (override :meth:`select`, or :meth:`cost`).

    Example:
        >>> class EnergyDelay(OptimumSelector):
        ...     def cost(self, m, measurements):
        ...         return m.energy * m.time
        >>> M = PowerLimitMeasurement
        >>> EnergyDelay().select([M(300, 40, 0.2, 60.0), M(250, 40, 0.22, 50.0)])
        250.0
    """

    def select(self, measurements: Measurements) -> float:
        """The optimal power limit, W (Zeus's method; by default the least :meth:`cost` among feasible).

        Raises:
            ZeusConfigError: No measurements, or a selector that defines neither ``select`` nor ``cost``.
        """
        from zeus_core.optimizer.power_limit._planner import choose  # the choice rule lives there

        if not measurements:
            raise ZeusConfigError(
                f"{self!r}.select: no measurements to choose from; profile at least one limit."
            )
        if not self.has_cost:
            raise ZeusConfigError(f"{type(self).__name__} defines neither select() nor cost(); define one.")
        return choose(self, measurements)

    def cost(self, m: PowerLimitMeasurement, measurements: Measurements) -> float:
        """The cost of ``m`` among ``measurements`` (lower is better); not defined by default."""
        raise NotImplementedError

    def feasible(self, m: PowerLimitMeasurement, reference: PowerLimitMeasurement) -> bool:
        """Whether ``m`` meets the selector's constraint, against ``reference`` (without one: always)."""
        return True

    def reference(self, measurements: Measurements) -> PowerLimitMeasurement:
        """What :meth:`feasible` judges against: the highest limit's measurement (Zeus's baseline)."""
        return max(measurements, key=lambda m: m.power_limit)

    @property
    def has_cost(self) -> bool:
        """Whether :meth:`cost` is defined (then the optimizer may stop early)."""
        return type(self).cost is not OptimumSelector.cost

    @property
    def constrains(self) -> bool:
        """Whether :meth:`feasible` is defined (a constraint on top of the cost)."""
        return type(self).feasible is not OptimumSelector.feasible

    @property
    def chooses_itself(self) -> bool:
        """Whether :meth:`select` is overridden (a Zeus-style selector makes the choice itself)."""
        return type(self).select is not OptimumSelector.select

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


class Time(OptimumSelector):
    """The fastest limit (least time per step).

    Example:
        >>> M = PowerLimitMeasurement
        >>> Time().select([M(300, 40, 0.50, 140.0), M(250, 40, 0.55, 120.0)])
        300.0
    """

    def cost(self, m: PowerLimitMeasurement, measurements: Measurements) -> float:
        """Time per step, s."""
        return m.time


class Energy(OptimumSelector):
    """The limit with the least GPU energy per step.

    Example:
        >>> M = PowerLimitMeasurement
        >>> Energy().select([M(300, 40, 0.50, 140.0), M(250, 40, 0.55, 120.0)])
        250.0
    """

    def cost(self, m: PowerLimitMeasurement, measurements: Measurements) -> float:
        """Energy per step, J."""
        return m.energy


class ZeusCost(OptimumSelector):
    """The least Zeus cost per step, ``eta·E + (1 − eta)·MaxPower·T`` (NSDI'23).

    Args:
        eta_knob: Weight of energy in ``[0, 1]`` (1: energy only, 0: time only).
        world_size: GPUs in the job for ``MaxPower`` (highest limit × GPUs); ``None``: all measured.

    Raises:
        ZeusConfigError: ``eta_knob`` outside ``[0, 1]`` or ``world_size < 1``.

    Example:
        >>> M = PowerLimitMeasurement
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

    def cost(self, m: PowerLimitMeasurement, measurements: Measurements) -> float:
        """Zeus cost per step, J (:func:`zeus_core._cost.zeus_cost`)."""
        gpus = self.world_size if self.world_size is not None else max(x.num_gpus for x in measurements)
        max_power = max(x.power_limit for x in measurements) * gpus
        return zeus_cost(m.energy, m.time, self.eta_knob, max_power)


class MaxSlowdownConstraint(OptimumSelector):
    """The least energy among limits at most ``factor`` times slower than the highest limit (Zeus's rule).

    Args:
        factor: Allowed slowdown, >= 1 (1.1: at most 10 % slower than at the highest limit).
        tolerance: Allowance in ``[0, 0.05]``: a measured slowdown up to ``factor × (1 + tolerance)``
            passes (``0``: Zeus's strict bound; more rejects an optimum just under it less often).

    Raises:
        ZeusConfigError: ``factor < 1`` or ``tolerance`` outside ``[0, 0.05]``.

    Example:
        >>> M = PowerLimitMeasurement
        >>> ms = [M(300, 40, 0.50, 140.0), M(250, 40, 0.54, 125.0), M(200, 40, 0.60, 110.0)]
        >>> MaxSlowdownConstraint(1.1).select(ms)
        250.0
    """

    def __init__(self, factor: float, tolerance: float = 0.0) -> None:
        if not factor >= 1.0:
            raise ZeusConfigError(
                f"MaxSlowdownConstraint(factor={factor}): the allowed slowdown must be >= 1.0."
            )
        if not 0.0 <= tolerance <= 0.05:
            raise ZeusConfigError(
                f"MaxSlowdownConstraint(tolerance={tolerance}): use a fraction in [0, 0.05]."
            )
        self.factor = float(factor)
        self.tolerance = float(tolerance)

    def cost(self, m: PowerLimitMeasurement, measurements: Measurements) -> float:
        """Energy per step, J."""
        return m.energy

    def feasible(self, m: PowerLimitMeasurement, reference: PowerLimitMeasurement) -> bool:
        """Time per step within ``factor × (1 + tolerance)`` of the reference's."""
        return m.time <= self.factor * (1.0 + self.tolerance) * reference.time
