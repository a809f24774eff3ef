"""Accelerate adapter: measure a plain ``accelerate`` training loop with one call.

Accelerate has no callback system; the user owns the loop. :func:`attach` hooks the prepared
model(s) and optimizer(s) once, before the loop, and finds every boundary by itself:

* a **step** begins at the first training forward pass of an optimizer step (a forward
  pre-hook on the model) and ends when the wrapped torch optimizer really steps (its
  ``register_step_post_hook``). Under ``accelerator.accumulate(model)`` the inner optimizer
  only steps when ``accelerator.sync_gradients`` is true, so one step spans all micro-batches
  of an accumulation window. A step that the gradient scaler skipped (fp16 overflow) ends at the
  next training forward pass.
* an **epoch** ends with the step taken on the last batch of the prepared dataloader
  (``accelerator.gradient_state.end_of_dataloader``; Accelerate forces that step with its default
  ``sync_with_dataloader=True``) and the next one begins with the next training forward pass.
* **training** begins with the first training forward pass and ends when the ``with`` block
  (or :meth:`ZeusAccelerateHook.end`) ends, also on an exception.
* forward passes in eval mode (``model.eval()``) pause the windows until the next training
  forward pass, so evaluation is not counted unless ``include_validation=True``.

All measurement and cross-process aggregation happens in
:class:`~zeus_core.monitor.training.TrainingTracker`; results go to ``accelerator.log`` (every
tracker the user configured with ``log_with=``) and stay on the hook's attributes.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any, Sequence

if importlib.util.find_spec("accelerate") is None:  # pragma: no cover - exercised with accelerate hidden
    raise ModuleNotFoundError(
        "zeus_integrations.accelerate needs Hugging Face Accelerate. "
        "Install it with: pip install 'zeus-suite[hf]'",
        name="accelerate",
    )

from zeus_core.callback import TrainingProtocol
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.monitor.training import TrainingTracker, check_tracker_args, metric_key

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator

__all__ = ["ZeusAccelerateHook", "attach"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1


class ZeusAccelerateHook:
    """Measures a plain Accelerate loop; build it with :func:`attach`.

    Metric keys (units in the name), logged with ``accelerator.log`` on the main process and kept
    on the hook: each epoch ``energy/epoch_j`` (J), ``time/epoch_s`` (s), ``power/avg_w`` (W) and
    ``energy/epoch_<device>_j`` (J; ``rank1_gpu0`` across processes); every ``log_every_n_steps``
    optimizer steps ``energy/step_j``, ``time/step_s``, ``power/step_avg_w``; at the end
    ``energy/train_j``, ``time/train_s``, ``power/train_avg_w`` and ``energy/train_{gpu,cpu,dram}_j``.
    Every dictionary has ``simulated`` and ``estimated`` (1.0 or 0.0). Across processes the figures
    are the job's: energy summed over processes, time the longest.

    Args:
        accelerator: The ``accelerate.Accelerator`` running the loop.
        models: The prepared model, or several (e.g. a GAN's two networks).
        optimizers: The prepared optimizer, or several.
        zeus_optimizer: A training-protocol object (e.g. ``GlobalPowerLimitOptimizer``) or a
            sequence of them; they receive every event, steps being optimizer steps.
        monitor: The monitor to read; default: one for ``accelerator.device``'s GPU, plus the CPU
            packages and DRAM (where readable) on each machine's first process.
        log_every_n_steps: Also measure and log every N-th optimizer step (``None``: never).
        include_validation: Count eval-mode forward passes in the training windows.
        checkpoint: Register the hook with ``accelerator.register_for_checkpointing`` so
            ``save_state``/``load_state`` carry the totals and the optimizers' decisions. Attach
            before calling ``load_state``.

    Raises:
        ZeusConfigError: No model or optimizer was given, ``log_every_n_steps`` is not positive,
            or ``zeus_optimizer`` does not implement the training protocol.

    Example:
        >>> from accelerate import Accelerator
        >>> from zeus_integrations.accelerate import attach
        >>> accelerator = Accelerator(gradient_accumulation_steps=4)
        >>> model, optimizer, data = accelerator.prepare(model, optimizer, data)  # doctest: +SKIP
        >>> with attach(accelerator, model, optimizer) as zeus:  # doctest: +SKIP
        ...     for epoch in range(3):
        ...         for x, y in data:
        ...             with accelerator.accumulate(model):
        ...                 accelerator.backward(loss_fn(model(x), y))
        ...                 optimizer.step()
        ...                 optimizer.zero_grad()
        >>> zeus.train_metrics["energy/train_j"]  # doctest: +SKIP
        1234.5
    """

    def __init__(
        self,
        accelerator: Accelerator,
        models: torch.nn.Module | Sequence[torch.nn.Module],
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
        *,
        zeus_optimizer: TrainingProtocol | Sequence[TrainingProtocol] | None = None,
        monitor: ZeusMonitor | None = None,
        log_every_n_steps: int | None = None,
        include_validation: bool = False,
        checkpoint: bool = True,
    ) -> None:
        self.models = _as_list(models, "models")
        self.optimizers = _as_list(optimizers, "optimizers")
        protocol = check_tracker_args("attach(zeus_optimizer=...)", zeus_optimizer, log_every_n_steps)
        self.accelerator = accelerator
        self.zeus_optimizers = protocol
        self.monitor = monitor
        self.log_every_n_steps = log_every_n_steps
        self.include_validation = include_validation
        self.checkpoint = checkpoint
        self.tracker: TrainingTracker | None = None
        self.epoch_history: list[dict[str, float]] = []
        self.train_metrics: dict[str, float] = {}
        self._own_monitor = False
        self._handles: list[Any] = []
        self._pending_state: dict[str, Any] | None = None
        self._training = self._in_epoch = self._step_open = False
        self._window_done = False  # the open step's last micro-batch has run (sync_gradients was set)
        self._epoch_done = False  # ... and it was the last batch of the dataloader
        self._ended = False

    # -- lifetime -----------------------------------------------------------------------------------
    def attach(self) -> "ZeusAccelerateHook":
        """Build the monitor and tracker and register the hooks (idempotent). Returns ``self``."""
        if self._handles:
            return self
        if self.monitor is None:
            self.monitor = ZeusMonitor(
                gpu_indices=_gpus_of(self.accelerator.device),
                # CPU packages are read by one process per machine, so they are counted once.
                cpu_indices=None if self.accelerator.local_process_index == 0 else [],
            )
            self._own_monitor = True
        self.tracker = TrainingTracker(self.monitor, self.zeus_optimizers, self.log_every_n_steps)
        if self._pending_state is not None:
            self.tracker.load_state_dict(self._pending_state)
            self._pending_state = None
        for model in self.models:
            self._handles.append(model.register_forward_pre_hook(self._before_forward))
        for opt in self.optimizers:
            inner = getattr(opt, "optimizer", opt)  # AcceleratedOptimizer wraps the torch optimizer
            self._handles.append(inner.register_step_post_hook(self._after_optimizer_step))
        if self.checkpoint:
            self.accelerator.register_for_checkpointing(self)
        return self

    def detach(self) -> None:
        """Remove the hooks (measurement stops; call :meth:`end` first to close the run)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def end(self, failed: bool = False) -> dict[str, float]:
        """End training exactly once: close the windows, log the totals, remove the hooks.

        Args:
            failed: Training stopped by an exception (other processes may not get here, so
                the totals are this process's own and no collective is called).

        Returns:
            The whole run's metrics (also in :attr:`train_metrics`).
        """
        if self._ended:
            return self.train_metrics
        self._ended = True
        try:
            if self._training:
                self._training = False
                tracker = self._require_tracker()
                try:
                    if not failed:
                        self._close_step()
                        self._close_epoch()
                    tracker.on_train_end(failed=failed)
                finally:
                    self.train_metrics = dict(tracker.train_metrics)
                    if self.train_metrics:
                        self.accelerator.log(self.train_metrics, step=tracker.steps_done)
                        logger.info(
                            "Training %s %.1f J in %.2f s (%.1f W)%s",
                            "failed after" if failed else "used",
                            self.train_metrics[metric_key("energy", "train")],
                            self.train_metrics[metric_key("time", "train")],
                            self.train_metrics[metric_key("power", "train")],
                            " [simulated]" if self.train_metrics.get("simulated") else "",
                        )
        finally:
            self.detach()
            if self._own_monitor and self.monitor is not None:
                self.monitor.close()
        return self.train_metrics

    close = end

    def __enter__(self) -> "ZeusAccelerateHook":
        return self.attach()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.end(failed=exc_type is not None)

    # -- results --------------------------------------------------------------------------------------
    @property
    def epoch_metrics(self) -> dict[str, float]:
        """Metrics of the last finished epoch (empty before the first)."""
        return self.epoch_history[-1] if self.epoch_history else {}

    # -- hooks ------------------------------------------------------------------------------------------
    def _before_forward(self, module: torch.nn.Module, args: Any) -> None:
        if self._ended:
            return
        tracker = self._require_tracker()
        if not module.training:
            if self._training and not self.include_validation:
                tracker.pause()
            return
        if self._step_open and self._window_done and any(_step_skipped(o) for o in self.optimizers):
            self._close_step()  # the scaler skipped the optimizer step: the window still ended
            if self._epoch_done:
                self._close_epoch()
        if not self._training:
            self._training = True
            tracker.on_train_begin()
        tracker.resume()
        if not self._in_epoch:
            self._in_epoch = True
            tracker.on_epoch_begin()
        if not self._step_open:
            self._step_open = True
            tracker.on_step_begin()
        # Flags of the micro-batch about to run: accumulate() has set sync_gradients already.
        self._window_done = bool(self.accelerator.sync_gradients)
        self._epoch_done = self._window_done and bool(self.accelerator.gradient_state.end_of_dataloader)

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self._training or self._ended:
            return
        self._close_step()
        if self.accelerator.gradient_state.end_of_dataloader:
            self._close_epoch()

    def _close_step(self) -> None:
        if not self._step_open:
            return
        self._step_open = self._window_done = False
        tracker = self._require_tracker()
        tracker.on_step_end()
        if tracker.step_metrics:
            self.accelerator.log(dict(tracker.step_metrics), step=tracker.steps_done)

    def _close_epoch(self) -> None:
        if not self._in_epoch:
            return
        self._close_step()
        self._in_epoch = self._epoch_done = False
        tracker = self._require_tracker()
        tracker.on_epoch_end()
        metrics = dict(tracker.epoch_metrics)
        self.epoch_history.append(metrics)
        self.accelerator.log(metrics, step=tracker.steps_done)

    def _require_tracker(self) -> TrainingTracker:
        if self.tracker is None:
            raise ZeusConfigError(
                "ZeusAccelerateHook is not attached: use attach(accelerator, model, optimizer)."
            )
        return self.tracker

    # -- checkpointing (accelerator.save_state / load_state) --------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Totals so far (every process's) and the optimizers' states; every process calls it."""
        if self.tracker is None:
            return dict(self._pending_state or {})
        return {"version": _STATE_VERSION, "tracker": self.tracker.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the totals and restore the optimizers' states from :meth:`state_dict`."""
        if state.get("version") != _STATE_VERSION:
            logger.warning(
                "ZeusAccelerateHook state has version %r (expected %d); loading what matches.",
                state.get("version"),
                _STATE_VERSION,
            )
        if self.tracker is None:
            self._pending_state = state.get("tracker", {})
        else:
            self.tracker.load_state_dict(state.get("tracker", {}))


def attach(
    accelerator: Accelerator,
    models: torch.nn.Module | Sequence[torch.nn.Module],
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
    **options: Any,
) -> ZeusAccelerateHook:
    """Hook Zeus into an Accelerate loop; use the result as a context manager around the loop.

    Args:
        accelerator: The ``Accelerator``.
        models: The prepared model(s).
        optimizers: The prepared optimizer(s).
        **options: Keyword options of :class:`ZeusAccelerateHook` (``zeus_optimizer``,
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``checkpoint``).

    Returns:
        The attached hook; leaving its ``with`` block (or calling ``end()``) ends training.
    """
    return ZeusAccelerateHook(accelerator, models, optimizers, **options).attach()


def _as_list(objs: Any, name: str) -> list[Any]:
    items = list(objs) if isinstance(objs, (list, tuple)) else [objs]
    if not items:
        raise ZeusConfigError(f"attach({name}=[]): pass at least one prepared object.")
    return items


def _step_skipped(optimizer: Any) -> bool:
    return bool(getattr(optimizer, "step_was_skipped", False))


def _gpus_of(device: Any) -> list[int] | None:
    """GPU indices this process trains on: ``[]`` off-GPU, ``None`` (all visible) when unknown."""
    if getattr(device, "type", None) != "cuda":
        from zeus_core.device.simulated import simulated_stand_in

        # Off-GPU: none, unless ZEUS_SUITE_SIMULATE asks for a simulated GPU.
        return simulated_stand_in() if getattr(device, "type", None) is not None else None
    if device.index is not None:
        return [device.index]
    import torch

    return [torch.cuda.current_device()]
