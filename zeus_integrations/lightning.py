"""Lightning adapter: ``Trainer(callbacks=[ZeusCallback()])`` measures every epoch, stage and the fit.

:class:`ZeusCallback` maps Lightning's callback hooks onto a
:class:`~zeus_core.training.TrainingLifecycle` and logs the results through Lightning's own
logging; docs/integrations.md has the hook-by-hook mapping.
"""

from __future__ import annotations

from typing import Any

try:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
except ModuleNotFoundError as _e:  # pragma: no cover - exercised in a test with lightning hidden
    raise ModuleNotFoundError(
        "zeus_integrations.lightning needs Lightning (lightning.pytorch). "
        "Install it with: pip install 'zeus-suite[lightning]'",
        name=_e.name,
    ) from _e
from typing_extensions import Unpack, override

from zeus_core.callback import TrainingProtocol
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle, gpu_indices_of
from zeus_core.training._options import TrialOptions, ZeusOptimizers
from zeus_core.training._tracker import metric_key
from zeus_core.training._trial_reporter import TrialReporter

__all__ = ["ZeusCallback"]

_LEGACY_STATE_KEY = "zeus_suite.ZeusCallback"  # the key of every instance before per-config keys
_PROG_BAR_KEYS = frozenset({metric_key("energy", "epoch"), metric_key("power", "epoch")})


class ZeusCallback(Callback, LifecycleResults):
    """Measures time and energy of every training epoch, evaluation stage and the whole fit.

    It measures the GPU this process trains on and, on each machine's first process, CPU packages
    and DRAM; under DDP the logged figures are the job's. It logs ``energy/epoch_j``,
    ``time/epoch_s`` and ``power/avg_w`` per epoch (through ``pl_module.log``), stage, step and
    end-of-fit figures too (keys and launch modes: docs/integrations.md), with the energy insights
    (J/sample, J/token, forecast, carbon, cost: docs/insights.md) beside the epoch and fit figures,
    and saves its totals in Lightning checkpoints.

    Args:
        zeus_optimizers: A training-protocol object (e.g.
            :class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`) or a sequence of
            them; every protocol event reaches them, steps being optimizer steps. Their
            ``on_train_end`` (which restores GPU settings) runs on every exit path.
        prog_bar: Show ``energy/epoch_j`` and ``power/avg_w`` in the progress bar.
        **options: The options every adapter takes (:class:`~zeus_core.training.TrainingOptions`:
            ``monitor``, ``log_every_n_steps``, ``include_validation``, ``verbose``, ``simulate``,
            ``insights``; the run record goes to the logger's folder by default) and a batch-size
            trial's (:class:`~zeus_core.training.TrialOptions`: ``batch_size_optimizer``,
            ``metric_name``, the logged validation metric, e.g. ``"val_acc"``).

    Raises:
        ZeusConfigError: ``log_every_n_steps`` is not positive, ``zeus_optimizers`` does not
            implement the training protocol, ``simulate`` names no known GPU, or
            ``batch_size_optimizer`` comes without ``metric_name`` (or the reverse).
        TypeError: An option that does not exist.

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
        zeus_optimizers: ZeusOptimizers = None,
        *,
        prog_bar: bool = True,
        **options: Unpack[TrialOptions],
    ) -> None:
        self.lifecycle = TrainingLifecycle("ZeusCallback", zeus_optimizers, **options)
        self.prog_bar = prog_bar
        self._step_open = False
        self._step_start = 0

    # -- results ------------------------------------------------------------------------------------
    @property
    def trial_reporter(self) -> TrialReporter | None:
        """The batch-size trial this fit reports to (``None`` without a batch-size optimizer)."""
        return self.lifecycle.trial_reporter

    @property
    def zeus_optimizers(self) -> list[TrainingProtocol]:
        """The protocol objects receiving every event."""
        return self.lifecycle.zeus_optimizers

    # -- set-up -------------------------------------------------------------------------------------
    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(
            optimizers=[type(o).__name__ for o in self.lifecycle.zeus_optimizers],
            log_every_n_steps=self.lifecycle.log_every_n_steps,
            include_validation=self.lifecycle.include_validation,
            metric_name=self.lifecycle.metric_name,
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
