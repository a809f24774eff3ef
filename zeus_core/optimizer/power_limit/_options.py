"""The power-limit optimizer's knobs beyond Zeus's few, in one object (docs/optimizers/power-limit.md)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.power_limit._selectors import OptimumSelector

__all__ = ["PowerLimitOptions", "check_arguments"]


@dataclass(frozen=True)
class PowerLimitOptions:
    """How :class:`GlobalPowerLimitOptimizer` profiles, beyond Zeus's arguments (see the docs page).

    Zeus's own arguments (``wait_steps``, ``warmup_steps``, ``profile_steps``, ``pl_step``,
    ``profile_path``) stay on the optimizer; everything else is here. The optimizer also takes
    these fields as keyword arguments (``GlobalPowerLimitOptimizer(monitor, early_stopping=False)``).

    Attributes (the rules they tune: docs/optimizers/power-limit.md, "The plan"):
        early_stopping: Survey, then measure only the contenders (``False`` or ``None``: Zeus's sweep).
        budget_steps: Most steps before the decision (``None``: Zeus's sweep length).
        min_sample_s: Shortest sample (one energy-counter reading), s.
        min_samples: Samples of a limit's first visit, and the fewest before any verdict (>= 2).
        min_steps: Measured steps of a limit's first visit, at least (>= 2).
        check_every: Measured steps between two looks at a running visit (>= 1).
        confidence: Two-sided confidence of every interval and test (0.5 to 1).
        rel_tol: A limit whose time and power per step are known within this fraction is measured enough.
        tie_tol: The choice is settled within this fraction of every contender's cost (``0``: never).
        margin: The survey stops after ``patience`` limits cost ``1 + margin`` × the best, or are infeasible.
        patience: See ``margin`` (>= 1).
        max_visit_steps: Most measured steps of one limit in all (``None``: 3 × ``profile_steps``).
        power_tolerance: Power per GPU above its limit by more than this fraction is impossible.
        counter_period_s: Energy-counter update period, s (one update at the limit is allowed too).
        thermal_check: Measure again a window slowed down by heat, or whose temperature moved > 3 °C.

    Raises:
        ZeusConfigError: A field is out of range (the message names it and the fix).

    Example:
        >>> PowerLimitOptions(min_sample_s=0.5).replace(tie_tol=0.0).tie_tol
        0.0
    """

    early_stopping: bool | None = True
    budget_steps: int | None = None
    min_sample_s: float = 0.02
    min_samples: int = 3
    min_steps: int = 10
    check_every: int = 5
    confidence: float = 0.95
    rel_tol: float = 0.005
    tie_tol: float = 0.005
    margin: float = 0.10
    patience: int = 2
    max_visit_steps: int | None = None
    power_tolerance: float = 0.05
    counter_period_s: float = 0.1
    thermal_check: bool = True

    def __post_init__(self) -> None:
        problems = [p for p in (_check(f.name, getattr(self, f.name)) for f in fields(self)) if p]
        if problems:
            raise ZeusConfigError("PowerLimitOptions: " + "; ".join(problems) + ".")

    @classmethod
    def of(cls, options: "PowerLimitOptions | None", overrides: Mapping[str, Any]) -> "PowerLimitOptions":
        """``options`` (or the defaults) with ``overrides`` (keyword arguments of the optimizer).

        Raises:
            ZeusConfigError: An override names no field (the message lists them) or is out of range.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ZeusConfigError(
                f"GlobalPowerLimitOptimizer got unknown argument(s) {unknown}; the options are "
                f"{sorted(known)} (see PowerLimitOptions)."
            )
        base = options if options is not None else cls()
        return base.replace(**overrides) if overrides else base

    def replace(self, **changes: Any) -> "PowerLimitOptions":
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def visit_cap(self, profile_steps: int) -> int:
        """Most measured steps of one limit in all."""
        cap = 3 * profile_steps if self.max_visit_steps is None else self.max_visit_steps
        return max(profile_steps, cap)


def check_arguments(
    selector: object, gpus: list[Any], wait_steps: object, warmup_steps: object, profile_steps: object,
    pl_step: object,
) -> None:  # fmt: skip
    """Refuse bad values of the optimizer's own arguments, each named with its fix (``ZeusConfigError``)."""
    ints = (
        ("wait_steps", wait_steps, 0),
        ("warmup_steps", warmup_steps, 0),
        ("profile_steps", profile_steps, 1),
    )
    problems = [f"{name}={v!r} (use an int >= {low})" for name, v, low in ints if not _int_at_least(v, low)]
    if not _number(pl_step) or not 0 < pl_step < math.inf:  # type: ignore[operator]
        problems.append(f"pl_step={pl_step!r} (use a positive number of watts, e.g. 25)")
    if not isinstance(selector, OptimumSelector):
        problems.append(f"optimum_selector={selector!r} (use an OptimumSelector, e.g. Energy())")
    if not gpus:
        problems.append("the monitor has no GPUs (pass a ZeusMonitor that measures at least one GPU)")
    if problems:
        raise ZeusConfigError("GlobalPowerLimitOptimizer: " + "; ".join(problems) + ".")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_at_least(value: object, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


_RULES: dict[str, tuple[Any, str]] = {
    "min_samples": (lambda v: _int_at_least(v, 2), "an int >= 2"),
    "min_steps": (lambda v: _int_at_least(v, 2), "an int >= 2"),
    "check_every": (lambda v: _int_at_least(v, 1), "an int >= 1"),
    "patience": (lambda v: _int_at_least(v, 1), "an int >= 1"),
    "budget_steps": (lambda v: v is None or _int_at_least(v, 1), "an int >= 1, or None for the default"),
    "max_visit_steps": (lambda v: v is None or _int_at_least(v, 1), "an int >= 1, or None for the default"),
    "min_sample_s": (lambda v: _number(v) and 0 <= v < math.inf, "a finite number >= 0"),
    "power_tolerance": (lambda v: _number(v) and 0 <= v < math.inf, "a finite number >= 0"),
    "counter_period_s": (lambda v: _number(v) and 0 <= v < math.inf, "a finite number >= 0"),
    "confidence": (lambda v: _number(v) and 0.5 <= v < 1, "0.5 <= confidence < 1"),
    "rel_tol": (lambda v: _number(v) and 0 < v < 1, "a fraction in (0, 1)"),
    "tie_tol": (lambda v: _number(v) and 0 <= v < 1, "a fraction in [0, 1)"),
    "margin": (lambda v: _number(v) and 0 <= v < math.inf, "a fraction >= 0"),
    "early_stopping": (lambda v: v in (True, False, None), "True or False"),
    "thermal_check": (lambda v: isinstance(v, bool), "True or False"),
}


def _check(name: str, value: Any) -> str | None:
    """The problem with one field's value, with the fix, or ``None``."""
    ok, fix = _RULES[name]
    return None if ok(value) else f"{name}={value!r} (use {fix})"
