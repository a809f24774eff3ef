"""What a batch-size bandit learns from: one finished trial of a recurring job."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zeus_core.exceptions import ZeusConfigError

__all__ = ["Observation"]


def _joules(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class Observation:
    """The outcome of one finished trial.

    Attributes:
        batch_size: The batch size the trial used.
        cost: Zeus cost of the trial until it ended (converged, failed or early-stopped), J (>= 0).
        converged: Whether the trial reached the target metric within its budget.
        overhead: The part of ``cost`` that will not recur when the batch size is used again, J
            (``0 <= overhead <= cost``): e.g. the extra cost of profiling power limits in the
            first epoch of a batch size's first trial. The bandit learns the recurring cost
            ``cost - overhead``.
        epochs: Epochs the trial ran (``>= 0``; 0 = not known). For converged trials the bandit
            then learns cost per epoch and epochs-to-target apart (see the module docs).
        reference_cost: For a converged trial of the default batch size: what the same run would
            have cost as the job ran before the optimizer (e.g. at the maximum power limit when a
            power-limit optimizer chose another), J. ``None``: its recurring cost. The
            exploration budget measures the default with it.

    Example:
        >>> Observation(64, cost=1200.0, converged=True, overhead=200.0).recurring_cost
        1000.0
    """

    batch_size: int
    cost: float
    converged: bool
    overhead: float = 0.0
    epochs: int = 0
    reference_cost: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size <= 0:
            raise ZeusConfigError(f"Observation: batch_size={self.batch_size!r} must be a positive integer.")
        if not _joules(self.cost):
            raise ZeusConfigError(f"Observation: cost={self.cost!r} must be a finite number of joules.")
        if self.cost < 0:
            raise ZeusConfigError(f"Observation: cost={self.cost!r} must be >= 0 J.")
        if not isinstance(self.converged, bool):
            raise ZeusConfigError(f"Observation: converged={self.converged!r} must be True or False.")
        o = self.overhead
        if not _joules(o) or not 0 <= o <= self.cost:
            raise ZeusConfigError(
                f"Observation: overhead={o!r} must be a number of joules within [0, cost={self.cost}]."
            )
        if not isinstance(self.epochs, int) or isinstance(self.epochs, bool) or self.epochs < 0:
            raise ZeusConfigError(
                f"Observation: epochs={self.epochs!r} must be a whole number of epochs >= 0 (0 = not known)."
            )
        r = self.reference_cost
        if r is not None and (not _joules(r) or r < 0):
            raise ZeusConfigError(
                f"Observation: reference_cost={r!r} must be a finite number of joules >= 0, or None."
            )

    @property
    def recurring_cost(self) -> float:
        """``cost - overhead``: what the trial would cost again with the same batch size, J."""
        return self.cost - self.overhead
