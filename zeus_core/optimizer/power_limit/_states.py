"""States of the power-limit optimizer; their transitions: docs/optimizers/power-limit.md ("States")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = ["Ready", "Warmup", "Measuring", "Deciding", "Done", "State"]


@dataclass(frozen=True)
class Ready:
    """Waiting ``steps_left`` steps (the last sets the limit) before measuring ``next_power_limit_w`` (W).

    Example:
        >>> Ready(300.0, 2)
        Ready(next_power_limit_w=300.0, steps_left=2)
    """

    next_power_limit_w: float
    steps_left: int


@dataclass(frozen=True)
class Warmup:
    """Running ``steps_left`` more unmeasured steps at the newly set ``power_limit_w`` (W).

    Example:
        >>> Warmup(250.0, 10).steps_left
        10
    """

    power_limit_w: float
    steps_left: int


@dataclass(frozen=True)
class Measuring:
    """A visit of ``power_limit_w`` (W) is open; ``again``: the limit was measured before.

    Example:
        >>> Measuring(250.0).again
        False
    """

    power_limit_w: float
    again: bool = False


@dataclass(frozen=True)
class Deciding:
    """A visit ended; ``power_limit_w`` (W) stays set while the next step is planned.

    Example:
        >>> Deciding(250.0).power_limit_w
        250.0
    """

    power_limit_w: float


@dataclass(frozen=True)
class Done:
    """Profiling is over; ``optimal_power_limit_w`` (W) stays set, for ``reason``.

    Example:
        >>> Done(225.0, "the choice is settled").optimal_power_limit_w
        225.0
    """

    optimal_power_limit_w: float
    reason: str = ""


State = Union[Ready, Warmup, Measuring, Deciding, Done]
"""Any state of the optimizer (``GlobalPowerLimitOptimizer.state``).

Example:
    >>> isinstance(Done(225.0), (Ready, Warmup, Measuring, Deciding, Done))
    True
"""
