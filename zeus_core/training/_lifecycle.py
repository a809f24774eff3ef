"""TrainingLifecycle: the one lifecycle every framework adapter drives.

Adapters only translate their framework's events into calls on a :class:`TrainingLifecycle`; ending
a run exactly once, one CPU reader per machine, stages, checkpoints, summaries and the ``simulate=``
stand-in are written once, here. docs/integrations.md lists what it guarantees.
"""

from __future__ import annotations

import logging
import os
import sys
import weakref
from typing import Any, Iterable

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.testing import SimulatedGPU
from zeus_core.testing._stand_in import simulated_gpu, simulated_stand_in
from zeus_core.training._insights import EnergyInsights, InsightsRun
from zeus_core.training._options import TrialOptions, ZeusOptimizers, check_options
from zeus_core.training._tracker import STAGES, TrainingTracker, check_tracker_args, metric_key, stage_key
from zeus_core.training._trial_reporter import TrialReporter, trial_reporter

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # rich, a dependency, brings typing_extensions on Python 3.10
    from typing_extensions import Unpack

__all__ = ["TrainingLifecycle", "LifecycleResults", "gpu_indices_of", "local_rank"]

logger = logging.getLogger(__name__)

LIFECYCLE_STATE_VERSION = 2  # 1: {"version", "tracker"}; 2: adds "epoch_history" and "stage_history"


def local_rank(default: int = 0) -> int:
    """This process's rank on its machine, from the launchers' ``LOCAL_RANK`` (``default`` if unset)."""
    value = os.environ.get("LOCAL_RANK", "").strip()
    return int(value) if value.isdigit() else default


def gpu_indices_of(devices: Iterable[Any]) -> list[int] | None:
    """GPU indices of a framework's devices: ``torch.device``, ``"cuda:1"``, ``"cuda"`` or ints.

    Args:
        devices: Where the model runs (one or more places, e.g. a Hugging Face ``hf_device_map``).

    Returns:
        The sorted CUDA indices; ``[]`` when every place is off-GPU; ``None`` (all visible GPUs)
        when a place cannot be told.
    """
    found: set[int] = set()
    for where in devices:
        if isinstance(where, int) and not isinstance(where, bool):
            found.add(where)  # an accelerate device map's integers are CUDA indices
            continue
        kind = getattr(where, "type", None)
        index = getattr(where, "index", None)
        if kind is None:
            text = str(where)
            kind, _, rest = text.partition(":")
            index = int(rest) if rest.isdigit() else None
        if kind != "cuda":
            if kind in ("cpu", "mps", "disk", "meta", "xla", "hpu"):
                continue
            return None
        if index is None:
            import torch

            index = torch.cuda.current_device()
        found.add(int(index))
    return sorted(found)


def _abort_run(tracker: TrainingTracker, reporter: TrialReporter | None, who: str) -> None:
    """Finalizer of an open run: end it as failed so the optimizers restore GPU settings."""
    try:
        if tracker.in_train:
            tracker.on_train_end(failed=True)
    except Exception:  # at exit or in garbage collection nothing can be raised to the user
        logger.exception("%s: ending an abandoned training run failed.", who)
    finally:
        if reporter is not None:
            try:
                reporter.end(failed=True)
            except Exception:
                logger.exception("%s: could not abandon the batch-size trial.", who)


