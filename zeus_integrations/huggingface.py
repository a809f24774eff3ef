"""Hugging Face adapter: :class:`ZeusTrainerCallback` for ``transformers.Trainer`` and TRL's ``SFTTrainer``.

The callback maps Trainer events onto a :class:`~zeus_core.training.TrainingLifecycle` using only
Transformers' callback mechanism and a forward pre-hook on the model; docs/integrations.md
describes where each entry goes, failures, checkpoints and the batch-size trial.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.callback import TrainingProtocol
from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of
from zeus_core.training._options import TrialOptions, ZeusOptimizers

try:
    from transformers.trainer_callback import ExportableState, TrainerCallback, TrainerControl, TrainerState
    from transformers.training_args import TrainingArguments
    from typing_extensions import Unpack, override
except ModuleNotFoundError as _missing:  # pragma: no cover - exercised in a subprocess test
    if (_missing.name or "").split(".")[0] not in {
        "transformers",
        "torch",
        "accelerate",
        "typing_extensions",
    }:
        raise
    raise ModuleNotFoundError(
        "zeus_integrations.huggingface needs Hugging Face Transformers (and torch): "
        "pip install 'zeus-suite[hf]'",
        name=_missing.name,
    ) from _missing

if TYPE_CHECKING:
    from transformers import Trainer

__all__ = ["ZeusTrainerCallback", "HFGlobalPowerLimitOptimizer"]


_SUMMARY_KEYS = frozenset({"train_runtime", "train_loss"})  # only in the Trainer's end-of-training log


class ZeusTrainerCallback(TrainerCallback, ExportableState, LifecycleResults):
    """Measures time and energy of a Hugging Face ``Trainer`` / TRL ``SFTTrainer`` run.

    It measures the GPUs this process trains on (and CPU/DRAM on each machine's first process) and
    appends each epoch's, stage's and the run's figures (``energy/epoch_j``, ``energy/train_j``, ...;
    docs/integrations.md lists them), with the energy insights (J/sample, J/token from the training
    batches' ``input_ids``, forecast, carbon, cost: docs/insights.md), to ``state.log_history`` and
    the metrics ``train()`` returns. Steps are optimizer steps; the totals survive checkpoints.
    :meth:`attach` also sends the entries to ``report_to`` integrations.

    Args:
        zeus_optimizers: A protocol object (``on_train_begin`` ... ``on_train_end``), e.g. a
            ``GlobalPowerLimitOptimizer``, or a sequence of them. Each receives every event.
        **options: The options every adapter takes (:class:`~zeus_core.training.TrainingOptions`:
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``verbose``, ``simulate``,
            ``insights``; the run record goes to ``args.output_dir`` by default) and a batch-size
            trial's (:class:`~zeus_core.training.TrialOptions`: ``batch_size_optimizer``,
            ``metric_name`` as the Trainer names it, e.g. ``"eval_accuracy"``); a failed
            ``train()`` abandons the trial.

    Raises:
        ZeusConfigError: ``zeus_optimizers`` does not implement the protocol, ``log_every_n_steps``
            < 1, ``simulate`` names no known GPU, or ``batch_size_optimizer`` comes without
            ``metric_name`` (or the reverse).
        TypeError: An option that does not exist.

    Example:
        >>> from transformers import Trainer, TrainingArguments  # doctest: +SKIP
        >>> zeus = ZeusTrainerCallback()
        >>> args = TrainingArguments("out", num_train_epochs=2)  # doctest: +SKIP
        >>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[zeus])  # doctest: +SKIP
        >>> result = trainer.train()  # doctest: +SKIP
        >>> result.metrics["energy/train_j"], zeus.epoch_history[0]["energy/epoch_j"]  # doctest: +SKIP
    """

    def __init__(self, zeus_optimizers: ZeusOptimizers = None, **options: Unpack[TrialOptions]) -> None:
        self.lifecycle = TrainingLifecycle(type(self).__name__, zeus_optimizers, **options)
        self._trainer_ref: Callable[[], Trainer | None] = lambda: None
        self._hooked: Callable[[], Any] = lambda: None  # the model carrying our forward pre-hook
        self._hook: Any = None
        self._args: TrainingArguments | None = None
        self._snapshot: dict[str, Any] | None = None  # all ranks' states at the last save point
        self._unreported_epoch: dict[str, float] | None = None  # waiting for its evaluation
        self._last_eval: dict[str, Any] = {}  # metrics of the latest evaluation
        self._resume_state: dict[str, Any] | None = None  # set by Transformers when it rebuilds us

    # -- results ----------------------------------------------------------------------------------
    @property
    def zeus_optimizers(self) -> list[TrainingProtocol]:
        """The protocol objects receiving every event."""
        return self.lifecycle.zeus_optimizers

    # -- binding to a trainer ------------------------------------------------------------------
    def attach(self, trainer: Trainer) -> ZeusTrainerCallback:
        """Add this callback to ``trainer`` (if absent) and log its entries with ``Trainer.log``.

        Entries logged that way also reach the ``report_to`` integrations, which Transformers
        calls before user callbacks. Returns this callback.
        """
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        self._trainer_ref = weakref.ref(trainer)
        self._hook_model(trainer.model)
        return self

    @property
    def trainer(self) -> Trainer | None:
        """The trainer bound with :meth:`attach`, or ``None``."""
        return self._trainer_ref()

    def _hook_model(self, model: Any) -> None:
        """Watch ``model``'s eval-mode forward passes (evaluation and prediction begin there)."""
        if model is None or self._hooked() is model or not hasattr(model, "register_forward_pre_hook"):
            return
        if self._hook is not None:
            self._hook.remove()
        me = weakref.ref(self)

        def before_forward(module: Any, args: Any, kwargs: Any) -> None:
            cb = me()
            if cb is not None and not module.training:
                cb._begin_stage()
            elif cb is not None:
                cb.lifecycle.count_batch(args=args, kwargs=kwargs)  # samples and tokens of a micro-batch

        self._hook = model.register_forward_pre_hook(before_forward, with_kwargs=True)
        self._hooked = weakref.ref(model)

    def _setup(self, args: TrainingArguments, model: Any) -> None:
        self._args = args
        self._hook_model(model)
        device_map = getattr(model, "hf_device_map", None)
        places = list(device_map.values()) if isinstance(device_map, dict) else []
        self.lifecycle.setup(gpu_indices_of([args.device, *places]), rank_on_machine=args.local_process_index)

    # -- Trainer events --------------------------------------------------------------------------
    @override
    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._args = args
        self._hook_model(kwargs.get("model"))

    @override
    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._setup(args, kwargs.get("model"))
        if self._resume_state is not None:  # only Transformers sets it, when it rebuilt this callback
            console.warn(
                "Transformers rebuilt ZeusTrainerCallback from the checkpoint "
                "(restore_callback_states_from_checkpoint=True): the monitor and optimizer given to the "
                "original callback are not used. Leave that option False; the callback restores its totals."
            )
        self.lifecycle.fresh_run()  # aborts a run the last train() left open (it failed, or a retry)
        saved = self._saved_state(state)
        if saved is not None and state.global_step > 0:
            self.lifecycle.load_state_dict(saved)
        self._snapshot, self._unreported_epoch, self._last_eval = None, None, {}
        self._warn_unbound_integrations(args)
        self.lifecycle.begin_train()
        self.lifecycle.plan(state.num_train_epochs, state.max_steps, args.output_dir)

    @override
    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._end_stage_left_open(state)
        self.lifecycle.begin_epoch()

    @override
    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._end_stage_left_open(state)
        self.lifecycle.begin_step()

    @override
    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self.lifecycle.training:
            return
        self._publish(self.lifecycle.end_step(1), state)
        self._before_log_save_evaluate(control)

    @override
    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self.lifecycle.training:
            return
        epoch = self.lifecycle.end_epoch()
        self._publish(epoch, state)
        if epoch and self.lifecycle.trial_reporter is not None:
            self._unreported_epoch = epoch
            if not control.should_evaluate:  # no evaluation follows: report with the latest one
                self._report_epoch(control)
        self._before_log_save_evaluate(control)

    @override
    def on_prediction_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._args is None:  # added after the Trainer was built, first seen here
            self._args = args
        self._hook_model(kwargs.get("model"))
        self._begin_stage()  # no-op once the stage is open

    @override
    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        metrics: dict[str, float] | None = kwargs.get("metrics")  # what trainer.evaluate() returns
        stage = self._end_stage("val", state)
        if metrics is not None:
            self._last_eval = dict(metrics)
            metrics.update(stage)  # what trainer.evaluate() returns
        if self.lifecycle.training and self._unreported_epoch is not None:
            self._report_epoch(control)

    @override
    def on_predict(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        stage = self._end_stage("predict", state)
        if metrics is not None:
            metrics.update(stage)  # PredictionOutput.metrics

    @override
    def on_log(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        logs: dict[str, float] | None = kwargs.get("logs")  # the entry being logged
        if logs is not None and self.lifecycle.training and _SUMMARY_KEYS <= logs.keys():
            totals = self._finish()
            self._publish(totals, state)
            logs.update(totals)  # this dict is the metrics trainer.train() returns

    @override
    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.lifecycle.training:  # ended without the Trainer's summary log (e.g. a pruned trial)
            self._publish(self._finish(), state)

    # -- checkpoints -------------------------------------------------------------------------------
    @override
    def state(self) -> dict[str, Any]:
        """Saved in ``trainer_state.json``: JSON-safe totals and protocol-object states of every rank."""
        return {
            "args": {
                "log_every_n_steps": self.lifecycle.log_every_n_steps,
                "include_validation": self.lifecycle.include_validation,
            },
            "attributes": {"_resume_state": self._checkpoint_state()},
        }

    def _checkpoint_state(self) -> dict[str, Any] | None:
        if self.lifecycle.tracker is None:
            return self._resume_state
        if distributed.world_size() == 1:
            return self.lifecycle.state_dict()
        return self._snapshot  # gathered from every rank at the save decision (only savers call state())

    def _saved_state(self, state: TrainerState) -> dict[str, Any] | None:
        if self._resume_state is not None:
            return self._resume_state
        every: Any = state.stateful_callbacks or {}
        stored = every.get(type(self).__name__) if isinstance(every, dict) else None
        if isinstance(stored, list):  # several callbacks of this class: ours is at our position
            trainer = self._trainer_ref()
            mine = (
                [cb for cb in trainer.callback_handler.callbacks if type(cb) is type(self)] if trainer else []
            )
            position = next((i for i, cb in enumerate(mine) if cb is self), 0)
            stored = stored[position] if position < len(stored) else None
        return (stored or {}).get("attributes", {}).get("_resume_state")

    # -- helpers -------------------------------------------------------------------------------------
    def _begin_stage(self) -> None:
        if self.lifecycle.tracker is None and self._args is not None:
            self._setup(self._args, self._hooked())
        tracker = self.lifecycle.tracker
        if tracker is not None and not tracker.stage_open:
            self.lifecycle.begin_stage()

    def _end_stage(self, stage: str, state: TrainerState) -> dict[str, float]:
        metrics = self.lifecycle.end_stage(stage) if self.lifecycle.tracker is not None else {}
        self._publish(metrics, state)
        return metrics

    def _end_stage_left_open(self, state: TrainerState) -> None:
        """A stage that began without its end event (e.g. a custom loop's eval forward) ends here."""
        tracker = self.lifecycle.tracker
        if tracker is not None and tracker.stage_open:
            self._end_stage("val", state)

    def _before_log_save_evaluate(self, control: TrainerControl) -> None:
        """Runs after a step/epoch, before the Trainer logs, evaluates and saves."""
        if distributed.world_size() > 1 and (control.should_save or control.should_evaluate):
            self._snapshot = self.lifecycle.state_dict()  # collective: every rank decides the same
        if control.should_evaluate:
            self._begin_stage()

    def _publish(self, metrics: dict[str, float], state: TrainerState) -> None:
        """Log ``metrics`` as their own entry: with ``Trainer.log`` when attached, else into ``log_history``.

        The base ``Trainer.log`` is used so that subclass overrides which fold their own running
        metrics into each log (TRL's ``SFTTrainer.log`` does) keep them for the Trainer's next entry.
        """
        if not metrics:
            return
        trainer = self._trainer_ref()
        if trainer is None:
            entry: dict[str, Any] = dict(metrics)
            if state.epoch is not None:
                entry["epoch"] = state.epoch
            state.log_history.append({**entry, "step": state.global_step})
            return
        from transformers import Trainer

        should_log = trainer.control.should_log
        try:
            Trainer.log(trainer, dict(metrics))
        finally:  # our entry must not cancel a log the Trainer is about to write
            trainer.control.should_log = should_log

    def _report_epoch(self, control: TrainerControl) -> None:
        """Report the held epoch with the latest evaluation's metrics; stop if the server says so."""
        epoch, self._unreported_epoch = self._unreported_epoch, None
        if epoch is not None and self.lifecycle.report_epoch(epoch, self._last_eval):
            control.should_training_stop = True

    def _finish(self) -> dict[str, float]:
        """End the run normally; returns the totals."""
        self._report_epoch(TrainerControl())  # an epoch whose evaluation never came
        return self.lifecycle.end_train()

    def _warn_unbound_integrations(self, args: TrainingArguments) -> None:
        integrations = [r for r in (args.report_to or []) if r not in ("none", None)]
        if integrations and self._trainer_ref() is None:
            console.warn_once(
                "hf-unbound-integrations",
                f"ZeusTrainerCallback: energy entries go to state.log_history; to send them to report_to "
                f"{integrations} as well, bind the callback with ZeusTrainerCallback(...).attach(trainer).",
            )


class HFGlobalPowerLimitOptimizer(ZeusTrainerCallback):
    """Zeus's name for the power-limit optimizer as a ``Trainer`` callback (for code written for Zeus).

    ``HFGlobalPowerLimitOptimizer(monitor, ...)`` is a :class:`ZeusTrainerCallback` driving a
    :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer` built from the same
    arguments, measuring with that optimizer's monitor; the optimizer's ``metrics()``
    (``power/limit_w``) join every epoch entry. When ``train()`` raises, Transformers calls no
    callback: the optimizer's own exit and signal handlers restore the limits.

    Args:
        *args: The arguments of :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`
            (``monitor``, ``optimum_selector``, ``wait_steps``, ...), as in Zeus.
        **kwargs: Its keyword arguments.

    Attributes:
        optimizer: The :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`.

    Example:
        >>> trainer = Trainer(model, args, callbacks=[HFGlobalPowerLimitOptimizer(monitor)])  # doctest: +SKIP
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.optimizer = GlobalPowerLimitOptimizer(*args, **kwargs)
        super().__init__(self.optimizer, monitor=self.optimizer.monitor)
