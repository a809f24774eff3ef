"""``HFGlobalPowerLimitOptimizer``: the power-limit optimizer as a Hugging Face ``TrainerCallback``.

Zeus's name and arguments: ``HFGlobalPowerLimitOptimizer(monitor, optimum_selector, wait_steps,
warmup_steps, profile_steps, pl_step, profile_path)``, plus the keyword arguments of
:class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`, which does all the work: this
class only forwards the Trainer's events to it (optimizer steps, so gradient accumulation is
handled) and adds its :meth:`~GlobalPowerLimitOptimizer.metrics` (``power/limit_w``, the limit in
force, W) to every log entry, ``state.log_history`` included.

Failures: Transformers calls no callback when ``train()`` raises, so the optimizer's own exit and
SIGINT/SIGTERM handlers put the original limits back (as they do for Zeus's plain loop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer, OptimumSelector

try:
    from transformers.trainer_callback import TrainerCallback, TrainerControl, TrainerState
    from transformers.training_args import TrainingArguments
except ModuleNotFoundError as _missing:  # pragma: no cover - depends on the installed extras
    if (_missing.name or "").split(".")[0] not in {"transformers", "torch", "accelerate"}:
        raise
    raise ModuleNotFoundError(
        "zeus_integrations.hf_power_limit needs Hugging Face Transformers (and torch): "
        "pip install 'zeus-suite[hf]'",
        name=_missing.name,
    ) from _missing

__all__ = ["HFGlobalPowerLimitOptimizer"]


class HFGlobalPowerLimitOptimizer(TrainerCallback):
    """Finds the best GPU power limit in the first steps of a ``Trainer`` run and keeps it set.

    Args:
        monitor: Measures this process's GPUs; their limit is the one set.
        optimum_selector: What "best" means (default: ``ZeusCost(0.5)``, as in Zeus).
        wait_steps: Steps before profiling starts, >= 0.
        warmup_steps: Unmeasured steps after each limit change, >= 0.
        profile_steps: Most measured steps per limit in the sweep, >= 1.
        pl_step: Spacing of the profiled limits, W.
        profile_path: JSON profile to reuse and to write (``None``: neither).
        **kwargs: Further keyword arguments of :class:`GlobalPowerLimitOptimizer`
            (``early_stopping``, ``min_sample_s``, ``budget_steps``, ...).

    Attributes:
        optimizer: The :class:`GlobalPowerLimitOptimizer` doing the work.

    Example:
        >>> trainer = Trainer(model, args, callbacks=[HFGlobalPowerLimitOptimizer(monitor)])  # doctest: +SKIP
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: float = 25,
        profile_path: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        self.optimizer = GlobalPowerLimitOptimizer(
            monitor,
            optimum_selector,
            wait_steps,
            warmup_steps,
            profile_steps,
            pl_step,
            profile_path,
            **kwargs,
        )

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Set the top limit and start counting steps."""
        self.optimizer.on_train_begin()

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Mark the beginning of an epoch."""
        self.optimizer.on_epoch_begin()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Mark the beginning of an optimizer step (profiling advances here)."""
        self.optimizer.on_step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Mark the end of an optimizer step."""
        self.optimizer.on_step_end()

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Pause a measurement at the epoch boundary (it continues next epoch)."""
        self.optimizer.on_epoch_end()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Put every GPU's original limit back."""
        self.optimizer.on_train_end()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Add ``power/limit_w`` (W) to the entry being logged and to ``state.log_history``.

        The Trainer copies an entry into ``log_history`` before callbacks see it, so the copy is
        updated too (only while training: after ``on_train_end`` the limit is no longer ours).
        """
        if not self.optimizer.active:
            return
        figures = self.optimizer.metrics()
        if logs is not None:
            logs.update(figures)
        if state.log_history:
            state.log_history[-1].update(figures)