class TrainingLifecycle:
    """Begin, end and abort a training run once; stages; checkpoints; summaries.

    The engine under every framework adapter; docs/integrations.md describes what it guarantees.

    Args:
        who: The adapter's name for messages, e.g. ``"ZeusCallback"``.
        zeus_optimizers: Training-protocol objects (e.g. ``GlobalPowerLimitOptimizer``) or ``None``.
        **options: The adapters' options (:class:`~zeus_core.training.TrialOptions`), ``insights``
            included (J/sample, forecast, carbon, cost and the run record; default: an
            :class:`~zeus_core.training.EnergyInsights` with its defaults).

    Raises:
        ZeusConfigError: A bad optimizer, step count or ``simulate`` name, or a batch-size optimizer
            without ``metric_name`` (or the reverse).
        TypeError: An option that does not exist.

    Example:
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> from zeus_core import ZeusMonitor
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> run = TrainingLifecycle("my loop", monitor=ZeusMonitor(gpus=[gpu], cpu_indices=[]), verbose=False)
        >>> run.setup()
        >>> run.begin_train(); run.begin_epoch(); clock.advance(1.0)
        >>> run.end_epoch()["energy/epoch_j"]
        300.0
        >>> run.end_train()["time/train_s"]
        1.0
    """

    def __init__(
        self, who: str, zeus_optimizers: ZeusOptimizers = None, **options: Unpack[TrialOptions]
    ) -> None:
        check_options(who, options, TrialOptions)
        self.who = who
        self.log_every_n_steps = options.get("log_every_n_steps")
        self.zeus_optimizers = check_tracker_args(who, zeus_optimizers, self.log_every_n_steps)
        self.simulate = options.get("simulate")
        if self.simulate is not None:
            simulated_gpu(self.simulate)  # fail at construction, not inside the framework
        self.metric_name = options.get("metric_name")
        self.trial_reporter = trial_reporter(who, options.get("batch_size_optimizer"), self.metric_name)
        self.monitor = options.get("monitor")
        self.include_validation = bool(options.get("include_validation", False))
        self.verbose = bool(options.get("verbose", True))
        insights = options.get("insights")
        self.insights = insights if insights is not None else EnergyInsights()
        self.insights_run: InsightsRun | None = None
        self.tracker: TrainingTracker | None = None
        self.epoch_history: list[dict[str, float]] = []
        self.stage_history: dict[str, list[dict[str, float]]] = {s: [] for s in STAGES}
        self.train_metrics: dict[str, float] = {}
        self._own_monitor = False
        self._sim_gpus: list[SimulatedGPU] = []
        self._pending: dict[str, Any] | None = None
        self._finalizer: weakref.finalize | None = None
        self._stage: str | None = None

    # -- pickling (ddp_spawn sends adapters to new processes) --------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._own_monitor:  # rebuilt for the new process's devices by setup()
            state.update(monitor=None, tracker=None, _own_monitor=False, _sim_gpus=[])
        state["_finalizer"] = None
        state["insights_run"] = None
        return state

    # -- set-up -------------------------------------------------------------------------------------
    def setup(self, gpu_indices: list[int] | None = None, rank_on_machine: int | None = None) -> None:
        """Build the monitor (unless given) and the tracker; idempotent.

        Args:
            gpu_indices: The GPUs this process trains on (see :func:`gpu_indices_of`).
            rank_on_machine: This process's local rank; only local rank 0 reads CPU and DRAM
                energy. Default: ``LOCAL_RANK`` from the environment.
        """
        if self.tracker is not None:
            return
        if self.monitor is None:
            self.monitor = self._build_monitor(gpu_indices, rank_on_machine)
            self._own_monitor = True
            weakref.finalize(self, self.monitor.close)  # a monitor built here closes with the lifecycle
        self.tracker = TrainingTracker(self.monitor, self.zeus_optimizers, self.log_every_n_steps)
        if self._pending is not None:
            self._load(self._pending)
            self._pending = None

    def _build_monitor(self, gpu_indices: list[int] | None, rank_on_machine: int | None) -> ZeusMonitor:
        rank = local_rank() if rank_on_machine is None else rank_on_machine
        cpu_indices: list[int] | None = None if rank == 0 else []  # one CPU/DRAM reader per machine
        if gpu_indices == []:  # training off-GPU: none, unless ZEUS_SUITE_SIMULATE asks for one
            gpu_indices = simulated_stand_in()
        monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
        if not monitor.gpus and self.simulate is not None:
            monitor.close()
            self._sim_gpus = [simulated_gpu(self.simulate)]
            monitor = ZeusMonitor(gpus=self._sim_gpus, cpu_indices=cpu_indices)
            console.info_once(
                f"simulated-{self.simulate}",
                f"{self.who}: no GPU found; measuring a simulated {self.simulate.upper()} that is busy "
                "while training steps run. Every figure is marked simulated=1.0.",
            )
        elif not monitor.gpus and not monitor.cpus:
            console.warn_once(
                "no-devices",
                f"{self.who}: no GPU and no readable CPU energy counter on this machine, so energies read "
                "0 J. For a simulated GPU pass simulate='a40' (or set ZEUS_SUITE_SIMULATE=a40).",
            )
        return monitor

    def fresh_run(self) -> None:
        """Forget the counts of earlier runs (a new ``train()`` call that resumes nothing)."""
        if self.training:
            self.abort()
        if self.tracker is not None and self.monitor is not None:
            self.tracker = TrainingTracker(self.monitor, self.zeus_optimizers, self.log_every_n_steps)
        self.epoch_history = []

    def require_tracker(self) -> TrainingTracker:
        """The tracker; raises a clear error when :meth:`setup` has not run."""
        if self.tracker is None:
            raise ZeusConfigError(
                f"{self.who} was not set up: its framework calls it before training. Pass it to the "
                "framework (e.g. Trainer(callbacks=[...])) instead of calling its hooks directly."
            )
        return self.tracker

    # -- state --------------------------------------------------------------------------------------
    @property
    def training(self) -> bool:
        """Whether a run is open."""
        return self.tracker is not None and self.tracker.in_train

    @property
    def in_epoch(self) -> bool:
        """Whether an epoch is open."""
        return self.tracker is not None and self.tracker.in_epoch

    @property
    def stage(self) -> str | None:
        """The open evaluation stage's name (``None``: none, or not named yet)."""
        return self._stage

    @property
    def steps_done(self) -> int:
        """Optimizer steps counted so far (continues across checkpoint resumes)."""
        return self.tracker.steps_done if self.tracker is not None else 0

    # -- training events ------------------------------------------------------------------------------
    def begin_train(self) -> None:
        """Open the run; a run still open from an earlier failed call is aborted first."""
        tracker = self.require_tracker()
        if tracker.in_train:
            self.abort()
        self.train_metrics = {}
        if self.trial_reporter is not None:
            self.trial_reporter.start()
        tracker.on_train_begin()
        self.insights_run = self.insights.begin(self.who, self.monitor, self.verbose)
        # Guarantees on_train_end (and so the optimizers' restore) at garbage collection or exit.
        self._finalizer = weakref.finalize(self, _abort_run, tracker, self.trial_reporter, self.who)

    def begin_epoch(self) -> None:
        """Open an epoch (no-op outside a run or inside an open epoch)."""
        if self.training and not self.in_epoch:
            self.require_tracker().on_epoch_begin()
            if self.insights_run is not None:
                self.insights_run.epoch_begin(self.steps_done)

    def begin_step(self) -> None:
        """Open an optimizer step (the simulated GPU, if any, computes until :meth:`end_step`).

        Opens the epoch too when the framework announced none (Lightning resuming mid-epoch).
        """
        if self.training:
            self.begin_epoch()
            self._set_busy(True)
            self.require_tracker().on_step_begin()

    def end_step(self, steps: int = 1) -> dict[str, float]:
        """Close the step; returns step figures when a multiple of ``log_every_n_steps`` was passed.

        Args:
            steps: Optimizer steps the window held (the framework's ``global_step`` delta).
        """
        if not self.training:
            return {}
        self._set_busy(False)
        tracker = self.require_tracker()
        tracker.on_step_end(steps)
        if self.insights_run is not None:
            self.insights_run.step_end(tracker)
        return dict(tracker.step_metrics)

    def end_epoch(self) -> dict[str, float]:
        """Close the epoch: its figures (a collective under torch.distributed) plus optimizer metrics."""
        if not self.in_epoch:
            return {}
        tracker = self.require_tracker()
        tracker.on_epoch_end()
        metrics = {**tracker.epoch_metrics, **self.optimizer_metrics()}
        self.epoch_history.append(metrics)
        if self.verbose:
            console.info(
                f"Epoch {len(self.epoch_history)}: {_summary(metrics, metric_key, 'epoch')}"
                + _extras(self.optimizer_metrics())
            )
        if self.insights_run is not None:
            metrics.update(self.insights_run.epoch_end(dict(metrics), tracker))
        return metrics

    def end_train(self) -> dict[str, float]:
        """End the run normally (collective); returns and keeps the whole run's figures."""
        return self._end(failed=False)

    def abort(self) -> dict[str, float]:
        """End the run after a failure: this rank's own figures, no collective; optimizers restore."""
        return self._end(failed=True)

    def _end(self, failed: bool) -> dict[str, float]:
        if not self.training:
            return self.train_metrics
        tracker = self.require_tracker()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._stage = None
        self._set_busy(False)
        try:
            tracker.on_train_end(failed=failed)
        finally:
            self.train_metrics = dict(tracker.train_metrics)
            if self.trial_reporter is not None:
                self.trial_reporter.end(failed=failed)
        run, self.insights_run = self.insights_run, None
        if run is not None and self.train_metrics:
            self.train_metrics.update(run.train_end(self.train_metrics, failed, self.zeus_optimizers))
        if self.verbose and self.train_metrics:
            summary = _summary(self.train_metrics, metric_key, "train")
            if failed:
                where = " on this rank" if distributed.world_size() > 1 else ""
                console.warn(f"{self.who}: training failed after{where} {summary}")
            else:
                console.info(f"Training used {summary}")
        return self.train_metrics

    # -- evaluation stages -------------------------------------------------------------------------------
    def begin_stage(self, stage: str | None = None) -> None:
        """Open an evaluation stage window; training pauses unless ``include_validation``.

        Args:
            stage: ``"val"``, ``"test"`` or ``"predict"``; ``None`` when only its end knows it.
        """
        tracker = self.require_tracker()
        if tracker.stage_open:
            return
        if stage is not None and stage not in STAGES:
            raise ZeusConfigError(f"begin_stage({stage!r}): use one of {', '.join(STAGES)}.")
        if self.training and not self.include_validation:
            tracker.pause()
        self._stage = stage
        self._set_busy(True)
        tracker.begin_stage()
        if self.insights_run is not None:
            self.insights_run.stage_begin()

    def end_stage(self, stage: str | None = None) -> dict[str, float]:
        """Close the stage window (a collective); training counts again. Returns its figures."""
        tracker = self.require_tracker()
        name = stage or self._stage
        if not tracker.stage_open or name is None:
            return {}
        self._stage = None
        self._set_busy(False)
        metrics = tracker.end_stage(name)
        if self.training and not self.include_validation:
            tracker.resume()
        self.stage_history[name].append(metrics)
        if self.insights_run is not None:
            self.insights_run.stage_end(name, metrics)
        if self.verbose:
            console.info(f"{_STAGE_TITLE[name]}: {_summary(metrics, stage_key, name)}")
        return metrics

    # -- energy insights ------------------------------------------------------------------------------
    def plan(self, epochs: float | None = None, steps: float | None = None, run_dir: Any = None) -> None:
        """What the framework knows of the run: planned epochs and optimizer steps, its output folder."""
        if self.insights_run is not None:
            self.insights_run.plan(epochs, steps, run_dir)

    def count_batch(self, batch: Any = None, args: Any = None, kwargs: Any = None) -> None:
        """Count a training batch (or a model call's ``args``/``kwargs``) for J/sample and J/token."""
        if self.insights_run is not None and self._stage is None and not self.require_tracker().stage_open:
            self.insights_run.count(batch, args, kwargs)

    # -- results ------------------------------------------------------------------------------------------
    def report_epoch(self, epoch: dict[str, float], metrics: Any) -> bool:
        """Report an epoch to the batch-size trial, if any; ``True`` means the server says stop.

        Args:
            epoch: The epoch's figures (from :meth:`end_epoch`).
            metrics: The framework's latest metrics, holding the trial's validation metric.
        """
        if self.trial_reporter is None or not epoch:
            return False
        return self.trial_reporter.epoch_end(
            epoch[metric_key("time", "epoch")], epoch[metric_key("energy", "epoch")], metrics
        )

    def optimizer_metrics(self) -> dict[str, float]:
        """Every optimizer's ``metrics()`` (e.g. ``{"power/limit_w": 250.0}``), merged."""
        out: dict[str, float] = {}
        for opt in self.zeus_optimizers:
            metrics = getattr(opt, "metrics", None)
            if callable(metrics):
                out.update({str(k): float(v) for k, v in dict(metrics()).items()})
        return out

    def _set_busy(self, busy: bool) -> None:
        for gpu in self._sim_gpus:
            gpu.set_busy(busy)

    # -- checkpointing --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Versioned, JSON-safe state (a collective under torch.distributed: every rank calls it)."""
        if self.tracker is None:
            return dict(self._pending or {})
        return {
            "version": LIFECYCLE_STATE_VERSION,
            "tracker": self.tracker.state_dict(),
            "epoch_history": [dict(m) for m in self.epoch_history],
            "stage_history": {k: [dict(m) for m in v] for k, v in self.stage_history.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` of any version (before or after :meth:`setup`)."""
        if self.tracker is None:
            self._pending = dict(state)
        else:
            self._load(state)

    def _load(self, state: dict[str, Any]) -> None:
        version = state.get("version")
        if version not in (1, LIFECYCLE_STATE_VERSION):
            logger.warning(
                "%s: checkpoint state has version %r (expected %d); loading what matches.",
                self.who,
                version,
                LIFECYCLE_STATE_VERSION,
            )
        tracker_state = state.get("tracker")
        if tracker_state is None and state.get("ranks"):  # the Hugging Face adapter's version 1
            ranks = state["ranks"]
            rank = distributed.rank()
            tracker_state = ranks[rank] if len(ranks) == distributed.world_size() else ranks[0]
        self.require_tracker().load_state_dict(tracker_state or {})
        self.epoch_history = [dict(m) for m in state.get("epoch_history", [])]
        saved_stages = state.get("stage_history", {})
        self.stage_history = {s: [dict(m) for m in saved_stages.get(s, [])] for s in STAGES}


class LifecycleResults:
    """What every adapter shows of its :class:`TrainingLifecycle` (in ``self.lifecycle``), read-only.

    Example:
        >>> from zeus_core.training import LifecycleResults, TrainingLifecycle
        >>> class MyAdapter(LifecycleResults):
        ...     def __init__(self):
        ...         self.lifecycle = TrainingLifecycle("MyAdapter", verbose=False)
        >>> MyAdapter().epoch_history, MyAdapter().monitor
        ([], None)
    """

    lifecycle: TrainingLifecycle

    @property
    def monitor(self) -> ZeusMonitor | None:
        """The monitor measuring this process (``None`` until the adapter builds one)."""
        return self.lifecycle.monitor

    @property
    def tracker(self) -> TrainingTracker | None:
        """The tracker measuring the current or last run (after set-up)."""
        return self.lifecycle.tracker

    @property
    def epoch_history(self) -> list[dict[str, float]]:
        """Every finished epoch's metrics, also those before a checkpoint resume."""
        return self.lifecycle.epoch_history

    @property
    def stage_history(self) -> dict[str, list[dict[str, float]]]:
        """Every validation (``"val"``), test and predict run's metrics."""
        return self.lifecycle.stage_history

    @property
    def train_metrics(self) -> dict[str, float]:
        """The last run's totals (empty before it ends)."""
        return self.lifecycle.train_metrics


_STAGE_TITLE = {"val": "Validation", "test": "Test", "predict": "Prediction"}


def _summary(metrics: dict[str, float], key: Any, scope: str) -> str:
    energy, time_s, power = (metrics.get(key(q, scope), 0.0) for q in ("energy", "time", "power"))
    mark = " [simulated]" if metrics.get("simulated") else ""
    return f"{energy:.1f} J in {time_s:.2f} s ({power:.1f} W){mark}"


def _extras(metrics: dict[str, float]) -> str:
    return "".join(f", {k}={v:g}" for k, v in metrics.items())
