"""States of the power-limit optimizer: small frozen values (docs/optimizers/power-limit.md, "States").

Transitions, all made by ``GlobalPowerLimitOptimizer._transition`` ("step": an ``on_step_begin``)::

    Ready(limit, steps_left)   --steps_left-th step-->  Warmup(limit) | Measuring(limit)   [sets the limit]
    Warmup(limit, steps_left)  --steps_left-th step-->  Measuring(limit)                   [opens a visit]
    Measuring(limit)           --visit handed over-->   Deciding(limit) | Warmup(next lower limit)
    Deciding(limit)            --next step-->           Warmup | Measuring (next limit) | Done
    any but Done               --budget spent-->        Done

What to do after a visit is worked out off the training thread during the step that follows it
(at the same limit, ``Deciding``; or already in the next lower limit's warm-up while surveying,
which the plan then confirms or replaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = ["Ready", "Warmup", "Measuring", "Deciding", "Done", "State"]


@dataclass(frozen=True)
class Ready:
    """Waiting to set the next limit (at the start, or after a restore cut a visit short).

    Attributes:
        next_power_limit_w: The limit to measure next, W.
        steps_left: ``on_step_begin`` calls until it is set (the last one sets it).

    Example:
        >>> Ready(300.0, 2)
        Ready(next_power_limit_w=300.0, steps_left=2)
    """

    next_power_limit_w: float
    steps_left: int


@dataclass(frozen=True)
class Warmup:
    """Running at a newly set limit before measuring it.

    Attributes:
        power_limit_w: The limit set on every GPU, W.
        steps_left: ``on_step_begin`` calls until measuring starts.

    Example:
        >>> Warmup(250.0, 10).steps_left
        10
    """

    power_limit_w: float
    steps_left: int


@dataclass(frozen=True)
class Measuring:
    """Measuring a limit: a visit is open (its samples are the sampler's).

    Attributes:
        power_limit_w: The limit set on every GPU, W.
        again: The limit was measured before; this visit's samples add to it.

    Example:
        >>> Measuring(250.0).again
        False
    """

    power_limit_w: float
    again: bool = False


@dataclass(frozen=True)
class Deciding:
    """A visit ended; its limit stays set for one step while the next step is planned.

    Attributes:
        power_limit_w: The limit set on every GPU, W.

    Example:
        >>> Deciding(250.0).power_limit_w
        250.0
    """

    power_limit_w: float


@dataclass(frozen=True)
class Done:
    """Profiling is over; the chosen limit stays set.

    Attributes:
        optimal_power_limit_w: The chosen limit, W.
        reason: Why profiling ended.

    Example:
        >>> Done(225.0, "the choice is settled").optimal_power_limit_w
        225.0
    """

    optimal_power_limit_w: float
    reason: str = ""


State = Union[Ready, Warmup, Measuring, Deciding, Done]
"""Any state of the optimizer."""
