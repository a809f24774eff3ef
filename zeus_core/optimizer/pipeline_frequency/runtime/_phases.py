"""The phases of :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`, as frozen values.

The runtime changes phase in one place, after an iteration and on every rank together; the
transitions are listed in docs/optimizers/perseus.md ("The runtime's phases").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan

__all__ = ["DiscoveryPhase", "ProfilingPhase", "ApplyingPhase", "RuntimePhase"]


@dataclass(frozen=True)
class DiscoveryPhase:
    """Untouched warm-up iterations; the last one records the stage's instruction order.

    Next: :class:`ProfilingPhase`, or :class:`ApplyingPhase` when a plan is given, saved, or
    made from a saved profile.

    Attributes:
        remaining: Warm-up iterations left, this one included.
        name: ``"discovering"`` (as in :attr:`IterationRecord.phase`).

    Example:
        >>> DiscoveryPhase(1).name
        'discovering'
    """

    remaining: int
    name: str = field(default="discovering", init=False)


@dataclass(frozen=True)
class ProfilingPhase:
    """Sweeping clocks: iteration ``iteration`` at clock number ``index`` of this rank's sweep.

    Next: the next clock, or :class:`ApplyingPhase` once every rank is done.

    Attributes:
        index: Position of the clock in this rank's sweep, from 0.
        iteration: Iteration at that clock, from 0.
        measuring: ``False`` once this rank's own sweep is over while other ranks continue.
        name: ``"profiling"``.

    Example:
        >>> ProfilingPhase(0, 0).measuring
        True
    """

    index: int
    iteration: int
    measuring: bool = True
    name: str = field(default="profiling", init=False)


@dataclass(frozen=True)
class ApplyingPhase:
    """Running the plan (final, unless the pipeline's shape changes).

    Attributes:
        plan: The plan every rank applies.
        name: ``"applying"``.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, synchronous_1f1b
        >>> ApplyingPhase(FrequencyPlan.uniform(synchronous_1f1b(1, 1), 1410)).name
        'applying'
    """

    plan: FrequencyPlan
    name: str = field(default="applying", init=False)


#: Any phase of the runtime.
RuntimePhase = Union[DiscoveryPhase, ProfilingPhase, ApplyingPhase]
