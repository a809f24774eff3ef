"""The adapters' options, declared once: every adapter takes them as keyword arguments.

``ZeusCallback(log_every_n_steps=10)``, ``ZeusTrainerCallback(include_validation=True)``,
``ZeusFabricCallback(verbose=False)`` and ``attach(accelerator, model, optimizer, simulate="a40")``
take the same options, listed here once as :class:`TrainingOptions` (plus the batch-size trial's
two in :class:`TrialOptions`, for the adapters that see validation metrics). Type checkers read
them through ``**options: Unpack[TrainingOptions]``, so a misspelt or mistyped option is an error
in the editor; at run time :func:`check_options` names the bad one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, TypedDict, Union

from zeus_core.callback import TrainingProtocol
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer
from zeus_core.training._insights import EnergyInsights

__all__ = ["ZeusOptimizers", "TrainingOptions", "TrialOptions", "check_options"]

ZeusOptimizers = Union[TrainingProtocol, Sequence[TrainingProtocol], None]
"""What an adapter drives: a training-protocol object (a ``GlobalPowerLimitOptimizer``), several, or none.

Example:
    >>> from zeus_core import TrainingCallback
    >>> from zeus_core.training import ZeusOptimizers
    >>> drives: ZeusOptimizers = [TrainingCallback(), TrainingCallback()]
"""


class TrainingOptions(TypedDict, total=False):
    """The options every framework adapter takes, as keyword arguments.

    Attributes:
        monitor: The :class:`~zeus_core.monitor.ZeusMonitor` to read (e.g. the one a power-limit
            optimizer also uses). Default: one built for this process's devices when training
            begins (its GPU, and CPU/DRAM on each machine's first process).
        log_every_n_steps: Also measure and log every N-th optimizer step. Default ``None``: never.
        include_validation: Count evaluation stages inside the training and epoch windows.
            Default ``False``: they are measured on their own (``energy/val/...``).
        verbose: Show epoch and run summaries on the console (rank zero). Default ``True``.
        simulate: A GPU model (``"a40"``, ``"a100"``, ``"h100"``) to simulate when no GPU is
            found; its figures are marked ``simulated=1.0``. Default ``None``.
        insights: The energy insights added to the figures (J/sample and J/token, the forecast
            after the first epoch, carbon and cost) and where the run record for
            ``zeus-suite report`` goes: an :class:`~zeus_core.training.EnergyInsights`.
            Default ``None``: one with its defaults (carbon and price from the environment,
            the record in the framework's output folder). See docs/insights.md.

    Example:
        >>> from zeus_core.training import TrainingOptions
        >>> from zeus_core.training import EnergyInsights
        >>> options: TrainingOptions = {"log_every_n_steps": 10, "insights": EnergyInsights(total_epochs=10)}
        >>> sorted(TrainingOptions.__optional_keys__)[:3]
        ['include_validation', 'insights', 'log_every_n_steps']
    """

    monitor: ZeusMonitor | None
    log_every_n_steps: int | None
    include_validation: bool
    verbose: bool
    simulate: str | None
    insights: EnergyInsights | None


class TrialOptions(TrainingOptions, total=False):
    """:class:`TrainingOptions` plus a batch-size trial, for adapters that see validation metrics.

    Attributes:
        batch_size_optimizer: A :class:`~zeus_core.BatchSizeOptimizer` whose trial chose this run's
            batch size (call ``get_batch_size()`` before building the data loader). Each epoch is
            reported with the metric ``metric_name``; when the server says stop, training stops.
        metric_name: The validation metric the job's target is for, as the framework logs it
            (e.g. ``"val_acc"`` in Lightning, ``"eval_accuracy"`` in Hugging Face).

    Example:
        >>> from zeus_core.training import TrialOptions
        >>> "metric_name" in TrialOptions.__optional_keys__
        True
    """

    batch_size_optimizer: BatchSizeOptimizer | None
    metric_name: str | None


def check_options(who: str, options: Mapping[str, Any], allowed: type) -> None:
    """Raise :class:`TypeError` naming any option ``who`` does not take.

    Args:
        who: The adapter, for the message (e.g. ``"ZeusCallback"``).
        options: The keyword arguments it was given.
        allowed: The :class:`TypedDict` of its options.

    Example:
        >>> check_options("ZeusCallback", {"log_every_n_step": 5}, TrainingOptions)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: ZeusCallback(log_every_n_step=...): no such option; the options are ...
    """
    keys: frozenset[str] = getattr(allowed, "__optional_keys__", frozenset())
    unknown = [k for k in options if k not in keys]
    if unknown:
        raise TypeError(
            f"{who}({unknown[0]}=...): no such option; the options are {', '.join(sorted(keys))}."
        )
