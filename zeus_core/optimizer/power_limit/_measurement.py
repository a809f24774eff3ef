"""A visit's samples and a limit's measurement (docs/optimizers/power-limit.md, "Measurements")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from zeus_core.exceptions import ZeusProfileError

__all__ = ["PowerLimitMeasurement", "Visit", "expected_savings"]

_OLD_NAMES = {"power_limit_w": "power_limit", "energy_per_step_j": "energy", "time_per_step_s": "time"}
"""Keys of profiles and checkpoints written before the fields took Zeus's names."""


@dataclass(frozen=True)
class PowerLimitMeasurement:
    """The whole job's time (slowest rank) and GPU energy (every GPU) per step at one limit, in Zeus's fields.

    Attributes:
        power_limit: The limit every GPU ran under, W.
        steps: Measured steps.
        time: Mean time per step, s.
        energy: Mean GPU energy per step of the whole job, J.
        time_var_s2: Variance of one step's time, s².
        energy_var_j2: Variance of one step's energy, J².
        covariance_js: Covariance of one step's energy and time, J·s.
        num_gpus: GPUs whose energy is summed.
        samples: Energy-counter samples the variances come from (``None``: one per step).
        spread_dof: Degrees of freedom of the variances if they rest on the job's jitter (``None``: own).

    Raises:
        ZeusProfileError: A figure is not finite or out of range.

    Example:
        >>> m = PowerLimitMeasurement(power_limit=250, energy=60.0, time=0.25, steps=40)
        >>> m.average_power, m.describe()
        (240.0, '250 W: 0.2500 s/step, 240.0 W, 60.00 J/step (40 steps)')
    """

    power_limit: float
    steps: int = 1
    time: float = math.nan
    energy: float = math.nan
    time_var_s2: float = 0.0
    energy_var_j2: float = 0.0
    covariance_js: float = 0.0
    num_gpus: int = 1
    samples: int | None = None
    spread_dof: int | None = None

    def __post_init__(self) -> None:
        for name in ("power_limit", "energy", "time", "time_var_s2", "energy_var_j2", "covariance_js"):
            object.__setattr__(self, name, float(getattr(self, name)))
        samples = self.steps if self.samples is None else self.samples
        object.__setattr__(self, "samples", samples)
        figures = (self.power_limit, self.energy, self.time, self.time_var_s2, self.energy_var_j2)
        if (
            not all(math.isfinite(x) for x in figures)
            or self.power_limit <= 0
            or self.time <= 0
            or self.energy < 0
            or self.steps < 1
            or self.num_gpus < 1
            or not 1 <= samples <= self.steps
            or (self.spread_dof is not None and self.spread_dof < 0)
        ):
            raise ZeusProfileError(
                f"PowerLimitMeasurement at {self.power_limit} W: need a finite limit > 0 W, time > 0 s, "
                f"energy >= 0 J, steps >= 1, num_gpus >= 1 and 1 <= samples <= steps; got "
                f"time={self.time}, energy={self.energy}, steps={self.steps}, samples={self.samples}, "
                f"num_gpus={self.num_gpus}."
            )

    @property
    def average_power(self) -> float:
        """Average power of the job's GPUs at this limit, W."""
        return self.energy / self.time

    power_limit_w = property(lambda self: self.power_limit, doc="Earlier name of :attr:`power_limit`, W.")
    time_per_step_s = property(lambda self: self.time, doc="Earlier name of :attr:`time`, s.")
    energy_per_step_j = property(lambda self: self.energy, doc="Earlier name of :attr:`energy`, J.")

    @property
    def dof(self) -> int:
        """Degrees of freedom of the variances: samples − 1, or :attr:`spread_dof`."""
        return self.spread_dof if self.spread_dof is not None else self.samples - 1  # type: ignore[operator]

    def stderr(self, per_j: float, per_s: float) -> float:
        """Standard error of ``per_j·energy + per_s·time`` (``inf`` without a spread estimate)."""
        if self.dof < 1:
            return math.inf
        var = (
            per_j**2 * self.energy_var_j2
            + per_s**2 * self.time_var_s2
            + 2 * per_j * per_s * self.covariance_js
        )
        return math.sqrt(max(var, 0.0) / self.steps)

    def power_stderr(self) -> float:
        """Standard error of :attr:`average_power` (a ratio estimate, delta method), W."""
        return self.stderr(1.0, -self.average_power) / self.time

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PowerLimitMeasurement":
        """Inverse of :meth:`to_dict` (older key names are read too; unknown keys are ignored).

        Raises:
            ZeusProfileError: A required key is missing or a value is invalid.
        """
        if not isinstance(data, Mapping):
            raise ZeusProfileError(f"Power-limit measurement {str(data)[:200]} is not an object.")
        values = {_OLD_NAMES.get(k, k): v for k, v in data.items()}
        try:
            kwargs = {f.name: values[f.name] for f in fields(cls) if f.name in values}
            for name in ("steps", "num_gpus", "samples", "spread_dof"):
                if kwargs.get(name) is not None:
                    kwargs[name] = int(kwargs[name])
            power_limit, energy, time = (float(kwargs.pop(k)) for k in ("power_limit", "energy", "time"))
            return cls(power_limit, energy=energy, time=time, **kwargs)
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            if isinstance(e, ZeusProfileError):
                raise
            raise ZeusProfileError(
                f"Power-limit measurement {str(dict(data))[:200]} is malformed ({e!r}); it needs "
                "power_limit, energy and time."
            ) from e

    def describe(self) -> str:
        """One line, e.g. ``"250 W: 0.2813 s/step, 247.1 W, 69.51 J/step (40 steps in 8 samples)"``."""
        grouped = f" in {self.samples} samples" if self.samples != self.steps else ""
        se = self.stderr(0.0, 1.0)
        noise = f", ±{se / self.time:.1%} time" if math.isfinite(se) and se > 0 else ""
        return (
            f"{self.power_limit:g} W: {self.time:.4f} s/step, {self.average_power:.1f} W, "
            f"{self.energy:.2f} J/step ({self.steps} steps{grouped}{noise})"
        )


