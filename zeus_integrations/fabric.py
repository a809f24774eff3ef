"""Lightning Fabric adapter: ``Fabric(callbacks=[ZeusFabricCallback()])`` and ``fabric.call(...)``.

Fabric loops are written by the user; Fabric's own callback mechanism is ``fabric.call(name,
...)``, which calls the method of that name on every callback that has one. :class:`ZeusFabricCallback`
has methods named like Lightning's hooks and maps them onto a
:class:`~zeus_core.training._lifecycle.TrainingLifecycle`:

* ``fabric.call("on_train_start", fabric=fabric)`` … ``fabric.call("on_train_end")``: the run
  (``on_exception`` ends it as failed; a run left open is ended when the callback is collected or
  the process exits, so protocol objects always get ``on_train_end``);
* ``on_train_epoch_start`` / ``on_train_epoch_end``: an epoch;
* ``on_train_batch_start`` / ``on_train_batch_end``: an optimizer step (pass ``steps=k`` to
  ``on_train_batch_end`` when a batch made k optimizer steps, or ``steps=0`` for an accumulation
  micro-batch; pass ``batch=batch`` too for J/sample and J/token);
* ``on_validation_start`` / ``on_validation_end`` (also ``on_test_*``, ``on_predict_*``): a stage
  (``energy/val/...``), excluded from training figures unless ``include_validation=True``.

Results go to ``fabric.log_dict`` (every logger given to ``Fabric(loggers=...)``) and stay on the
callback. ``fabric.save(path, {"zeus": callback, ...})`` and ``fabric.load`` carry the totals.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

from zeus_core.callback import TrainingProtocol
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.training._insights import EnergyInsights
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of

if TYPE_CHECKING:
    from lightning.fabric import Fabric

__all__ = ["ZeusFabricCallback"]


class ZeusFabricCallback(LifecycleResults):
    """Measures a Lightning Fabric loop through ``fabric.call(...)``.

    With no ``monitor`` it measures the GPU of ``fabric.device`` and, on each machine's first
    process (``fabric.local_rank == 0``), CPU packages and DRAM where readable. Across processes
    the figures are the job's: energy summed over processes, time the longest; every process must
    make the same ``fabric.call`` calls (they sum over processes with collectives).

    Metric keys (units in the name): each epoch ``energy/epoch_j`` (J), ``time/epoch_s`` (s),
    ``power/avg_w`` (W), ``energy/epoch_<device>_j`` (J) and each protocol object's ``metrics()``;
    each stage ``energy/<stage>/total_j``, ``time/<stage>/total_s``, ``power/<stage>/avg_w``;
    every ``log_every_n_steps`` steps ``energy/step_j``, ``time/step_s``, ``power/step_avg_w``; at
    the end ``energy/train_j``, ``time/train_s``, ``power/train_avg_w``,
    ``energy/train_{gpu,cpu,dram}_j``; always ``simulated`` and ``estimated`` (1.0 or 0.0).

    Args:
        optimizer: A training-protocol object (e.g. ``GlobalPowerLimitOptimizer``) or a sequence.
        monitor: The monitor to read; default: one built at ``on_train_start`` for this process.
        log_every_n_steps: Also measure and log every N-th step (``None``: never).
        include_validation: Count stages inside the training windows.
        verbose: Show epoch and run summaries on the console (rank zero).
        simulate: Simulate this GPU model (``"a40"``, ``"a100"``, ``"h100"``) when no GPU is found.
        insights: Carbon region and price, the run's length (``total_epochs=``) for the forecast,
            run-record folder (default: the first logger's ``log_dir``).

    Raises:
        ZeusConfigError: A bad optimizer, step count or ``simulate`` name.

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

    def __init__(
        self,
        optimizer: TrainingProtocol | Sequence[TrainingProtocol] | None = None,
        *,
        monitor: ZeusMonitor | None = None,
        log_every_n_steps: int | None = None,
        include_validation: bool = False,
        verbose: bool = True,
        simulate: str | None = None,
        insights: EnergyInsights | None = None,
    ) -> None:
        self.lifecycle = TrainingLifecycle(
            "ZeusFabricCallback",
            optimizer,
            monitor=monitor,
            log_every_n_steps=log_every_n_steps,
            include_validation=include_validation,
            verbose=verbose,
            simulate=simulate,
            insights=insights,
        )
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
