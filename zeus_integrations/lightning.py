"""Lightning adapter: ``Trainer(callbacks=[ZeusCallback()])`` measures every epoch, stage and the fit.

:class:`ZeusCallback` maps Lightning's callback hooks onto a
:class:`~zeus_core.training._lifecycle.TrainingLifecycle` (which holds all measurement, checkpoint
and failure logic) and logs the results through Lightning's own logging:

* ``on_train_start`` / ``on_train_end`` (or ``on_exception``, ``teardown``): the run, exactly once.
* ``on_train_epoch_start`` / ``on_train_epoch_end``: an epoch.
* ``on_train_batch_start`` opens an optimizer step; the ``on_train_batch_end`` after which
  ``trainer.global_step`` moved closes it, counting as many steps as ``global_step`` moved. So
  ``accumulate_grad_batches=k`` gives one step per k batches, and manual optimization with two
  optimizers two steps per batch, exactly as ``global_step`` counts.
* ``on_validation_epoch_*`` (inside ``fit`` and ``trainer.validate``), ``on_test_epoch_*`` and
  ``on_predict_epoch_*``: stage windows logged under ``energy/val/...``, ``energy/test/...``,
  ``energy/predict/...``; training figures exclude them unless ``include_validation=True``.
  The sanity check is not measured.
* ``state_dict`` / ``load_state_dict``: checkpoints (also ones saved mid-epoch, and old ones).
* With a batch-size optimizer, each ``on_train_epoch_end`` (after that epoch's validation)
  reports the epoch and the validation metric and sets ``trainer.should_stop`` when the server
  says stop; the fit's end reports the trial's result.
"""

from __future__ import annotations

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

from zeus_core.callback import TrainingProtocol
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.optimizer.batch_size.client import BatchSizeOptimizer
from zeus_core.training._insights import EnergyInsights
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of
from zeus_core.training._tracker import metric_key
from zeus_core.training._trial_reporter import TrialReporter, trial_reporter

__all__ = ["ZeusCallback"]

_LEGACY_STATE_KEY = "zeus_suite.ZeusCallback"  # the key of every instance before per-config keys
_PROG_BAR_KEYS = frozenset({metric_key("energy", "epoch"), metric_key("power", "epoch")})