@dataclass(frozen=True)
class Visit:
    """The samples of one visit of ``power_limit`` (W), reduced over ranks.

    Each sample's job time (s), GPU energy (J) and steps; ``first_step``: steps run before the visit.

    Example:
        >>> Visit(300.0, (0.5, 0.5), (150.0, 151.0), (5, 5)).total_steps
        10
    """

    power_limit: float
    times_s: tuple[float, ...]
    energies_j: tuple[float, ...]
    steps: tuple[int, ...]
    first_step: int = 0

    @property
    def total_steps(self) -> int:
        """Measured steps of the visit."""
        return sum(self.steps)

    def to_json(self) -> list[Any]:
        """JSON-safe form: ``[limit, times, energies, steps, first_step]``."""
        return [self.power_limit, [*self.times_s], [*self.energies_j], [*self.steps], self.first_step]

    @classmethod
    def from_json(cls, item: Any) -> "Visit":
        """Inverse of :meth:`to_json` (``first_step`` may be missing).

        Raises:
            ZeusProfileError: The item is malformed.
        """
        try:
            limit, times, energies, steps, *rest = item
            numbers = (tuple(map(float, times)), tuple(map(float, energies)), tuple(map(int, steps)))
            visit = cls(float(limit), *numbers, int(rest[0]) if rest else 0)
        except (TypeError, ValueError) as e:
            raise ZeusProfileError(f"A saved profiling visit is malformed ({e}): {str(item)[:200]}") from e
        if not visit.times_s or not len(visit.times_s) == len(visit.energies_j) == len(visit.steps):
            raise ZeusProfileError(f"A saved profiling visit has mismatched samples: {str(item)[:200]}")
        if min(visit.steps) < 1 or not all(math.isfinite(x) for x in (*visit.times_s, *visit.energies_j)):
            raise ZeusProfileError(f"A saved profiling visit has impossible samples: {str(item)[:200]}")
        return visit


def expected_savings(optimal: float, measurements: Sequence[PowerLimitMeasurement]) -> str:
    """What the choice saves against the highest limit measured, for the decision's line (or ``""``)."""
    chosen = next((m for m in measurements if m.power_limit == optimal), None)
    top = max(measurements, key=lambda m: m.power_limit, default=None)
    if chosen is None or top is None or top is chosen or top.energy <= 0:
        return ""
    return (
        f": expected {1 - chosen.energy / top.energy:+.1%} energy saved per step, time per step "
        f"{chosen.time / top.time - 1:+.1%}, compared with {top.power_limit:g} W"
    )
