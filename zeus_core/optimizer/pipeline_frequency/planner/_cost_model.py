"""Per-instruction execution options and the convex cost models the planner optimises over.

Effective energy, the Pareto filter, quantisation and the two cost models are explained in
docs/optimizers/perseus.md ("Options and cost models").
"""

from __future__ import annotations

import bisect
import enum
import logging
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency._profile import ProfileMeasurement

__all__ = [
    "TimeRounding",
    "quantize_time",
    "ExecutionOption",
    "InstructionOptions",
    "CostModel",
    "ConvexHullCostModel",
    "ExponentialCostModel",
    "COST_MODELS",
]

logger = logging.getLogger(__name__)

# Relative tolerance when deciding that a quantised time lies exactly on a boundary
# (0.012 / 0.001 is 11.999999999999998 in floating point; it is 12 quanta).
_QUANT_EPS = 1e-9


class TimeRounding(str, enum.Enum):
    """How a real duration becomes an integer number of ``unit_time_s`` quanta.

    ``FLOOR`` is lowtime's choice; ``CEIL`` never under-states a duration, so a frontier point's
    real time is at most its quantised time.

    Example:
        >>> TimeRounding("ceil") is TimeRounding.CEIL
        True
    """

    FLOOR = "floor"
    CEIL = "ceil"


def quantize_time(time_s: float, unit_time_s: float, rounding: TimeRounding | str = TimeRounding.CEIL) -> int:
    """Quantise a duration (s) to a whole number of ``unit_time_s`` (s).

    Args:
        time_s: The duration, s.
        unit_time_s: The quantum, s.
        rounding: :class:`TimeRounding` (a tolerance of 1e-9 treats 11.999999999999998 as 12).

    Returns:
        The number of quanta.

    Example:
        >>> quantize_time(0.0123, 0.001, "floor"), quantize_time(0.0123, 0.001, "ceil")
        (12, 13)
    """
    x = time_s / unit_time_s
    if TimeRounding(rounding) is TimeRounding.FLOOR:
        return int(math.floor(x + _QUANT_EPS * max(1.0, abs(x))))
    return int(math.ceil(x - _QUANT_EPS * max(1.0, abs(x))))


@dataclass(frozen=True)
class ExecutionOption:
    """One SM clock for one instruction type, with its cost in the planner's terms.

    Attributes:
        frequency_mhz: SM clock, MHz.
        time_s: Measured duration, s.
        energy_j: Measured GPU energy, J.
        effective_energy_j: ``energy_j − blocking_power_w · time_s``, J (may be negative).
        quant_time: Duration in whole ``unit_time_s`` quanta.

    Example:
        >>> ExecutionOption(1410, 0.010, 3.0, effective_energy_j=3.0 - 80.0 * 0.010, quant_time=10)
        ExecutionOption(frequency_mhz=1410, time_s=0.01, energy_j=3.0, effective_energy_j=2.2, quant_time=10)
    """

    frequency_mhz: int
    time_s: float
    energy_j: float
    effective_energy_j: float
    quant_time: int


