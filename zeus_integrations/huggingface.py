"""Hugging Face adapter: :class:`ZeusTrainerCallback` for ``transformers.Trainer`` and TRL's ``SFTTrainer``.

The callback translates Trainer events into the core training protocol and publishes the
:class:`~zeus_core.monitor.training.TrainingTracker`'s metric dictionaries through
``Trainer.log``. Measurement, rank sums and checkpoint state all live in the tracker.

How values reach every logger. Transformers calls callbacks in list order, ``report_to``
integrations (TensorBoard, W&B, MLflow, ...) *before* user callbacks, and copies each log entry
into ``state.log_history`` before any callback sees it, so editing ``logs`` in ``on_log`` reaches
neither. The callback therefore logs its own entries with ``Trainer.log``, which needs the trainer:
passed in ``callbacks=``, the callback finds the Trainer whose callback list holds it when that
Trainer announces ``on_init_end`` (by looking at the calling frames; nothing private is read);
:meth:`ZeusTrainerCallback.attach` does the same explicitly for a trainer built elsewhere.

Failures. Transformers has no ``on_exception`` and does not call ``on_train_end`` when training
raises. Once bound to its trainer, the callback wraps that trainer instance's ``train`` method so
that any exception (``KeyboardInterrupt`` included) first ends the measurement and calls
``on_train_end`` on the protocol objects (a power-limit optimizer restores the GPUs there), then
propagates unchanged. Limits: a process killed by a signal it does not handle (SIGKILL, default
SIGTERM) runs no Python code at all; objects that change GPU settings keep their own signal/atexit
restore for that. Under torch.distributed a failing rank does not wait for the others (no
collective on a failure path), so a failed multi-process run reports each rank's own totals.

Batch-size optimizer. The Trainer evaluates *after* ``on_epoch_end`` (with
``eval_strategy="epoch"``), so the callback holds each epoch's figures until ``on_evaluate`` brings
that epoch's metrics, then reports both and sets ``control.should_training_stop`` when the server
says stop (the Trainer checks it right after evaluating). With any other evaluation schedule it
reports at ``on_epoch_end`` with the latest evaluation's metrics.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

from zeus_core import distributed
from zeus_core.callback import TrainingProtocol
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.monitor.training import TrainingTracker, check_tracker_args, metric_key
from zeus_core.optimizer.batch_size.client import BatchSizeOptimizer
from zeus_core.optimizer.batch_size.trial_reporter import trial_reporter

try:
    from transformers.trainer_callback import ExportableState, TrainerCallback, TrainerControl, TrainerState
    from transformers.training_args import TrainingArguments
    from typing_extensions import override
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

__all__ = ["ZeusTrainerCallback"]

logger = logging.getLogger(__name__)

_CHECKPOINT_VERSION = 1
_MAX_FRAMES = 12  # how far up the call stack a Trainer that is calling us can be
_SUMMARY_KEYS = frozenset({"train_runtime", "train_loss"})  # only in the Trainer's end-of-training log


class ZeusTrainerCallback(TrainerCallback, ExportableState):
    """Measures time and energy of a Hugging Face ``Trainer`` / TRL ``SFTTrainer`` run.

    With no arguments it measures the GPUs this process trains on (``args.device`` plus every GPU
    in the model's ``hf_device_map``; CPU packages and DRAM where RAPL is readable) and logs, through
    ``Trainer.log`` (so into ``state.log_history``, the progress output and every ``report_to``
    backend), one entry per epoch and one at the end of training. Steps are optimizer steps, so
    under ``gradient_accumulation_steps=k`` a protocol object sees one step per k micro-batches.
    Evaluation time is excluded unless ``include_validation=True``. Under torchrun /
    ``accelerate launch`` every rank measures its own GPUs and the logged energy is the job's sum.

    Metric keys:
        * per epoch: ``energy/epoch_j`` (J), ``time/epoch_s`` (s), ``power/avg_w`` (W), and per
          device ``energy/epoch_gpu0_j`` ... (J; ``energy/epoch_rank1_gpu0_j`` under several ranks);
        * every ``log_every_n_steps`` optimizer steps: ``energy/step_j`` (J), ``time/step_s`` (s),
          ``power/step_avg_w`` (W);
        * at the end of training, also added to the metrics ``trainer.train()`` returns:
          ``energy/train_j``, ``energy/train_gpu_j``, ``energy/train_cpu_j``, ``energy/train_dram_j``
          (J), ``time/train_s`` (s), ``power/train_avg_w`` (W);
        * in every entry: ``simulated`` (1.0 when a simulated device was measured) and
          ``estimated`` (1.0 when some GPU energy was integrated from sampled power).

    Checkpoints: the totals so far and each protocol object's ``state_dict()`` are saved in the
    checkpoint's ``trainer_state.json`` (``ExportableState``) and restored when training resumes
    from it, so totals continue and an optimizer does not profile again. Keep Transformers'
    ``restore_callback_states_from_checkpoint`` at its default (False): when True, Transformers
    replaces callbacks by new ones built from saved arguments, which cannot hold a monitor or an
    optimizer object.

    Args:
        optimizer: A protocol object (``on_train_begin`` ... ``on_train_end``), e.g. a
            ``GlobalPowerLimitOptimizer``, or a sequence of them. Each receives every event.
        monitor: The monitor to measure with (e.g. the one a power-limit optimizer also uses).
            ``None``: one is built for this process's GPUs at ``on_train_begin`` and closed at the end.
        log_every_n_steps: Also measure and log every N-th optimizer step (``None``: no step entries).
        include_validation: Count evaluation time inside the training and epoch windows.
        batch_size_optimizer: A :class:`~zeus_core.BatchSizeOptimizer` whose trial chose this run's
            batch size (``bso.get_batch_size()`` before building the Trainer). Every epoch is
            reported with the metric ``metric_name``; when the server says stop (target reached,
            cost past ``beta_knob`` × the best trial, the job's ``max_epochs``) training stops, and
            its end reports the trial's result (a failed ``train()`` abandons the trial).
        metric_name: The evaluation metric the job's target is for, as the Trainer names it
            (e.g. ``"eval_accuracy"``); required with ``batch_size_optimizer``.

    Raises:
        ZeusConfigError: ``optimizer`` does not implement the protocol, ``log_every_n_steps`` < 1,
            or ``batch_size_optimizer`` comes without ``metric_name`` (or the reverse).

    Example:
        >>> from transformers import Trainer, TrainingArguments  # doctest: +SKIP
        >>> zeus = ZeusTrainerCallback()
        >>> args = TrainingArguments("out", num_train_epochs=2)  # doctest: +SKIP
        >>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[zeus])  # doctest: +SKIP
        >>> result = trainer.train()  # doctest: +SKIP
        >>> result.metrics["energy/train_j"], zeus.epoch_history[0]["energy/epoch_j"]  # doctest: +SKIP
    """

    def __init__(
        self,
        optimizer: TrainingProtocol | Sequence[TrainingProtocol] | None = None,
        *,
        monitor: ZeusMonitor | None = None,
        log_every_n_steps: int | None = None,
        include_validation: bool = False,
        batch_size_optimizer: BatchSizeOptimizer | None = None,
        metric_name: str | None = None,
    ) -> None:
        optimizers = check_tracker_args("ZeusTrainerCallback", optimizer, log_every_n_steps)
        self.trial_reporter = trial_reporter("ZeusTrainerCallback", batch_size_optimizer, metric_name)
        self.monitor = monitor
        self.optimizers: list[TrainingProtocol] = optimizers
        self.log_every_n_steps = log_every_n_steps
        self.include_validation = bool(include_validation)
        self.epoch_history: list[dict[str, float]] = []  # every epoch's metrics of the last train() call
        self.train_metrics: dict[str, float] = {}  # totals of the last train() call
        self._tracker: TrainingTracker | None = None
        self._own_monitor: ZeusMonitor | None = None
        self._trainer_ref: Callable[[], Trainer | None] = lambda: None
        self._training = False
        self._paused_for_eval = False
        self._publishing = False
        self._pending: dict[str, float] = {}  # metrics for the next log when no trainer is bound
        self._snapshot: dict[str, Any] | None = None  # all ranks' states at the last save point
        self._unreported_epoch: dict[str, float] | None = None  # waiting for its evaluation
        self._last_eval: dict[str, Any] = {}  # metrics of the latest evaluation
        self._resume_state: dict[str, Any] | None = None  # set by Transformers when it rebuilds us

    # -- binding to a trainer ------------------------------------------------------------------
    def attach(self, trainer: Trainer) -> ZeusTrainerCallback:
        """Add this callback to ``trainer`` (if absent), log through it and guard its ``train()``.

        Use it for a trainer built elsewhere, instead of ``trainer.add_callback``: a callback added
        that way finds its trainer only when the first ``train()`` call has begun, so that call's
        failure is not guarded.

        Returns:
            This callback.
        """
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        self._bind(trainer)
        return self

    @property
    def trainer(self) -> Trainer | None:
        """The trainer this callback logs through, or ``None`` when it has not found one."""
        return self._trainer_ref()

    @property
    def tracker(self) -> TrainingTracker | None:
        """The tracker of the current or last ``train()`` call."""
        return self._tracker

    def _bind(self, trainer: Trainer) -> None:
        if self._trainer_ref() is trainer:
            return
        self._trainer_ref = weakref.ref(trainer)
        me = weakref.ref(self)
        original = trainer.train

        @functools.wraps(original)
        def train(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except BaseException:
                cb = me()
                if cb is not None:
                    cb._abort()
                raise

        trainer.train = train  # type: ignore[method-assign]

    def _discover(self, warn: bool) -> None:
        """Bind to the Trainer that is calling this callback (found on the call stack)."""
        module = sys.modules.get("transformers.trainer")
        if module is None:
            return
        frame = inspect.currentframe()
        try:
            for _ in range(_MAX_FRAMES):
                frame = frame.f_back if frame is not None else None
                if frame is None:
                    break
                candidate = frame.f_locals.get("self")
                if isinstance(candidate, module.Trainer) and any(
                    cb is self for cb in candidate.callback_handler.callbacks
                ):
                    self._bind(candidate)
                    return
        finally:
            del frame
        if warn:
            logger.warning(
                "ZeusTrainerCallback could not find its Trainer; energy is added to the logs of the "
                "callbacks after it only (not report_to integrations or log_history), and a failing "
                "train() is not guarded. Use ZeusTrainerCallback().attach(trainer)."
            )

    # -- Trainer events --------------------------------------------------------------------------
    @override
    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._discover(warn=False)  # on_train_begin tries again

    @override
    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._trainer_ref() is None:  # added after __init__, or not found there
            self._discover(warn=True)
        if self._training:  # the last attempt ended without a summary (an auto_find_batch_size retry)
            self._abort()
        monitor = self.monitor if self.monitor is not None else self._build_monitor(args, kwargs.get("model"))
        self._tracker = TrainingTracker(monitor, self.optimizers, self.log_every_n_steps)
        self.epoch_history, self.train_metrics, self._pending, self._snapshot = [], {}, {}, None
        if self._resume_state is not None:  # only Transformers sets it, when it rebuilt this callback
            logger.warning(
                "Transformers rebuilt ZeusTrainerCallback from the checkpoint "
                "(restore_callback_states_from_checkpoint=True): the monitor and optimizer given to the "
                "original callback are not used. Leave that option False; the callback restores its totals."
            )
        saved = self._saved_state(state)
        if saved is not None and state.global_step > 0:
            self._load(saved)
        self._unreported_epoch, self._last_eval = None, {}
        try:
            if self.trial_reporter is not None:
                self.trial_reporter.start()
            self._tracker.on_train_begin()
        except BaseException:
            self._close()
            raise
        self._training = True

    @override
    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._training:
            self._resume_after_evaluation()
            self._tracker.on_epoch_begin()  # type: ignore[union-attr]

    @override
    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._training:
            self._resume_after_evaluation()
            self._tracker.on_step_begin()  # type: ignore[union-attr]

    @override
    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self._training:
            return
        tracker = self._tracker
        assert tracker is not None  # set whenever _training is
        tracker.on_step_end()
        if tracker.step_metrics:
            self._publish(tracker.step_metrics, control)
        self._before_log_save_evaluate(control)

    @override
    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self._training:
            return
        tracker = self._tracker
        assert tracker is not None
        tracker.on_epoch_end()
        if tracker.epoch_metrics:
            self.epoch_history.append(dict(tracker.epoch_metrics))
            self._publish(tracker.epoch_metrics, control)
            if self.trial_reporter is not None:
                self._unreported_epoch = dict(tracker.epoch_metrics)
                if not control.should_evaluate:  # no evaluation follows: report with the latest one
                    self._report_epoch(control)
        self._before_log_save_evaluate(control)

    @override
    def on_prediction_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # Evaluation started by something other than the default flow (e.g. eval_on_start).
        tracker = self._tracker
        if self._training and tracker is not None and not self.include_validation and not tracker.paused:
            tracker.pause()
            self._paused_for_eval = True

    @override
    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        self._resume_after_evaluation()
        if metrics is not None:
            self._last_eval = dict(metrics)
        if self._training and self._unreported_epoch is not None:
            self._report_epoch(control)

    @override
    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._publishing or logs is None:
            return
        if self._pending:  # no trainer to log through: ride along with the next log
            logs.update(self._pending)
            self._pending = {}
        if self._training and _SUMMARY_KEYS <= logs.keys():
            totals = self._finish()
            if self._trainer_ref() is not None:
                self._publish(totals, control)  # for report_to integrations and log_history
            logs.update(totals)  # this dict is the metrics trainer.train() returns

    @override
    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._training:  # ended without the Trainer's summary log (e.g. a pruned hyper-parameter trial)
            self._publish(self._finish(), control)

    # -- checkpoints -------------------------------------------------------------------------------
    @override
    def state(self) -> dict[str, Any]:
        """Saved in ``trainer_state.json``: JSON-safe totals and protocol-object states of every rank."""
        return {
            "args": {
                "log_every_n_steps": self.log_every_n_steps,
                "include_validation": self.include_validation,
            },
            "attributes": {"_resume_state": self._checkpoint_state()},
        }

    def _checkpoint_state(self) -> dict[str, Any] | None:
        if self._tracker is None:
            return self._resume_state
        if distributed.world_size() == 1:
            return {"version": _CHECKPOINT_VERSION, "ranks": [self._tracker.state_dict()]}
        return self._snapshot  # gathered from every rank at the save decision (only savers call state())

    def _saved_state(self, state: TrainerState) -> dict[str, Any] | None:
        if self._resume_state is not None:
            return self._resume_state
        stored = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(stored, list):
            trainer = self._trainer_ref()
            mine = (
                [cb for cb in trainer.callback_handler.callbacks if type(cb) is type(self)]
                if trainer
                else [self]
            )
            position = next((i for i, cb in enumerate(mine) if cb is self), 0)
            stored = stored[position] if position < len(stored) else None
        return (stored or {}).get("attributes", {}).get("_resume_state")

    def _load(self, saved: dict[str, Any]) -> None:
        ranks = saved.get("ranks") or []
        if not ranks:
            return
        world, rank = distributed.world_size(), distributed.rank()
        if len(ranks) == world:
            mine = ranks[rank]
        else:
            logger.warning(
                "Checkpoint was saved by %d ranks, resuming with %d: rank 0 carries the saved totals.",
                len(ranks),
                world,
            )
            energy: dict[str, float] = {}
            for r in ranks:
                for label, joules in r.get("energy_j", {}).items():
                    energy[label] = energy.get(label, 0.0) + joules
            mine = {
                **ranks[0],
                "time_s": max(r.get("time_s", 0.0) for r in ranks),
                "energy_j": energy if rank == 0 else {},
            }
        self._tracker.load_state_dict(mine)  # type: ignore[union-attr]

    # -- helpers -------------------------------------------------------------------------------------
    def _build_monitor(self, args: TrainingArguments, model: Any) -> ZeusMonitor:
        from zeus_core.device.simulated import simulated_stand_in

        indices = _training_gpus(args, model) or simulated_stand_in()  # ZEUS_SUITE_SIMULATE off-GPU
        monitor = ZeusMonitor(gpu_indices=indices) if indices else ZeusMonitor(gpus=[])
        if not monitor.gpus and not monitor.cpus:
            logger.warning(
                "ZeusTrainerCallback: training on %s with no readable GPU or CPU energy; "
                "energy will read 0 J.",
                args.device,
            )
        self._own_monitor = monitor
        return monitor

    def _before_log_save_evaluate(self, control: TrainerControl) -> None:
        """Runs after a step/epoch, before the Trainer logs, evaluates and saves."""
        if distributed.world_size() > 1 and (control.should_save or control.should_evaluate):
            self._snapshot = {  # collective: every rank decides the same at the same step
                "version": _CHECKPOINT_VERSION,
                "ranks": distributed.all_gather_object(self._tracker.state_dict()),  # type: ignore[union-attr]
            }
        if control.should_evaluate and not self.include_validation:
            self._tracker.pause()  # type: ignore[union-attr]
            self._paused_for_eval = True

    def _resume_after_evaluation(self) -> None:
        if self._paused_for_eval:
            self._paused_for_eval = False
            if self._training:
                self._tracker.resume()  # type: ignore[union-attr]

    def _publish(self, metrics: dict[str, float], control: TrainerControl) -> None:
        """Log ``metrics`` as their own entry through the base ``Trainer.log``.

        The base method is used so that subclass overrides which fold their own running metrics into
        each log (TRL's ``SFTTrainer.log`` does) keep them for the Trainer's next entry.
        """
        trainer = self._trainer_ref()
        if trainer is None:
            self._pending.update(metrics)
            return
        from transformers import Trainer

        flags = [
            (c, c.should_log) for c in {id(control): control, id(trainer.control): trainer.control}.values()
        ]
        self._publishing = True
        try:
            Trainer.log(trainer, dict(metrics))
        finally:
            self._publishing = False
            for c, should_log in flags:  # our entry must not cancel a log the Trainer is about to write
                c.should_log = should_log

    def _report_epoch(self, control: TrainerControl) -> None:
        """Report the held epoch with the latest evaluation's metrics; stop if the server says so."""
        epoch, self._unreported_epoch = self._unreported_epoch, None
        if epoch is None or self.trial_reporter is None:
            return
        time_s, energy_j = epoch[metric_key("time", "epoch")], epoch[metric_key("energy", "epoch")]
        if self.trial_reporter.epoch_end(time_s, energy_j, self._last_eval):
            control.should_training_stop = True

    def _finish(self) -> dict[str, float]:
        """End the measurement normally; returns the totals."""
        self._training = False
        self._paused_for_eval = False
        try:
            self._report_epoch(TrainerControl())  # an epoch whose evaluation never came
            self._tracker.on_train_end()  # type: ignore[union-attr]
        finally:
            self._close()
        self.train_metrics = dict(self._tracker.train_metrics)  # type: ignore[union-attr]
        if self.trial_reporter is not None:
            self.trial_reporter.end(failed=False)
        return self.train_metrics

    def _abort(self) -> None:
        """End the measurement after a failure: protocol objects get ``on_train_end`` exactly once."""
        if not self._training:
            return
        self._training = False
        self._paused_for_eval = False
        tracker = self._tracker
        assert tracker is not None
        logger.warning("Training failed: ZeusTrainerCallback ends its measurement (on_train_end).")
        try:
            tracker.on_train_end(failed=True)  # this rank's own figures: other ranks may never get here
            self.train_metrics = dict(tracker.train_metrics)
        except Exception:
            logger.exception("ZeusTrainerCallback: on_train_end failed while handling a training failure.")
        finally:
            self._close()
            self._unreported_epoch = None
            if self.trial_reporter is not None:
                try:
                    self.trial_reporter.end(failed=True)
                except Exception:
                    logger.exception("ZeusTrainerCallback: could not abandon the batch-size trial.")

    def _close(self) -> None:
        if self._own_monitor is not None:
            self._own_monitor.close()
            self._own_monitor = None


def _training_gpus(args: TrainingArguments, model: Any) -> list[int]:
    """CUDA indices this process trains on: ``args.device`` and the model's ``hf_device_map``."""
    found: set[int] = set()
    device_map = getattr(model, "hf_device_map", None)
    places = list(device_map.values()) if isinstance(device_map, dict) else []
    for where in [args.device, *places]:
        if isinstance(where, int) and not isinstance(where, bool):
            found.add(where)  # an accelerate device map's integers are CUDA indices
            continue
        text = str(where)
        if text.startswith("cuda:"):
            found.add(int(text.split(":", 1)[1]))
        elif text == "cuda":
            torch = sys.modules.get("torch")
            found.add(torch.cuda.current_device() if torch is not None else 0)
    return sorted(found)
