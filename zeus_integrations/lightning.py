"""Lightning adapter: ``Trainer(callbacks=[ZeusCallback()])`` measures every epoch and the whole fit.

:class:`ZeusCallback` translates Lightning's hooks into the core training protocol and logs the
results through Lightning's own logging; all measurement and cross-rank aggregation happens in
:class:`~zeus_core.monitor.training.TrainingTracker`.

How Lightning's hooks map onto the protocol:

* ``on_train_begin``: ``on_train_start`` (after the sanity check, so it is not counted).
* ``on_epoch_begin`` / ``on_epoch_end``: ``on_train_epoch_start`` / ``on_train_epoch_end``.
* ``on_step_begin``: ``on_train_batch_start`` of the first batch of an optimizer step;
  ``on_step_end``: the ``on_train_batch_end`` after which ``trainer.global_step`` moved. So with
  ``accumulate_grad_batches=k`` one step spans k batches (the last one of an epoch may be shorter).
* ``on_train_end``: ``on_train_end``, or ``on_exception`` when the fit fails (exactly once).
* Validation (``on_validation_start`` … ``on_validation_end``) pauses the training windows unless
  ``include_validation=True``.
* With a batch-size optimizer, each ``on_train_epoch_end`` (which Lightning calls after that
  epoch's validation) reports the epoch and the validation metric, and sets
  ``trainer.should_stop`` when the server says stop; the fit's end reports the trial's result.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
except ModuleNotFoundError as _e:  # pragma: no cover - exercised in a test with lightning hidden
    raise ModuleNotFoundError(
        "zeus_integrations.lightning needs Lightning (lightning.pytorch). "
        "Install it with: pip install 'zeus-suite[lightning]'",
        name=_e.name,
    ) from _e
from typing_extensions import override

from zeus_core import distributed
from zeus_core.callback import TrainingProtocol
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.monitor.training import TrainingTracker, check_tracker_args, metric_key
from zeus_core.optimizer.batch_size.client import BatchSizeOptimizer
from zeus_core.optimizer.batch_size.trial_reporter import trial_reporter

__all__ = ["ZeusCallback"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1
_PROG_BAR_KEYS = frozenset({metric_key("energy", "epoch"), metric_key("power", "epoch")})


class ZeusCallback(Callback):
    """Measures time and energy of every training epoch and of the whole fit.

    With no arguments it measures the GPU this process trains on (found from the trainer's root
    device; every visible GPU where the device type cannot tell) and, on the first process of each
    machine (local rank 0), the CPU packages and DRAM where readable. Under DDP each rank measures
    its own GPU and the logged figures are the job's: energy summed over ranks, time the longest.

    Logged metric keys (units in the name):

    * each epoch, through ``pl_module.log`` (so every configured logger, ``trainer.callback_metrics``
      and, for the first two, the progress bar get them): ``energy/epoch_j`` (J), ``power/avg_w``
      (W), ``time/epoch_s`` (s), ``energy/epoch_<device>_j`` per device (J; ``gpu0``, ``cpu0``,
      ``dram0``, or ``rank1_gpu0`` under DDP), ``simulated`` and ``estimated`` (1.0 or 0.0);
    * every ``log_every_n_steps`` optimizer steps (optional), straight to ``trainer.loggers``:
      ``energy/step_j`` (J), ``time/step_s`` (s), ``power/step_avg_w`` (W);
    * when the fit ends (also when it fails), to ``trainer.loggers``: ``energy/train_j``,
      ``time/train_s``, ``power/train_avg_w``, ``energy/train_gpu_j``, ``energy/train_cpu_j``,
      ``energy/train_dram_j``.

    The callback's state (totals so far and the optimizers' states) is saved in Lightning
    checkpoints, so a fit resumed with ``ckpt_path=`` continues the totals and an optimizer that
    already decided does not profile again.

    With ``strategy="ddp_spawn"`` the hooks run in the spawned processes, so the callback object
    of the launching process keeps no results: read the logged metrics there instead.

    Batch-size optimization for recurring jobs: pass the client whose trial chose the batch size
    (``batch_size = bso.get_batch_size()`` before building the data loader) and the name of the
    validation metric its job's target is for. After every training epoch the callback reports
    the trial's time, energy and that metric to the server, and stops the fit
    (``trainer.should_stop``) when the server says so: target reached, cost past ``beta_knob`` ×
    the best trial, or the job's ``max_epochs``. When the fit ends it reports the result
    (converged when the last metric reached the target); a failed fit abandons the trial.

    Args:
        optimizer: A training-protocol object (e.g.
            :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`) or a sequence of
            them; every protocol event reaches them, steps being optimizer steps.
        monitor: The monitor to read; default: one built in ``setup`` for this process's devices.
        log_every_n_steps: Also measure and log every N-th optimizer step (``None``: never).
        include_validation: Count validation time and energy in the training windows.
        prog_bar: Show ``energy/epoch_j`` and ``power/avg_w`` in the progress bar.
        batch_size_optimizer: A :class:`~zeus_core.BatchSizeOptimizer` with a trial started,
            to report every epoch to (``None``: none).
        metric_name: The logged validation metric the job's target is for (e.g. ``"val_acc"``);
            required with ``batch_size_optimizer``.

    Raises:
        ZeusConfigError: ``log_every_n_steps`` is not positive, ``optimizer`` does not
            implement the training protocol, or ``batch_size_optimizer`` comes without
            ``metric_name`` (or the reverse).

    Example:
        >>> import lightning.pytorch as pl
        >>> from zeus_integrations.lightning import ZeusCallback
        >>> zeus = ZeusCallback()
        >>> trainer = pl.Trainer(max_epochs=2, callbacks=[zeus])
        >>> trainer.fit(model, datamodule)  # doctest: +SKIP
        >>> zeus.train_metrics["energy/train_j"]  # doctest: +SKIP
        1234.5
    """

    def __init__(
        self,
        optimizer: TrainingProtocol | Sequence[TrainingProtocol] | None = None,
        *,
        monitor: ZeusMonitor | None = None,
        log_every_n_steps: int | None = None,
        include_validation: bool = False,
        prog_bar: bool = True,
        batch_size_optimizer: BatchSizeOptimizer | None = None,
        metric_name: str | None = None,
    ) -> None:
        optimizers = check_tracker_args("ZeusCallback", optimizer, log_every_n_steps)
        self.trial_reporter = trial_reporter("ZeusCallback", batch_size_optimizer, metric_name)
        self.optimizers = optimizers
        self.monitor = monitor
        self.log_every_n_steps = log_every_n_steps
        self.include_validation = include_validation
        self.prog_bar = prog_bar
        self.tracker: TrainingTracker | None = None
        self.epoch_history: list[dict[str, float]] = []
        self.train_metrics: dict[str, float] = {}
        self._own_monitor = False
        self._pending_state: dict[str, Any] | None = None
        self._training = False
        self._step_open = False
        self._step_start = 0

    # -- set-up -------------------------------------------------------------------------------------
    @property
    @override
    def state_key(self) -> str:
        return "zeus_suite.ZeusCallback"

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self.tracker is not None:
            return
        if self.monitor is None:
            self.monitor = ZeusMonitor(
                gpu_indices=_trained_gpus(trainer),
                cpu_indices=None if trainer.local_rank == 0 else [],  # one CPU reader per machine
            )
            self._own_monitor = True
            if not self.monitor.gpus and not self.monitor.cpus:
                logger.warning(
                    "ZeusCallback: no GPU or readable CPU energy counter on this process; "
                    "energies will read 0 J."
                )
        self.tracker = TrainingTracker(self.monitor, self.optimizers, self.log_every_n_steps)
        if self._pending_state is not None:
            self.tracker.load_state_dict(self._pending_state)
            self._pending_state = None

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        self._finish(trainer, failed=self._training)  # no-op unless the fit ended without on_train_end
        if self._own_monitor and self.monitor is not None:
            self.monitor.close()

    # -- training events ---------------------------------------------------------------------------
    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        tracker = self._require_tracker()
        if self.trial_reporter is not None:
            self.trial_reporter.start()
        self.epoch_history = []
        self.train_metrics = {}
        self._step_open = False
        tracker.on_train_begin()
        self._training = True

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._training:
            self._require_tracker().on_epoch_begin()

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._training and not self._step_open:
            self._step_open = True
            self._step_start = trainer.global_step
            self._require_tracker().on_step_begin()

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._training and self._step_open and trainer.global_step != self._step_start:
            self._end_step(trainer)

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._training:
            return
        tracker = self._require_tracker()
        if self._step_open:  # batches without an optimizer step (manual optimization): close them
            self._end_step(trainer)
        tracker.on_epoch_end()
        metrics = dict(tracker.epoch_metrics)
        self.epoch_history.append(metrics)
        for key, value in metrics.items():
            # Every rank holds the same job-wide value; "max" keeps it exact and silences the DDP warning.
            pl_module.log(
                key,
                value,
                on_step=False,
                on_epoch=True,
                sync_dist=True,
                reduce_fx="max",
                batch_size=1,
                prog_bar=self.prog_bar and key in _PROG_BAR_KEYS,
            )
        if self.trial_reporter is not None and self.trial_reporter.epoch_end(
            metrics[metric_key("time", "epoch")],
            metrics[metric_key("energy", "epoch")],
            trainer.callback_metrics,
        ):
            trainer.should_stop = True

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._training and not self.include_validation:
            self._require_tracker().pause()

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._training and not self.include_validation:
            self._require_tracker().resume()

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._finish(trainer, failed=False)

    @override
    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._finish(trainer, failed=True)

    # -- checkpointing -----------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        # Lightning calls this on every rank when it saves; the tracker gathers each rank's totals.
        if self.tracker is None:
            return dict(self._pending_state or {})
        return {"version": _STATE_VERSION, "tracker": self.tracker.state_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("version") != _STATE_VERSION:
            logger.warning(
                "ZeusCallback checkpoint state has version %r (expected %d); loading what matches.",
                state_dict.get("version"),
                _STATE_VERSION,
            )
        tracker_state = state_dict.get("tracker", {})
        if self.tracker is None:
            self._pending_state = tracker_state
        else:
            self.tracker.load_state_dict(tracker_state)

    # -- helpers -------------------------------------------------------------------------------------
    def _require_tracker(self) -> TrainingTracker:
        if self.tracker is None:
            raise ZeusConfigError(
                "ZeusCallback was not set up: Lightning calls setup(stage='fit') before training. "
                "Pass the callback to Trainer(callbacks=[...]) instead of calling its hooks directly."
            )
        return self.tracker

    def _end_step(self, trainer: pl.Trainer) -> None:
        self._step_open = False
        tracker = self._require_tracker()
        tracker.on_step_end()
        if tracker.step_metrics:
            for lg in trainer.loggers:  # Lightning loggers write on global rank 0 only
                lg.log_metrics(dict(tracker.step_metrics), step=trainer.global_step)

    def _finish(self, trainer: pl.Trainer, failed: bool) -> None:
        """The one end-of-training path: runs the protocol's ``on_train_end`` exactly once."""
        if not self._training:
            return
        self._training = False
        self._step_open = False
        tracker = self._require_tracker()
        try:
            # After a failure other ranks may never get here: no collectives then.
            tracker.on_train_end(failed=failed)
        finally:
            if self.trial_reporter is not None:
                self.trial_reporter.end(failed=failed)
            self.train_metrics = dict(tracker.train_metrics)
            if self.train_metrics:
                for lg in trainer.loggers:
                    lg.log_metrics(self.train_metrics, step=trainer.global_step)
                if distributed.is_rank_zero() or failed:
                    logger.info(
                        "Training %s: %.1f J in %.2f s (%.1f W)%s%s",
                        "failed after" if failed else "used",
                        self.train_metrics[metric_key("energy", "train")],
                        self.train_metrics[metric_key("time", "train")],
                        self.train_metrics[metric_key("power", "train")],
                        " on this rank" if failed and distributed.world_size() > 1 else "",
                        " [simulated]" if self.train_metrics.get("simulated") else "",
                    )


def _trained_gpus(trainer: pl.Trainer) -> list[int] | None:
    """GPU indices this process trains on: ``[]`` off-GPU, ``None`` (all visible) when unknown."""
    try:
        device = trainer.strategy.root_device
    except Exception:  # strategies without a single root device (e.g. some model-parallel ones)
        return None
    if device.type != "cuda":
        from zeus_core.device.simulated import simulated_stand_in

        return simulated_stand_in()  # [] unless ZEUS_SUITE_SIMULATE asks for a simulated GPU
    if device.index is not None:
        return [device.index]
    import torch

    return [torch.cuda.current_device()]