class InstructionOptions:
    """Pareto-optimal, quantised execution options of one instruction type.

    Args:
        measurements: The profile rows of this (stage, instruction type).
        unit_time_s: Time quantum, s.
        blocking_power_w: GPU power while blocked on communication, W.
        rounding: Quantisation of durations (see :class:`TimeRounding`).
        name: Label for messages, e.g. ``"stage 2 backward"``.

    Attributes:
        options: Kept options, slowest (largest ``quant_time``) first. Among options that round
            to the same quantum, ``"floor"`` keeps the fastest (closest to the rounded time, as
            lowtime does) and ``"ceil"`` keeps the cheapest (all of them fit in the quantum).
        all_pareto: Every Pareto-optimal option before de-duplication, slowest first.
        min_quant_time, max_quant_time: Range of ``quant_time``, quanta.

    Raises:
        ZeusConfigError: ``unit_time_s`` is not positive.
        ZeusProfileError: ``measurements`` is empty, or a duration is shorter than one quantum
            under ``"floor"`` rounding.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import ProfileMeasurement as PM
        >>> opts = InstructionOptions([PM(1410, 0.010, 3.0), PM(1200, 0.011, 2.5), PM(900, 0.014, 2.4)],
        ...                           unit_time_s=0.001, blocking_power_w=0.0)
        >>> [o.quant_time for o in opts.options], opts.option_for_duration(12).frequency_mhz
        ([14, 11, 10], 1200)
    """

    def __init__(
        self,
        measurements: Sequence[ProfileMeasurement],
        unit_time_s: float,
        blocking_power_w: float = 0.0,
        rounding: TimeRounding | str = TimeRounding.CEIL,
        name: str = "instruction",
    ) -> None:
        if not unit_time_s > 0:
            raise ZeusConfigError(f"InstructionOptions: unit_time_s={unit_time_s} must be positive.")
        if not measurements:
            raise ZeusProfileError(f"{name}: no measurements to choose from.")
        self.name = name
        self.unit_time_s = float(unit_time_s)
        self.blocking_power_w = float(blocking_power_w)
        self.rounding = TimeRounding(rounding)
        raw = [
            ExecutionOption(
                m.frequency_mhz,
                m.time_s,
                m.energy_j,
                m.energy_j - self.blocking_power_w * m.time_s,
                quantize_time(m.time_s, self.unit_time_s, self.rounding),
            )
            for m in measurements
        ]
        if min(o.quant_time for o in raw) < 1:
            raise ZeusProfileError(
                f"{name}: the fastest option ({min(o.time_s for o in raw)} s) is shorter than one time "
                f"quantum ({self.unit_time_s} s) under floor rounding; pass a smaller unit_time_s."
            )
        # Pareto filter on (real time, effective energy): drop an option if another one is no
        # slower and no costlier, and strictly better in one of the two.
        pareto = [
            o
            for o in raw
            if not any(
                (p.time_s <= o.time_s and p.effective_energy_j <= o.effective_energy_j)
                and (p.time_s < o.time_s or p.effective_energy_j < o.effective_energy_j)
                for p in raw
            )
        ]
        # Exact duplicates (same time and energy at two clocks): keep the higher clock once.
        unique: dict[tuple[float, float], ExecutionOption] = {}
        for o in sorted(pareto, key=lambda o: -o.frequency_mhz):
            unique.setdefault((o.time_s, o.effective_energy_j), o)
        self.all_pareto: list[ExecutionOption] = sorted(unique.values(), key=lambda o: -o.time_s)
        by_quant: dict[int, ExecutionOption] = {}
        for o in self.all_pareto:  # slowest first
            if self.rounding is TimeRounding.CEIL:
                by_quant.setdefault(o.quant_time, o)  # the slowest (cheapest) in the quantum
            else:
                by_quant[o.quant_time] = o  # the fastest (closest to the rounded-down time)
        self.options: list[ExecutionOption] = [by_quant[q] for q in sorted(by_quant, reverse=True)]
        self.min_quant_time = self.options[-1].quant_time
        self.max_quant_time = self.options[0].quant_time
        self._ascending_q = [o.quant_time for o in reversed(self.options)]

    def option_for_duration(self, quant_time: int) -> ExecutionOption:
        """The slowest kept option with ``quant_time`` at most ``quant_time`` (the fastest below range)."""
        i = bisect.bisect_right(self._ascending_q, quant_time)
        return self.options[len(self.options) - max(i, 1)]

    @property
    def fastest(self) -> ExecutionOption:
        """The kept option with the smallest duration."""
        return self.options[-1]

    @property
    def slowest(self) -> ExecutionOption:
        """The kept option with the largest duration (least effective energy)."""
        return self.options[0]

    def __repr__(self) -> str:
        return (
            f"InstructionOptions({self.name}: {len(self.options)} options, "
            f"{self.min_quant_time}..{self.max_quant_time} x {self.unit_time_s} s)"
        )


class CostModel(ABC):
    """A convex, non-increasing effective-energy model over quantised duration.

    Subclasses fit themselves in ``__init__`` from :class:`InstructionOptions` and implement
    ``__call__``; the solver uses :meth:`savings`.

    Args:
        options: The instruction type's options.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import ProfileMeasurement as PM
        >>> opts = InstructionOptions([PM(1410, 0.010, 3.0), PM(900, 0.014, 2.2)], unit_time_s=0.001)
        >>> ConvexHullCostModel(opts).savings().round(2).tolist()  # J per quantum, q = 11..14
        [0.2, 0.2, 0.2, 0.2]
    """

    def __init__(self, options: InstructionOptions) -> None:
        self.options = options

    @abstractmethod
    def __call__(self, quant_time: float) -> float:
        """Modelled effective energy (J) at duration ``quant_time`` (quanta)."""

    def savings(self) -> np.ndarray:
        """Per-quantum savings ``s[k] = cost(q−1) − cost(q)`` for ``q = min+1 .. max``, J.

        Convexity makes them non-increasing in ``q``; negative values (a fit artefact) are
        clipped to 0 and the sequence is made non-increasing, so the result is always a convex,
        non-increasing piecewise-linear model.
        """
        lo, hi = self.options.min_quant_time, self.options.max_quant_time
        qs = np.arange(lo, hi + 1, dtype=float)
        values = np.array([self(q) for q in qs], dtype=float)
        s = np.maximum(values[:-1] - values[1:], 0.0)
        return np.minimum.accumulate(s) if len(s) else s