class ZeusCallback(Callback, LifecycleResults):
    """Measures time and energy of every training epoch, evaluation stage and the whole fit.

    With no arguments it measures the GPU this process trains on (found from the trainer's root
    device; every visible GPU where the device type cannot tell) and, on the first process of each
    machine (local rank 0), the CPU packages and DRAM where readable. Under DDP each rank measures
    its own GPU and the logged figures are the job's: energy summed over ranks, time the longest.
    Works with every launch mode: ``ddp``, ``ddp_spawn`` (the callback and a monitor it builds
    travel to the spawned processes; read the logged metrics there), torchrun and SLURM.

    Logged metric keys (units in the name):

    * each epoch, through ``pl_module.log`` (every logger, ``trainer.callback_metrics`` and, for
      the first two, the progress bar): ``energy/epoch_j`` (J), ``power/avg_w`` (W),
      ``time/epoch_s`` (s), ``energy/epoch_<device>_j`` per device (J; ``gpu0``, ``cpu0``,
      ``dram0``, or ``rank1_gpu0`` under DDP), ``simulated`` and ``estimated`` (1.0 or 0.0), and
      each optimizer's ``metrics()`` (e.g. ``power/limit_w``);
    * each validation / test run (also in the results ``trainer.validate()``/``test()`` return)
      and each prediction run (to ``trainer.loggers``): ``energy/<stage>/total_j``,
      ``time/<stage>/total_s``, ``power/<stage>/avg_w``, ``energy/<stage>/<device>_j``;
    * every ``log_every_n_steps`` optimizer steps (optional), straight to ``trainer.loggers``:
      ``energy/step_j`` (J), ``time/step_s`` (s), ``power/step_avg_w`` (W);
    * when the fit ends (also when it fails), to ``trainer.loggers``: ``energy/train_j``,
      ``time/train_s``, ``power/train_avg_w``, ``energy/train_gpu_j``, ``energy/train_cpu_j``,
      ``energy/train_dram_j``;
    * the energy insights (J/sample, J/token, forecast, carbon, cost; see
      :class:`~zeus_core.training._insights.EnergyInsights`) with the epoch and fit figures.

    Each epoch's summary is shown on the console (rank zero; ``verbose=False`` or
    ``ZEUS_SUITE_QUIET=1`` turn it off). The callback's state (totals, epoch history, the
    optimizers' states) is saved in Lightning checkpoints under a key made from its configuration,
    so a resumed fit continues the totals (and, from a mid-epoch checkpoint, the epoch).

    Args:
        optimizer: A training-protocol object (e.g.
            :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`) or a sequence of
            them; every protocol event reaches them, steps being optimizer steps. Their
            ``on_train_end`` (which restores GPU settings) runs on every exit path.
        monitor: The monitor to read; default: one built in ``setup`` for this process's devices.
        log_every_n_steps: Also measure and log every N-th optimizer step (``None``: never).
        include_validation: Count validation time and energy in the training windows.
        prog_bar: Show ``energy/epoch_j`` and ``power/avg_w`` in the progress bar.
        batch_size_optimizer: A :class:`~zeus_core.BatchSizeOptimizer` with a trial started,
            to report every epoch to (``None``: none).
        metric_name: The logged validation metric the job's target is for (e.g. ``"val_acc"``);
            required with ``batch_size_optimizer``.
        verbose: Show epoch and run summaries on the console.
        simulate: Simulate this GPU model (``"a40"``, ``"a100"``, ``"h100"``) when no GPU is found.
        insights: Carbon region and price, run length, run-record folder (default: the logger's).

    Raises:
        ZeusConfigError: ``log_every_n_steps`` is not positive, ``optimizer`` does not
            implement the training protocol, ``simulate`` names no known GPU, or
            ``batch_size_optimizer`` comes without ``metric_name`` (or the reverse).

    Example:
        >>> import lightning.pytorch as pl
        >>> from zeus_integrations.lightning import ZeusCallback
        >>> zeus = ZeusCallback(simulate="a40")
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
        verbose: bool = True,
        simulate: str | None = None,
        insights: EnergyInsights | None = None,
    ) -> None:
        self.lifecycle = TrainingLifecycle(
            "ZeusCallback",
            optimizer,
            monitor=monitor,
            log_every_n_steps=log_every_n_steps,
            include_validation=include_validation,
            verbose=verbose,
            simulate=simulate,
            trial_reporter=trial_reporter("ZeusCallback", batch_size_optimizer, metric_name),
            insights=insights,
        )
        self.prog_bar = prog_bar
        self._metric_name = metric_name
        self._step_open = False
        self._step_start = 0

    # -- results ------------------------------------------------------------------------------------
    @property
    def trial_reporter(self) -> TrialReporter | None:
        """The batch-size trial this fit reports to (``None`` without a batch-size optimizer)."""
        return self.lifecycle.trial_reporter

    @property
    def optimizers(self) -> list[TrainingProtocol]:
        """The protocol objects receiving every event."""
        return self.lifecycle.optimizers

    # -- set-up -------------------------------------------------------------------------------------
    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(
            optimizers=[type(o).__name__ for o in self.lifecycle.optimizers],
            log_every_n_steps=self.lifecycle.log_every_n_steps,
            include_validation=self.lifecycle.include_validation,
            metric_name=self._metric_name,
        )

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.lifecycle.setup(_trained_gpus(trainer), rank_on_machine=trainer.local_rank)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.lifecycle.training:  # the fit ended without on_train_end or on_exception
            self._finish(trainer, failed=True)

    # -- training events ---------------------------------------------------------------------------
    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._step_open = False
        self.lifecycle.begin_train()
        run_dir = trainer.log_dir if trainer.loggers else None  # no logger: Lightning writes nothing either
        self.lifecycle.plan(trainer.max_epochs, _planned_steps(trainer), run_dir)

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.lifecycle.begin_epoch()

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.lifecycle.training and not self._step_open:
            self._step_open = True
            self._step_start = trainer.global_step
            self.lifecycle.begin_step()

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.lifecycle.count_batch(batch)
        if self._step_open and trainer.global_step != self._step_start:
            self._end_step(trainer)

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.lifecycle.in_epoch:
            return
        if self._step_open:  # batches without an optimizer step: close them
            self._end_step(trainer)
        metrics = self.lifecycle.end_epoch()
        # Every rank holds the same job-wide value; "max" keeps it exact and silences the DDP warning.
        self._log(pl_module, metrics, progress=_PROG_BAR_KEYS)
        if self.lifecycle.report_epoch(metrics, trainer.callback_metrics):
            trainer.should_stop = True

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._finish(trainer, failed=False)

    @override
    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._finish(trainer, failed=True)

    # -- evaluation stages ---------------------------------------------------------------------------
    def _begin_stage(self, trainer: pl.Trainer, stage: str) -> None:
        if not trainer.sanity_checking:
            self.lifecycle.begin_stage(stage)

    @override
    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin_stage(trainer, "val")

    @override
    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._log(pl_module, self.lifecycle.end_stage("val"))

    @override
    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin_stage(trainer, "test")

    @override
    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._log(pl_module, self.lifecycle.end_stage("test"))

    @override
    def on_predict_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin_stage(trainer, "predict")

    @override
    def on_predict_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics = self.lifecycle.end_stage("predict")
        if metrics:  # Lightning allows no self.log() while predicting: straight to the loggers
            for lg in trainer.loggers:
                lg.log_metrics(metrics, step=trainer.global_step)
                lg.save()

    # -- checkpointing -----------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        # Lightning calls this on every rank when it saves; the tracker gathers each rank's totals.
        return self.lifecycle.state_dict()

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.lifecycle.load_state_dict(state_dict)

    @override
    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        states = checkpoint.get("callbacks", {})
        if self.state_key not in states and _LEGACY_STATE_KEY in states:  # saved before per-config keys
            self.lifecycle.load_state_dict(states[_LEGACY_STATE_KEY])

    # -- helpers -------------------------------------------------------------------------------------
    def _log(
        self, pl_module: pl.LightningModule, metrics: dict[str, float], progress: frozenset = frozenset()
    ) -> None:
        for key, value in metrics.items():
            pl_module.log(
                key,
                value,
                on_step=False,
                on_epoch=True,
                sync_dist=True,
                reduce_fx="max",
                batch_size=1,
                prog_bar=self.prog_bar and key in progress,
            )

    def _end_step(self, trainer: pl.Trainer) -> None:
        self._step_open = False
        metrics = self.lifecycle.end_step(trainer.global_step - self._step_start)
        if metrics:
            for lg in trainer.loggers:  # Lightning loggers write on global rank 0 only
                lg.log_metrics(metrics, step=trainer.global_step)

    def _finish(self, trainer: pl.Trainer, failed: bool) -> None:
        """The one end-of-training path: the lifecycle ends the run exactly once."""
        if not self.lifecycle.training:
            return
        self._step_open = False
        # After a failure other ranks may never get here: no collectives then.
        totals = self.lifecycle.abort() if failed else self.lifecycle.end_train()
        if totals:
            for lg in trainer.loggers:
                lg.log_metrics(totals, step=trainer.global_step)


def _planned_steps(trainer: pl.Trainer) -> float | None:
    """The fit's optimizer steps as Lightning estimates them (``None`` where it cannot)."""
    try:
        return float(trainer.estimated_stepping_batches)
    except Exception:  # e.g. an iterable data set without a length
        return None


def _trained_gpus(trainer: pl.Trainer) -> list[int] | None:
    """GPU indices this process trains on: ``[]`` off-GPU, ``None`` (all visible) when unknown."""
    try:
        device = trainer.strategy.root_device
    except Exception:  # strategies without a single root device (e.g. some model-parallel ones)
        return None
    return gpu_indices_of([device])
