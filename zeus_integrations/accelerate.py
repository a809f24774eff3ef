"""Accelerate adapter: measure a plain ``accelerate`` training loop with one call.

Accelerate has no callback system, so :func:`attach` hooks the prepared model(s) and optimizer(s)
once, before the loop, and finds steps, epochs and evaluation by itself (docs/integrations.md
says how); results go to ``accelerator.log`` and stay on the hook.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Sequence, cast

if importlib.util.find_spec("accelerate") is None:  # pragma: no cover - exercised with accelerate hidden
    raise ModuleNotFoundError(
        "zeus_integrations.accelerate needs Hugging Face Accelerate. "
        "Install it with: pip install 'zeus-suite[hf]'",
        name="accelerate",
    )

from typing_extensions import Unpack

from zeus_core.callback import TrainingProtocol
from zeus_core.exceptions import ZeusConfigError
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of
from zeus_core.training._options import TrainingOptions, ZeusOptimizers, check_options

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator  # type: ignore[import-untyped]

__all__ = ["ZeusAccelerateHook", "AccelerateOptions", "attach"]


class AccelerateOptions(TrainingOptions, total=False):
    """:class:`~zeus_core.training.TrainingOptions` plus what only the Accelerate hook takes.

    Attributes:
        zeus_optimizers: Training-protocol objects (e.g. a ``GlobalPowerLimitOptimizer``) that
            receive every event, steps being optimizer steps (the loop's torch optimizers are
            ``attach``'s third argument).
        checkpoint: Register the hook with ``accelerator.register_for_checkpointing`` so
            ``save_state``/``load_state`` carry the totals and the optimizers' decisions (attach
            before calling ``load_state``). Default ``True``.

    Example:
        >>> from zeus_integrations.accelerate import AccelerateOptions
        >>> options: AccelerateOptions = {"checkpoint": False, "log_every_n_steps": 10}
    """

    zeus_optimizers: ZeusOptimizers
    checkpoint: bool


class ZeusAccelerateHook(LifecycleResults):
    """Measures a plain Accelerate loop; build it with :func:`attach`.

    Logs each epoch's, evaluation's and the run's figures (``energy/epoch_j``, ``energy/val/total_j``,
    ``energy/train_j``, ...; docs/integrations.md lists them), with the energy insights (J/sample,
    J/token, forecast, carbon, cost: docs/insights.md), with ``accelerator.log`` on the main
    process; across processes they are the job's.

    Args:
        accelerator: The ``accelerate.Accelerator`` running the loop.
        models: The prepared model, or several (e.g. a GAN's two networks).
        optimizers: The prepared (torch) optimizer, or several.
        **options: The options every adapter takes (:class:`~zeus_core.training.TrainingOptions`:
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``verbose``, ``simulate``,
            ``insights``; give ``EnergyInsights(total_epochs=...)`` for the forecast, and the run
            record goes to the accelerator's ``project_dir`` by default), and
            :class:`AccelerateOptions`: ``zeus_optimizers`` (training-protocol objects, e.g. a
            ``GlobalPowerLimitOptimizer``) and ``checkpoint``.

    Raises:
        ZeusConfigError: No model or optimizer was given, ``log_every_n_steps`` is not positive,
            or ``zeus_optimizers`` does not implement the training protocol.
        TypeError: An option that does not exist.

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
        **options: Unpack[AccelerateOptions],
    ) -> None:
        check_options("attach", options, AccelerateOptions)
        self.models = _as_list(models, "models")
        self.optimizers = _as_list(optimizers, "optimizers")
        self.checkpoint = options.get("checkpoint", True)
        common = {k: v for k, v in options.items() if k not in ("checkpoint", "zeus_optimizers")}
        self.lifecycle = TrainingLifecycle(
            "attach", options.get("zeus_optimizers"), **cast(TrainingOptions, common)
        )
        self.accelerator = accelerator
        self._handles: list[Any] = []
        self._step_open = False
        self._window_done = False  # the open step's last micro-batch has run (sync_gradients was set)
        self._epoch_done = False  # ... and it was the last batch of the dataloader
        self._ended = False

    # -- results --------------------------------------------------------------------------------------
    @property
    def zeus_optimizers(self) -> list[TrainingProtocol]:
        """The protocol objects receiving every event."""
        return self.lifecycle.zeus_optimizers

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
    **options: Unpack[AccelerateOptions],
) -> ZeusAccelerateHook:
    """Hook Zeus into an Accelerate loop; use the result as a context manager around the loop.

    Args:
        accelerator: The ``Accelerator``.
        models: The prepared model(s).
        optimizers: The prepared (torch) optimizer(s).
        **options: The options of :class:`ZeusAccelerateHook` (:class:`AccelerateOptions`).

    Returns:
        The attached hook; leaving its ``with`` block (or calling ``end()``) ends training.

    Example:
        >>> import torch
        >>> from accelerate import Accelerator
        >>> from zeus_integrations.accelerate import attach
        >>> accelerator = Accelerator(cpu=True)
        >>> model = torch.nn.Linear(2, 1)
        >>> model, opt = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        >>> with attach(accelerator, model, opt, simulate="a40", verbose=False, checkpoint=False) as zeus:
        ...     for _ in range(3):
        ...         model(torch.ones(1, 2)).sum().backward()
        ...         opt.step()
        ...         opt.zero_grad()
        >>> zeus.lifecycle.steps_done, zeus.train_metrics["simulated"]
        (3, 1.0)
    """
    return ZeusAccelerateHook(accelerator, models, optimizers, **options).attach()


def _as_list(objs: Any, name: str) -> list[Any]:
    items = list(objs) if isinstance(objs, (list, tuple)) else [objs]
    if not items:
        raise ZeusConfigError(f"attach({name}=[]): pass at least one prepared object.")
    return items


def _step_skipped(optimizer: Any) -> bool:
    return bool(getattr(optimizer, "step_was_skipped", False))
