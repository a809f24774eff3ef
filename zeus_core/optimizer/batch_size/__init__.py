"""Batch-size optimizer for recurring jobs (Zeus, NSDI'23): the job spec, the bandit, the client.

A recurring job learns, across its recurrences, the batch size that reaches its target metric at
the lowest Zeus cost, without costing more than its default batch size did (the exploration
budget, ``JobSpec.slack``). The bandit is pure Python; the service runs it for many jobs
(``zeus-suite bso-server``), and :class:`BatchSizeOptimizer` is the training script's client.
How it chooses: docs/optimizers/batch-size.md.

Example:
    >>> from zeus_core.optimizer.batch_size import BatchSizeBandit, JobSpec, Observation
    >>> spec = JobSpec("job", (32, 64, 128), 64, target_metric=0.9, max_power_w=300.0)
    >>> bandit = BatchSizeBandit(spec, [Observation(64, cost=1000.0, converged=True)])
    >>> bandit.next_batch_size(trial_number=2), bandit.budget().remaining_j
    (32, 0.0)
"""

from __future__ import annotations

from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit, Phase
from zeus_core.optimizer.batch_size._budget import ExplorationBudget
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer, ZeusServerError
from zeus_core.optimizer.batch_size._lr_scaling import LinearScaler, SquareRootScaler
from zeus_core.optimizer.batch_size._observation import Observation
from zeus_core.optimizer.batch_size._posterior import ArmPosterior
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = [
    "ArmPosterior",
    "BatchSizeBandit",
    "BatchSizeOptimizer",
    "ExplorationBudget",
    "JobSpec",
    "LinearScaler",
    "Observation",
    "Phase",
    "SquareRootScaler",
    "ZeusServerError",
]
