"""Accelerate adapter: measure a plain ``accelerate`` training loop with one call.

Accelerate has no callback system; the user owns the loop. :func:`attach` hooks the prepared
model(s) and optimizer(s) once, before the loop, finds every boundary by itself and maps it onto
a :class:`~zeus_core.training._lifecycle.TrainingLifecycle`:

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
* forward passes in eval mode (``model.eval()``) open a validation stage (``energy/val/...``)
  that ends at the next training forward pass (or the end), so evaluation is measured on its own
  and not counted in training unless ``include_validation=True``.

Results go to ``accelerator.log`` (every tracker the user configured with ``log_with=``) and stay
on the hook's attributes.
"""

from __future__ import annotations

import importlib.util
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
from zeus_core.training._insights import EnergyInsights
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator  # type: ignore[import-untyped]

__all__ = ["ZeusAccelerateHook", "attach"]


class ZeusAccelerateHook(LifecycleResults):
    """Measures a plain Accelerate loop; build it with :func:`attach`.

    Metric keys (units in the name), logged with ``accelerator.log`` on the main process and kept
    on the hook: each epoch ``energy/epoch_j`` (J), ``time/epoch_s`` (s), ``power/avg_w`` (W),
    ``energy/epoch_<device>_j`` (J; ``rank1_gpu0`` across processes) and each protocol object's
    ``metrics()``; each evaluation ``energy/val/total_j``, ``time/val/total_s``,
    ``power/val/avg_w``; every ``log_every_n_steps`` optimizer steps ``energy/step_j``,
    ``time/step_s``, ``power/step_avg_w``; at the end ``energy/train_j``, ``time/train_s``,
    ``power/train_avg_w`` and ``energy/train_{gpu,cpu,dram}_j``. Every dictionary has
    ``simulated`` and ``estimated`` (1.0 or 0.0), and the energy insights (J/sample, J/token,
    forecast, carbon, cost; see :class:`~zeus_core.training._insights.EnergyInsights`). Across
    processes the figures are the job's:
    energy summed over processes, time the longest; CPU and DRAM are read by each machine's first
    process only.

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
        verbose: Show epoch and run summaries on the console (main process).
        simulate: Simulate this GPU model (``"a40"``, ``"a100"``, ``"h100"``) when no GPU is found.
        insights: Carbon region and price, the run's length (``total_epochs=``) for the forecast,
            run-record folder (default: the accelerator's ``project_dir``).

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
        verbose: bool = True,
        simulate: str | None = None,
        insights: EnergyInsights | None = None,
    ) -> None:
        self.models = _as_list(models, "models")
        self.optimizers = _as_list(optimizers, "optimizers")
        self.lifecycle = TrainingLifecycle(
            "attach(zeus_optimizer=...)",
            zeus_optimizer,
            monitor=monitor,
            log_every_n_steps=log_every_n_steps,
            include_validation=include_validation,
            verbose=verbose,
            simulate=simulate,
            insights=insights,
        )
        self.accelerator = accelerator
        self.checkpoint = checkpoint
        self._handles: list[Any] = []
        self._step_open = False
        self._window_done = False  # the open step's last micro-batch has run (sync_gradients was set)
        self._epoch_done = False  # ... and it was the last batch of the dataloader
        self._ended = False

    # -- results --------------------------------------------------------------------------------------
    @property
    def zeus_optimizers(self) -> list[TrainingProtocol]:
        """The protocol objects receiving every event."""
        return self.lifecycle.optimizers

    @property
    def epoch_metrics(self) -> dict[str, float]:
        """Metrics of the last finished epoch (empty before the first)."""
        return self.epoch_history[-1] if self.epoch_history else {}

    # -- lifetime -----------------------------------------------------------------------------------
    def attach(self) -> ZeusAccelerateHook:
        """Build the monitor and tracker and register the hooks (idempotent). Returns ``self``."""
        if self._handles:
            return self
        self.lifecycle.setup(
            gpu_indices_of([self.accelerator.device]), rank_on_machine=self.accelerator.local_process_index
        )
        for model in self.models:
            self._handles.append(model.register_forward_pre_hook(self._before_forward, with_kwargs=True))
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
            if not failed:
                self._end_stage()
                self._close_step()
                self._close_epoch()
            totals = self.lifecycle.abort() if failed else self.lifecycle.end_train()
            if totals:
                self.accelerator.log(totals, step=self.lifecycle.steps_done)
        finally:
            self.detach()
        return self.train_metrics

    close = end

    def __enter__(self) -> ZeusAccelerateHook:
        return self.attach()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.end(failed=exc_type is not None)

    # -- hooks ------------------------------------------------------------------------------------------
    def _before_forward(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if self._ended:
            return
        if not module.training:
            self.lifecycle.begin_stage("val")
            return
        self._end_stage()
        if self._step_open and self._window_done and any(_step_skipped(o) for o in self.optimizers):
            self._close_step()  # the scaler skipped the optimizer step: the window still ended
            if self._epoch_done:
                self._close_epoch()
        if not self.lifecycle.training:
            self.lifecycle.begin_train()
            self.lifecycle.plan(run_dir=getattr(self.accelerator, "project_dir", None))
        self.lifecycle.begin_epoch()
        if not self._step_open:
            self._step_open = True
            self.lifecycle.begin_step()
        self.lifecycle.count_batch(args=args, kwargs=kwargs)
        # Flags of the micro-batch about to run: accumulate() has set sync_gradients already.
        self._window_done = bool(self.accelerator.sync_gradients)
        self._epoch_done = self._window_done and bool(self.accelerator.gradient_state.end_of_dataloader)

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.lifecycle.training or self._ended:
            return
        self._close_step()
        if self.accelerator.gradient_state.end_of_dataloader:
            self._close_epoch()

    def _end_stage(self) -> None:
        tracker = self.lifecycle.tracker
        if tracker is not None and tracker.stage_open:
            metrics = self.lifecycle.end_stage("val")
            self.accelerator.log(metrics, step=self.lifecycle.steps_done)

    def _close_step(self) -> None:
        if not self._step_open:
            return
        self._step_open = self._window_done = False
        metrics = self.lifecycle.end_step(1)
        if metrics:
            self.accelerator.log(metrics, step=self.lifecycle.steps_done)

    def _close_epoch(self) -> None:
        if not self.lifecycle.in_epoch:
            return
        self._close_step()
        self._epoch_done = False
        metrics = self.lifecycle.end_epoch()
        self.accelerator.log(metrics, step=self.lifecycle.steps_done)

    # -- checkpointing (accelerator.save_state / load_state) --------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Totals so far (every process's), epoch history and optimizer states; every process calls it."""
        return self.lifecycle.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the totals and restore the optimizers' states from :meth:`state_dict` (any version)."""
        self.lifecycle.load_state_dict(state)


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
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``checkpoint``,
            ``verbose``, ``simulate``, ``insights``).

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
