"""Lightning Fabric adapter: ``Fabric(callbacks=[ZeusFabricCallback()])`` and ``fabric.call(...)``.

Fabric's callbacks are methods that ``fabric.call(name, ...)`` calls by name; :class:`ZeusFabricCallback`
has methods named like Lightning's hooks and maps them onto a
:class:`~zeus_core.training.TrainingLifecycle` (docs/integrations.md lists them). Pass
``batch=batch`` to ``on_train_batch_end`` for J/sample and J/token (docs/insights.md).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from typing_extensions import Unpack

from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of
from zeus_core.training._options import TrainingOptions, ZeusOptimizers, check_options

if TYPE_CHECKING:
    from lightning.fabric import Fabric

__all__ = ["ZeusFabricCallback"]


class ZeusFabricCallback(LifecycleResults):
    """Measures a Lightning Fabric loop through ``fabric.call(...)``.

    It measures ``fabric.device``'s GPU (and CPU/DRAM on each machine's first process) and logs the
    epoch, stage, step and run figures (docs/integrations.md lists the keys) with ``fabric.log_dict``;
    every process must make the same calls (they sum over processes).

    Args:
        zeus_optimizers: A training-protocol object (e.g. ``GlobalPowerLimitOptimizer``) or a sequence.
        **options: The options every adapter takes (:class:`~zeus_core.training.TrainingOptions`:
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``verbose``, ``simulate``,
            ``insights``; the run record goes to the first logger's ``log_dir`` by default).

    Raises:
        ZeusConfigError: A bad optimizer, step count or ``simulate`` name.
        TypeError: An option that does not exist.

    Example:
        >>> from lightning.fabric import Fabric
        >>> from zeus_integrations.fabric import ZeusFabricCallback
        >>> zeus = ZeusFabricCallback(simulate="a40")
        >>> fabric = Fabric(accelerator="cpu", devices=1, callbacks=[zeus])
        >>> fabric.call("on_train_start", fabric=fabric)
        >>> for epoch in range(2):
        ...     fabric.call("on_train_epoch_start")
        ...     for batch in range(3):
        ...         fabric.call("on_train_batch_start")
        ...         fabric.call("on_train_batch_end")  # after optimizer.step()
        ...     fabric.call("on_train_epoch_end")
        >>> fabric.call("on_train_end")
        >>> zeus.tracker.steps_done
        6
    """

    def __init__(self, zeus_optimizers: ZeusOptimizers = None, **options: Unpack[TrainingOptions]) -> None:
        check_options("ZeusFabricCallback", options, TrainingOptions)
        self.lifecycle = TrainingLifecycle("ZeusFabricCallback", zeus_optimizers, **options)
        self._fabric: Callable[[], Fabric | None] = lambda: None
        self._step_open = False

    # -- set-up ---------------------------------------------------------------------------------------
    def setup(self, fabric: Fabric | None = None) -> None:
        """Build the monitor for ``fabric``'s device (idempotent; the first event calls it).

        Args:
            fabric: The Fabric running the loop; its loggers get the figures. Without it, the
                current CUDA device (if any) is measured and nothing is logged.
        """
        if fabric is not None:
            self._fabric = weakref.ref(fabric)
        if self.lifecycle.tracker is not None:
            return
        fabric = self._fabric()
        if fabric is not None:
            self.lifecycle.setup(gpu_indices_of([fabric.device]), rank_on_machine=fabric.local_rank)
        else:
            self.lifecycle.setup(_current_gpus())

    # -- training events ------------------------------------------------------------------------------
    def on_train_start(self, fabric: Fabric | None = None) -> None:
        """Training begins (call it with ``fabric=fabric``)."""
        self.setup(fabric)
        self._step_open = False
        self.lifecycle.begin_train()
        loggers = getattr(self._fabric(), "loggers", None) or [None]
        self.lifecycle.plan(run_dir=getattr(loggers[0], "log_dir", None))

    def on_train_epoch_start(self) -> None:
        """An epoch begins."""
        self.lifecycle.begin_epoch()

    def on_train_batch_start(self) -> None:
        """A batch begins; it opens an optimizer step unless one is open (accumulation)."""
        if self.lifecycle.training and not self._step_open:
            self._step_open = True
            self.lifecycle.begin_step()

    def on_train_batch_end(self, steps: int = 1, batch: Any = None) -> None:
        """A batch ended after ``steps`` optimizer steps (``0``: a micro-batch of an accumulation).

        Pass the ``batch`` to count its samples and tokens (J/sample, J/token).
        """
        if batch is not None:
            self.lifecycle.count_batch(batch)
        if self._step_open and steps > 0:
            self._step_open = False
            self._log(self.lifecycle.end_step(steps))

    def on_train_epoch_end(self) -> None:
        """An epoch ends (a collective across processes)."""
        if self._step_open:
            self._step_open = False
            self._log(self.lifecycle.end_step(0))
        self._log(self.lifecycle.end_epoch())

    def on_train_end(self) -> None:
        """Training ends (a collective across processes)."""
        self._step_open = False
        self._log(self.lifecycle.end_train())

    def on_exception(self, exception: BaseException | None = None) -> None:
        """Training failed: end the run with this process's own figures (no collective)."""
        self._step_open = False
        self._log(self.lifecycle.abort())

    # -- stages ---------------------------------------------------------------------------------------
    def _begin(self, stage: str) -> None:
        self.setup()
        self.lifecycle.begin_stage(stage)

    def on_validation_start(self) -> None:
        """A validation run begins."""
        self._begin("val")

    def on_validation_end(self) -> None:
        """A validation run ends (a collective across processes)."""
        self._log(self.lifecycle.end_stage("val"))

    def on_test_start(self) -> None:
        """A test run begins."""
        self._begin("test")

    def on_test_end(self) -> None:
        """A test run ends (a collective across processes)."""
        self._log(self.lifecycle.end_stage("test"))

    def on_predict_start(self) -> None:
        """A prediction run begins."""
        self._begin("predict")

    def on_predict_end(self) -> None:
        """A prediction run ends (a collective across processes)."""
        self._log(self.lifecycle.end_stage("predict"))

    # -- checkpointing (fabric.save / fabric.load call these on every process) ------------------------
    def state_dict(self) -> dict[str, Any]:
        """Versioned totals, epoch history and protocol-object states of every process."""
        return self.lifecycle.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (also before ``on_train_start``)."""
        self.lifecycle.load_state_dict(state)

    # -- helpers --------------------------------------------------------------------------------------
    def _log(self, metrics: dict[str, float]) -> None:
        fabric = self._fabric()
        if metrics and fabric is not None:
            fabric.log_dict(metrics, step=self.lifecycle.steps_done)


def _current_gpus() -> list[int]:
    """The current CUDA device, when CUDA is in use; ``[]`` otherwise."""
    import torch

    return [torch.cuda.current_device()] if torch.cuda.is_available() else []
