"""The conservative exploration budget: a job's cumulative cost against its default's.

A recurrence of a job is its trials up to the first that converged. The default is what the job
did before the optimizer: its default batch size, as it ran then (in the simulator, at the
maximum power limit). For a recurrence that the default batch size completed, the default's
cost is measured: the trial's :attr:`~zeus_core.optimizer.batch_size._bandit.Observation.reference_cost`
when given, else its recurring cost. For any other recurrence it is estimated: the mean of the
measured ones. See docs/optimizers/batch-size.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from zeus_core.optimizer.batch_size._bandit import Observation

__all__ = ["ExplorationBudget", "account"]


@dataclass(frozen=True)
class ExplorationBudget:
    """A job's cumulative cost against its default's, and what is left to explore with.

    Attributes:
        cost_j: Cumulative cost of the finished trials, one-time overheads included, J.
        default_cost_j: The default's cumulative cost over the same recurrences, J.
        measured_recurrences: Recurrences whose default cost was measured (the default batch
            size completed them).
        estimated_recurrences: Recurrences whose default cost was estimated as
            ``default_recurrence_cost_j``.
        default_recurrence_cost_j: The default's cost of one recurrence (mean of the measured
            ones), J; ``None`` before the default batch size completed a trial.
        slack: The spec's ``slack`` (``None``: no budget).
        uncharged_j: The part of ``cost_j`` the budget leaves out, J: the one-time overhead of the
            default batch size's trials (power-limit profiling that the job pays whatever batch
            size it runs; exploration is charged the overhead of the batch sizes it adds).

    Example:
        >>> b = ExplorationBudget(950.0, 1000.0, 1, 0, 1000.0, 0.0)
        >>> b.remaining_j
        50.0
    """

    cost_j: float
    default_cost_j: float
    measured_recurrences: int
    estimated_recurrences: int
    default_recurrence_cost_j: float | None
    slack: float | None
    uncharged_j: float = 0.0

    @property
    def remaining_j(self) -> float:
        """``(1 + slack) × default_cost_j − (cost_j − uncharged_j)``: what exploration may still cost, J.

        ``inf`` without a budget.

        Negative when the job has cost more than the default allows (exploration is then off
        until the savings make up for it).
        """
        if self.slack is None:
            return math.inf
        return (1.0 + self.slack) * self.default_cost_j - (self.cost_j - self.uncharged_j)

    def allows(self, pessimistic_cost_j: float) -> bool:
        """Whether one more recurrence, costing at most ``pessimistic_cost_j`` J, stays within budget."""
        if self.slack is None:
            return True
        if self.default_recurrence_cost_j is None:
            return False
        allowance = (1.0 + self.slack) * self.default_recurrence_cost_j
        return pessimistic_cost_j <= allowance + self.remaining_j

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (``None``: no budget for ``remaining_j``; a sum that overflowed)."""
        return {
            "cost_j": _finite(self.cost_j),
            "default_cost_j": _finite(self.default_cost_j),
            "measured_recurrences": self.measured_recurrences,
            "estimated_recurrences": self.estimated_recurrences,
            "default_recurrence_cost_j": _finite(self.default_recurrence_cost_j),
            "slack": self.slack,
            "uncharged_j": _finite(self.uncharged_j),
            "remaining_j": _finite(self.remaining_j),
        }


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def account(
    observations: Iterable[Observation], default_batch_size: int, slack: float | None
) -> ExplorationBudget:
    """Add up finished trials against the default (see the module docs).

    Args:
        observations: Every finished trial, in order.
        default_batch_size: The job's default batch size.
        slack: The spec's ``slack``.

    Returns:
        The budget.
    """
    cost = 0.0
    uncharged = 0.0
    measured: list[float] = []
    others = 0
    failed_default = 0.0
    for o in observations:
        cost += o.cost
        if o.batch_size == default_batch_size:
            uncharged += o.overhead
            if o.converged:
                measured.append(o.reference_cost if o.reference_cost is not None else o.recurring_cost)
            else:
                failed_default = max(failed_default, o.recurring_cost)
        elif o.converged:
            others += 1
    if measured:
        per_recurrence: float | None = sum(measured) / len(measured)
    else:
        # The default never converged: it costs at least as much as its furthest trial went.
        per_recurrence = failed_default if failed_default > 0 else None
    default_cost = sum(measured) + others * (per_recurrence or 0.0)
    return ExplorationBudget(cost, default_cost, len(measured), others, per_recurrence, slack, uncharged)
