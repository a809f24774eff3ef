"""Zeus 0.16's published batch-size optimizer as a policy of our simulator (needs ``zeus==0.16.0``).

``zeus._legacy.policy.optimizer.PruningGTSBatchSizeOptimizer`` is what the paper's artifact runs.
Behind our :class:`~zeus_core.simulate._policies.Policy` interface it makes exactly the choices it
makes in the published simulator (``zeus._legacy.simulate``), and the two simulators draw the same
runs for the same seed, so our simulator reproduces the published one's figures (checked to
1e-15 by ``benchmarks/nsdi23.py``). ``zeus-suite reproduce nsdi23`` shows it as "Zeus 0.16" when
the package is installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import warnings
from typing import Any

from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate._policies import Choice, TrialOutcome
from zeus_core.simulate._traces import WorkloadTrace

__all__ = ["PublishedZeusPolicy", "published_zeus_available", "legacy_job"]


def published_zeus_available() -> bool:
    """Whether ``zeus==0.16`` (its ``zeus._legacy`` simulator package) can be imported."""
    try:
        return importlib.util.find_spec("zeus._legacy.policy.optimizer") is not None
    except ModuleNotFoundError:
        return False


def legacy_job(trace: WorkloadTrace) -> Any:
    """The workload as the published simulator's ``zeus._legacy.job.Job``."""
    from zeus._legacy.job import Job  # type: ignore[import-untyped, import-not-found, unused-ignore]

    w = trace.workload
    return Job(w.dataset, w.network, w.optimizer, w.target_metric, w.max_epochs, w.default_batch_size)


class PublishedZeusPolicy:
    """Zeus 0.16's ``PruningGTSBatchSizeOptimizer`` with just-in-time power limits.

    Early stopping follows the published simulator: ``beta_knob`` × the lowest accumulated cost
    of a converged recurrence, the one-time profiling overhead included.

    Args:
        trace: The workload.
        seed: Seeds the published optimizer's Thompson sampling.
        beta_knob: Early-stop factor.

    Raises:
        ZeusConfigError: ``zeus==0.16`` is not installed.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces, simulate  # doctest: +SKIP
        >>> trace = load_nsdi23_traces("v100")[4]                          # doctest: +SKIP
        >>> simulate(trace, PublishedZeusPolicy(trace, seed=1), seed=1).policy  # doctest: +SKIP
        'zeus-0.16'
    """

    name = "zeus-0.16"

    def __init__(self, trace: WorkloadTrace, seed: int, beta_knob: float = 2.0) -> None:
        if not published_zeus_available():
            raise ZeusConfigError(
                "PublishedZeusPolicy needs the published Zeus simulator: pip install zeus==0.16.0"
            )
        from zeus._legacy.policy.optimizer import PruningGTSBatchSizeOptimizer  # type: ignore[import-untyped, import-not-found, unused-ignore]

        self._job = legacy_job(trace)
        self._bso = PruningGTSBatchSizeOptimizer(seed=seed, verbose=False)
        self._bso.register_job(self._job, list(trace.batch_sizes))
        self._beta = beta_knob
        self._max_epochs = trace.workload.max_epochs
        self._min_cost = math.inf
        self._acc = 0.0

    def choose(self, trial_number: int) -> Choice:
        """The published optimizer's batch size; JIT power limit."""
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Choice(int(self._bso.predict(self._job)), None)

    def observe(self, outcome: TrialOutcome) -> None:
        """Feed the full trial cost, as the published simulator does."""
        self._bso.observe(self._job, outcome.batch_size, outcome.cost_j, outcome.converged)
        self._acc += outcome.cost_j
        if outcome.converged:
            self._min_cost = min(self._min_cost, self._acc)
            self._acc = 0.0

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None) -> bool:
        """Published early stopping."""
        if epoch >= self._max_epochs:
            return True
        threshold = self._beta * self._min_cost
        return cost_so_far > threshold or (
            next_epoch_cost is not None and cost_so_far + next_epoch_cost > threshold
        )
