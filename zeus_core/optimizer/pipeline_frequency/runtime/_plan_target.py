"""What ``PerseusRuntime`` plans for: the frontier point, and the planner's settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile

__all__ = ["PlanTarget", "PlanSettings", "auto_unit_time"]


class PlanTarget(str, enum.Enum):
    """Which point of the time–energy frontier to run.

    Attributes:
        ZERO_SLOWDOWN: Least energy with no slowdown versus the highest clocks (Perseus's default).
        LEAST_ENERGY: Least energy at any iteration time.
        DEADLINE: Least energy for an iteration of ``deadline_s`` (a deadline, or a straggler's time).

    Example:
        >>> PlanTarget("least-energy") is PlanTarget.LEAST_ENERGY
        True
    """

    ZERO_SLOWDOWN = "zero-slowdown"
    LEAST_ENERGY = "least-energy"
    DEADLINE = "deadline"


@dataclass(frozen=True)
class PlanSettings:
    """What rank 0 plans for.

    Args:
        target: A :class:`PlanTarget` (``"zero-slowdown"``, ``"least-energy"``, ``"deadline"``).
        deadline_s: Iteration time to plan for, s (sets ``target`` to ``"deadline"``).
        unit_time_s: The planner's time quantum, s; ``None``: 1 ms, or a twentieth of the shortest
            profiled instruction where that is shorter.
        blocking_power_w: GPU power while blocked on communication, W; ``None``: measured while
            profiling (rank average), else the GPUs' idle power (a simulated GPU's model, or the
            documented figure), never a silent 0 W.

    Raises:
        ZeusConfigError: Unknown target, a deadline target without ``deadline_s``, or a bad value.

    Example:
        >>> PlanSettings(deadline_s=0.35).label
        'deadline-0.35s'
        >>> PlanSettings().target
        <PlanTarget.ZERO_SLOWDOWN: 'zero-slowdown'>
    """

    target: PlanTarget | str = PlanTarget.ZERO_SLOWDOWN
    deadline_s: float | None = None
    unit_time_s: float | None = None
    blocking_power_w: float | None = None

    def __post_init__(self) -> None:
        try:
            target = PlanTarget(self.target)
        except ValueError:
            raise ZeusConfigError(
                f"PlanSettings(target={self.target!r}): use one of {[t.value for t in PlanTarget]}."
            ) from None
        if self.deadline_s is not None:
            if self.deadline_s <= 0:
                raise ZeusConfigError(f"PlanSettings(deadline_s={self.deadline_s}): must be > 0 s.")
            if target is PlanTarget.LEAST_ENERGY:
                raise ZeusConfigError(
                    "PlanSettings: pass either target='least-energy' or deadline_s, not both."
                )
            target = PlanTarget.DEADLINE
        elif target is PlanTarget.DEADLINE:
            raise ZeusConfigError("PlanSettings(target='deadline'): also pass deadline_s (s).")
        if self.unit_time_s is not None and self.unit_time_s <= 0:
            raise ZeusConfigError(f"PlanSettings(unit_time_s={self.unit_time_s}): must be > 0 s.")
        if self.blocking_power_w is not None and self.blocking_power_w < 0:
            raise ZeusConfigError(f"PlanSettings(blocking_power_w={self.blocking_power_w}): must be >= 0 W.")
        object.__setattr__(self, "target", target)

    @property
    def label(self) -> str:
        """Short name used as the plan label and in file names."""
        if self.target is PlanTarget.DEADLINE:
            return f"deadline-{self.deadline_s:g}s"
        return PlanTarget(self.target).value


def auto_unit_time(profile: InstructionProfile) -> float:
    """The planner's time quantum for ``profile``: 1 ms, or 1/20 of its shortest instruction, s.

    Args:
        profile: The profile to plan from.
    """
    shortest = min(m.time_s for key in profile.keys() for m in profile.get(*key))
    return min(1e-3, shortest / 20)
