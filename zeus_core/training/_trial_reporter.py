"""Reports a training run to its batch-size optimizer trial, for the framework adapters.

The Lightning and Hugging Face adapters measure every training epoch (job-wide time and energy)
and see the validation metrics; :class:`TrialReporter` turns those into the client's calls: after
each epoch :meth:`BatchSizeOptimizer.on_epoch_end` with the trial's cumulative time (s), energy (J)
and the named metric (the answer says whether to stop training), and when training ends
:meth:`BatchSizeOptimizer.report` (or :meth:`BatchSizeOptimizer.abandon` when it failed).

The batch size itself has to be chosen before the data loader is built, so the training script
calls :meth:`BatchSizeOptimizer.get_batch_size` before ``fit`` / ``train``; :meth:`start` checks
that it did.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping

from zeus_core import _distributed as distributed
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer

__all__ = ["TrialReporter", "trial_reporter"]

logger = logging.getLogger(__name__)


class TrialReporter:
    """Feeds one training run's epochs to the current trial of a :class:`BatchSizeOptimizer`.

    Call every method on every rank (the client talks to the server from global rank 0 only and
    broadcasts the answer), with job-wide epoch figures.

    Args:
        optimizer: The client, with a trial started by ``get_batch_size()``.
        metric_name: Name of the validation metric compared with the job's target, as the
            framework reports it (e.g. ``"val_acc"`` in Lightning, ``"eval_accuracy"`` in
            Transformers).
        owner: Name of the adapter, for error messages.

    Raises:
        ZeusConfigError: ``optimizer`` is not a ``BatchSizeOptimizer`` or ``metric_name`` is empty.

    Example:
        >>> from zeus_core.training import TrialReporter
        >>> reporter = TrialReporter(bso, "val_acc", "my loop")  # bso: a BatchSizeOptimizer  # doctest: +SKIP
        >>> TrialReporter(object(), "val_acc", "my loop")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        zeus_core.exceptions.ZeusConfigError: my loop: batch_size_optimizer must be a ..., got object.
    """

    def __init__(self, optimizer: BatchSizeOptimizer, metric_name: str, owner: str) -> None:
        if not isinstance(optimizer, BatchSizeOptimizer):
            raise ZeusConfigError(
                f"{owner}: batch_size_optimizer must be a zeus_core.BatchSizeOptimizer, "
                f"got {type(optimizer).__name__}."
            )
        if not isinstance(metric_name, str) or not metric_name:
            raise ZeusConfigError(
                f"{owner}: metric_name={metric_name!r} must name the validation metric the job's target "
                "is for, e.g. metric_name='val_acc'."
            )
        self.optimizer = optimizer
        self.metric_name = metric_name
        self.owner = owner
        self.epochs = 0
        self.time_s = 0.0
        self.energy_j = 0.0
        self.last_metric: float | None = None
        self._active = False
        self._missing_warned = False

    def start(self) -> None:
        """Training begins: the trial's totals start from zero.

        Raises:
            ZeusConfigError: No trial was started with ``get_batch_size()`` before training.
        """
        if self.optimizer.batch_size is None:
            raise ZeusConfigError(
                f"{self.owner}: the batch-size optimizer has no trial. Call "
                "batch_size = bso.get_batch_size() before training and build the data loader with it."
            )
        self.epochs, self.time_s, self.energy_j = 0, 0.0, 0.0
        self.last_metric, self._active = None, True

    def epoch_end(self, time_s: float, energy_j: float, metrics: Mapping[str, Any]) -> bool:
        """Report an epoch; ``True`` means stop training now.

        Args:
            time_s: Time of this epoch, s (job-wide).
            energy_j: Energy of this epoch, J (job-wide).
            metrics: The framework's metrics after the epoch; ``metric_name`` is read from them when
                present (a metric not computed this epoch is reported as ``None``).

        Returns:
            Whether the server says stop: target reached, cost over ``beta_knob`` × the best, or
            ``max_epochs`` reached.
        """
        if not self._active:
            return False
        self.epochs += 1
        self.time_s += float(time_s)
        self.energy_j += float(energy_j)
        value = _as_float(metrics.get(self.metric_name))
        if value is None and not self._missing_warned:
            self._missing_warned = True
            logger.warning(
                "%s: no metric %r after epoch %d (metrics: %s); the trial cannot reach its target "
                "without it. Pass the name your validation logs.",
                self.owner,
                self.metric_name,
                self.epochs,
                ", ".join(sorted(metrics)) or "none",
            )
        if value is not None:
            self.last_metric = value
        return self.optimizer.on_epoch_end(self.epochs, self.time_s, self.energy_j, value)

    def end(self, failed: bool) -> None:
        """Training ended: report the trial's result, or abandon the trial after a failure.

        Under several processes a failed run leaves the trial to expire on the server (the
        client's broadcast is a collective, and other ranks may never get here).
        """
        if not self._active:
            return
        self._active = False
        if failed:
            if distributed.world_size() == 1:
                self.optimizer.abandon()
            return
        spec = self.optimizer.job_spec
        value = self.last_metric
        converged = value is not None and (
            value >= spec.target_metric if spec.higher_is_better else value <= spec.target_metric
        )
        self.optimizer.report(self.time_s, self.energy_j, value, converged=converged)


def _as_float(value: Any) -> float | None:
    """A metric value (number or one-element tensor) as a float; ``None`` when absent or not finite."""
    if value is None:
        return None
    item = getattr(value, "item", None)
    number = float(item() if callable(item) else value)
    return number if math.isfinite(number) else None


def trial_reporter(
    owner: str, optimizer: BatchSizeOptimizer | None, metric_name: str | None
) -> TrialReporter | None:
    """The reporter for an adapter's ``batch_size_optimizer=`` / ``metric_name=``; ``None`` without them.

    Raises:
        ZeusConfigError: One is given without the other, or either is malformed.
    """
    if optimizer is None and metric_name is None:
        return None
    if optimizer is None:
        raise ZeusConfigError(f"{owner}: metric_name={metric_name!r} needs batch_size_optimizer=.")
    return TrialReporter(optimizer, metric_name, owner)  # type: ignore[arg-type]  # checked there