class ConvexHullCostModel(CostModel):
    """Piecewise-linear interpolation along the lower convex hull of the options (the default).

    Exact at every hull vertex. Options above the hull (Pareto-optimal but not convex) are still
    used when a plan picks a clock (:meth:`InstructionOptions.option_for_duration`).

    Args:
        options: The instruction type's options.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import ProfileMeasurement as PM
        >>> opts = InstructionOptions([PM(1410, 0.010, 3.0), PM(1200, 0.011, 2.5), PM(900, 0.014, 2.4)],
        ...                           unit_time_s=0.001)
        >>> round(ConvexHullCostModel(opts)(12), 3)  # between the vertices at 11 and 14 quanta
        2.467
    """

    def __init__(self, options: InstructionOptions) -> None:
        super().__init__(options)
        pts = sorted((o.quant_time, o.effective_energy_j) for o in options.options)  # fastest first
        hull: list[tuple[int, float]] = []
        for p in pts:
            while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
                hull.pop()
            hull.append(p)
        self.vertices: list[tuple[int, float]] = hull
        self._xs = np.array([q for q, _ in hull], dtype=float)
        self._ys = np.array([c for _, c in hull], dtype=float)

    def __call__(self, quant_time: float) -> float:
        """Modelled effective energy (J) at ``quant_time`` quanta (linear between hull vertices)."""
        return float(np.interp(quant_time, self._xs, self._ys))


def _cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


class ExponentialCostModel(CostModel):
    """``cost(q) = a·exp(b·q) + c`` with ``a ≥ 0``, ``b ≤ 0``, fitted by least squares (as lowtime).

    Smooths measurement noise. The fit runs in normalised coordinates, so it does not depend on the
    time unit or the energy scale; with fewer than three options, or if no fit converges, it falls
    back to :class:`ConvexHullCostModel`.

    Args:
        options: The instruction type's options.

    Raises:
        ModuleNotFoundError: scipy is not installed (``pip install 'zeus-suite[pipeline]'``).

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import ProfileMeasurement as PM
        >>> rows = [PM(1410, 0.010, 3.0), PM(1200, 0.011, 2.5), PM(1000, 0.013, 2.3), PM(900, 0.014, 2.25)]
        >>> model = ExponentialCostModel(InstructionOptions(rows, unit_time_s=0.001))
        >>> model(10) > model(12) > model(14)
        True
    """

    def __init__(self, options: InstructionOptions) -> None:
        super().__init__(options)
        self._fallback: ConvexHullCostModel | None = None
        q = np.array([o.quant_time for o in options.options], dtype=float)
        c = np.array([o.effective_energy_j for o in options.options], dtype=float)
        if len(q) < 3:
            self._fallback = ConvexHullCostModel(options)
            return
        try:
            from scipy.optimize import curve_fit  # type: ignore[import-untyped]
        except ModuleNotFoundError as exc:  # pragma: no cover - scipy is installed with the extra
            raise ModuleNotFoundError(
                "ExponentialCostModel needs scipy: pip install 'zeus-suite[pipeline]'"
            ) from exc
        q0, qspan = q.min(), max(q.max() - q.min(), 1.0)
        c0, cspan = c.min(), max(c.max() - c.min(), 1e-12)
        x, y = (q - q0) / qspan, (c - c0) / cspan

        def fn(x: np.ndarray, a: float, b: float, k: float) -> np.ndarray:
            return a * np.exp(b * x) + k

        best: tuple[float, tuple[float, float, float]] | None = None
        for b0 in (-1.0, -3.0, -10.0, -30.0):
            try:
                params, _ = curve_fit(
                    fn, x, y, p0=(1.0, b0, 0.0), bounds=([0.0, -200.0, -10.0], [1e6, 0.0, 10.0]), maxfev=20000
                )
            except (RuntimeError, ValueError) as exc:
                logger.debug("%s: exponential fit from b0=%s failed: %s", options.name, b0, exc)
                continue
            err = float(np.mean((fn(x, *params) - y) ** 2))
            if best is None or err < best[0]:
                best = (err, tuple(float(p) for p in params))  # type: ignore[assignment]
        if best is None:
            logger.warning("%s: exponential fit failed; using the convex hull.", options.name)
            self._fallback = ConvexHullCostModel(options)
            return
        a, b, k = best[1]
        # Back to quanta and joules.
        self.b = b / qspan
        self.a = a * cspan * math.exp(-b * q0 / qspan)
        self.c = k * cspan + c0
        self.mse_j2 = best[0] * cspan * cspan

    def __call__(self, quant_time: float) -> float:
        """Modelled effective energy (J) at ``quant_time`` quanta."""
        if self._fallback is not None:
            return self._fallback(quant_time)
        return float(self.a * math.exp(self.b * quant_time) + self.c)


#: Cost-model name (as on the command line) -> class.
COST_MODELS: dict[str, type[CostModel]] = {
    "hull": ConvexHullCostModel,
    "exponential": ExponentialCostModel,
}
