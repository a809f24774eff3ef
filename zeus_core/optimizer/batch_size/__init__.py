"""Batch-size optimizer for recurring jobs (Zeus, NSDI'23): the bandit, its job spec, and the service.

The algorithm (:class:`BatchSizeBandit`, :class:`JobSpec`, :class:`Observation`) is pure Python and
imports nothing optional; the FastAPI service and its client live in sibling modules that import
their frameworks only when used.
"""

from __future__ import annotations

from zeus_core.optimizer.batch_size.bandit import ArmPosterior, BatchSizeBandit, Observation, Phase
from zeus_core.optimizer.batch_size.spec import JobSpec

__all__ = ["ArmPosterior", "BatchSizeBandit", "JobSpec", "Observation", "Phase"]
