"""TrainingTracker: measures a training run through the training protocol.

It measures the whole run, every epoch, every evaluation stage and (optionally) every N-th
optimizer step with a :class:`~zeus_core.monitor.ZeusMonitor`, sums the energy over ranks, turns
the results into metric dictionaries with fixed keys (:func:`metric_key`, :func:`stage_key`; the
table is in docs/integrations.md) and forwards every event to the Zeus optimizers it was given.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from zeus_core import _distributed as distributed
from zeus_core.callback import CallbackList, TrainingCallback, TrainingProtocol
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._measurement import Measurement

__all__ = ["TrainingTracker", "metric_key", "stage_key", "check_tracker_args", "STAGES"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 2  # 2: adds the running epoch's totals ("epoch_part")

STAGES = ("val", "test", "predict")


def metric_key(quantity: str, scope: str, device: str | None = None) -> str:
    """The one place metric names are made.

    Args:
        quantity: ``"energy"``, ``"time"`` or ``"power"``.
        scope: ``"epoch"``, ``"step"`` or ``"train"``.
        device: A device label such as ``"gpu0"`` for per-device energy, or a device kind
            (``"gpu"``, ``"cpu"``, ``"dram"``) for per-kind totals.
    """
    unit = {"energy": "j", "time": "s", "power": "w"}[quantity]
    if quantity == "power":
        return "power/avg_w" if scope == "epoch" else f"power/{scope}_avg_w"
    middle = f"{scope}_{device}" if device else scope
    return f"{quantity}/{middle}_{unit}"


def stage_key(quantity: str, stage: str, device: str | None = None) -> str:
    """Metric names of an evaluation stage (``"val"``, ``"test"``, ``"predict"``).

    Args:
        quantity: ``"energy"`` (J), ``"time"`` (s) or ``"power"`` (W).
        stage: The stage, one of :data:`STAGES`.
        device: A device label such as ``"gpu0"`` for per-device energy.
    """
    if quantity == "power":
        return f"power/{stage}/avg_w"
    unit = {"energy": "j", "time": "s"}[quantity]
    return f"{quantity}/{stage}/{device or 'total'}_{unit}"


def check_tracker_args(
    who: str,
    zeus_optimizers: TrainingProtocol | Sequence[TrainingProtocol] | None,
    log_every_n_steps: int | None,
) -> list[TrainingProtocol]:
    """Validate what adapters and :class:`TrainingTracker` take; returns the optimizers as a list.

    Args:
        who: The call to name in error messages, e.g. ``"ZeusCallback"``.
        zeus_optimizers: ``None``, one protocol object, or a sequence of them.
        log_every_n_steps: A positive step count or ``None``.

    Raises:
        ZeusConfigError: An object does not implement the training protocol, or the step count is
            not positive.
    """
    if zeus_optimizers is None:
        found: list[TrainingProtocol] = []
    elif isinstance(zeus_optimizers, (list, tuple)):
        found = list(zeus_optimizers)
    else:
        found = [zeus_optimizers]  # type: ignore[list-item]
    for opt in found:
        if not isinstance(opt, TrainingProtocol):
            raise ZeusConfigError(
                f"{who}: {type(opt).__name__} does not implement the training protocol (on_train_begin, "
                "on_epoch_begin, on_step_begin, on_step_end, on_epoch_end, on_train_end). Subclass "
                "zeus_core.TrainingCallback."
            )
    if log_every_n_steps is not None and (isinstance(log_every_n_steps, bool) or log_every_n_steps < 1):
        raise ZeusConfigError(
            f"{who}: log_every_n_steps={log_every_n_steps!r}; use a positive step count or None."
        )
    return found


@dataclass
class _Totals:
    """Sum of several measurements of one rank (segments of a paused window), J and s."""

    time: float = 0.0
    devices: dict[str, float] = field(default_factory=dict)
    estimated: bool = False
    simulated: bool = False

    def add(self, m: Measurement) -> None:
        self.time += m.time
        for kind, energies in (("gpu", m.gpu_energy), ("cpu", m.cpu_energy), ("dram", m.dram_energy)):
            for idx, joules in (energies or {}).items():  # None: not measured (Zeus's shape)
                label = f"{kind}{idx}"
                self.devices[label] = self.devices.get(label, 0.0) + joules
        self.estimated |= m.estimated
        self.simulated |= m.simulated

    def merge(self, other: "_Totals") -> None:
        """Add another sum (e.g. the part of an epoch run before a checkpoint resume)."""
        self.time += other.time
        for label, joules in other.devices.items():
            self.devices[label] = self.devices.get(label, 0.0) + joules
        self.estimated |= other.estimated
        self.simulated |= other.simulated

    def as_state(self) -> dict[str, Any]:
        return {"time_s": self.time, "energy_j": dict(self.devices)}


class TrainingTracker(TrainingCallback):
    """Measures a training run and forwards protocol events to the Zeus optimizers it drives.

    Args:
        monitor: The monitor measuring this process's devices.
        zeus_optimizers: Protocol objects (e.g. ``GlobalPowerLimitOptimizer``) that receive every event.
            Begin events reach them after the tracker opened its windows; end events before the
            tracker closes them, so their own windows nest inside the tracker's.
        log_every_n_steps: Measure every N-th optimizer step (``None``: no step windows).

    Example:
        >>> from zeus_core import ZeusMonitor
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> from zeus_core.training import TrainingTracker
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> tracker = TrainingTracker(ZeusMonitor(gpus=[gpu], cpu_indices=[]))
        >>> tracker.on_train_begin(); tracker.on_epoch_begin(); clock.advance(2.0); tracker.on_epoch_end()
        >>> tracker.epoch_metrics["energy/epoch_j"], tracker.epoch_metrics["time/epoch_s"]
        (600.0, 2.0)
        >>> tracker.on_train_end()
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        zeus_optimizers: Sequence[TrainingProtocol] = (),
        log_every_n_steps: int | None = None,
    ) -> None:
        checked = check_tracker_args("TrainingTracker", list(zeus_optimizers), log_every_n_steps)
        self.monitor = monitor
        self.zeus_optimizers = CallbackList(checked)
        self.log_every_n_steps = log_every_n_steps
        self.epochs_done = 0
        self.steps_done = 0
        self.epoch_metrics: dict[str, float] = {}
        self.step_metrics: dict[str, float] = {}
        self.train_metrics: dict[str, float] = {}
        # Step windows whose energy the monitor's background reader has not finalized yet (step count
        # at their end, measurement): published once final, so a step never waits on the device.
        self._pending_steps: deque[tuple[int, Measurement]] = deque()
        self._prior = _Totals()  # totals from before a checkpoint resume
        self._epoch_part = _Totals()  # the resumed epoch's part run before its checkpoint
        self._train = _Totals()
        self._epoch = _Totals()
        self._paused = False
        self._in_train = False
        self._in_epoch = False
        self._step_open = False
        self._stage_open = False
        self._segment = 0

    # -- window helpers ---------------------------------------------------------------------------
    def _name(self, scope: str) -> str:
        return f"zeus_suite.{scope}.{id(self)}.{self._segment}"

    def pause(self) -> None:
        """Stop counting (e.g. during validation); :meth:`resume` continues the same windows."""
        if self._paused or not self._in_train:
            return
        self._train.add(self.monitor.end_window(self._name("train")))
        if self._in_epoch:
            self._epoch.add(self.monitor.end_window(self._name("epoch")))
        self._paused = True

    def resume(self) -> None:
        """Continue counting after :meth:`pause`."""
        if not self._paused:
            return
        self._paused = False
        self._segment += 1
        self.monitor.begin_window(self._name("train"))
        if self._in_epoch:
            self.monitor.begin_window(self._name("epoch"))

    @property
    def paused(self) -> bool:
        """Whether counting is paused."""
        return self._paused

    @property
    def in_train(self) -> bool:
        """Whether a training run is open (between ``on_train_begin`` and ``on_train_end``)."""
        return self._in_train

    @property
    def in_epoch(self) -> bool:
        """Whether an epoch is open."""
        return self._in_epoch

    # -- evaluation stages ------------------------------------------------------------------------
    @property
    def stage_open(self) -> bool:
        """Whether an evaluation stage window is open."""
        return self._stage_open

    def begin_stage(self) -> None:
        """Open the window of an evaluation stage (validation, test, predict); it is named at its end."""
        if self._stage_open:
            return
        self._stage_open = True
        self.monitor.begin_window(self._name("stage"))

    def end_stage(self, stage: str, local: bool = False) -> dict[str, float]:
        """Close the stage window and name its figures (see :func:`stage_key`).

        Args:
            stage: One of :data:`STAGES`.
            local: This rank's own figures, without a collective (failure paths).

        Returns:
            The stage's metrics, summed over ranks; empty when no stage window was open.
        """
        if stage not in STAGES:
            raise ZeusConfigError(f"end_stage({stage!r}): use one of {', '.join(STAGES)}.")
        if not self._stage_open:
            return {}
        self._stage_open = False
        totals = _Totals()
        totals.add(self.monitor.end_window(self._name("stage")))
        return self._metrics(totals, stage, local=local)

    # -- protocol -----------------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        """Open the run's window, then start the optimizers."""
        self._train = _Totals()
        self._paused = False
        self._segment += 1
        self.monitor.begin_window(self._name("train"))
        self._in_train = True
        self.zeus_optimizers.on_train_begin()

    def on_epoch_begin(self) -> None:
        """Open the epoch's window (a resumed epoch continues its sum)."""
        was_paused = self._paused
        self.resume()
        self._epoch, self._epoch_part = self._epoch_part, _Totals()  # a resumed epoch continues its sum
        self.monitor.begin_window(self._name("epoch"))
        self._in_epoch = True
        if was_paused:
            self.pause()
        self.zeus_optimizers.on_epoch_begin()

    def on_step_begin(self) -> None:
        """Open a step window when step figures are asked for."""
        if self.log_every_n_steps and not self._paused and not self._step_open:
            self.monitor.begin_window(self._name("step"))
            self._step_open = True
        self.zeus_optimizers.on_step_begin()

    def on_step_end(self, steps: int = 1) -> None:
        """End the open step window.

        Args:
            steps: Optimizer steps the window held (manual optimization may run several per batch,
                e.g. a GAN's two optimizers; ``0`` when the batch made none). Step figures are
                made when the count passes a multiple of ``log_every_n_steps``.
        """
        self.zeus_optimizers.on_step_end()
        before = self.steps_done
        self.steps_done += max(0, int(steps))
        self.step_metrics = {}
        if self._step_open:
            self._step_open = False
            n = self.log_every_n_steps or 1
            if self.steps_done // n != before // n:
                self._pending_steps.append((self.steps_done, self.monitor.end_window(self._name("step"))))
                self.step_metrics = self._ready_step_metrics()
            else:
                self.monitor.end_window(self._name("step"), cancel=True)

    def _ready_step_metrics(self) -> dict[str, float]:
        """Figures of the oldest step window whose energy is final, or ``{}`` while none is.

        On real GPUs a window's energy is final up to one energy-counter period (~0.1 s) after it
        ends, so step figures arrive that much later than their step, oldest first, each naming its
        optimizer step in ``zeus/step``. Every rank takes the same decision (a collective when
        distributed), since the figures are summed over ranks.
        """
        if not self._pending_steps:
            return {}
        ready = self._pending_steps[0][1].finalized
        if distributed.world_size() > 1:
            ready = distributed.all_reduce([1.0 if ready else 0.0], op="min")[0] > 0.0
        if not ready:
            return {}
        steps, measurement = self._pending_steps.popleft()
        step = _Totals()
        step.add(measurement)
        return {**self._metrics(step, "step"), "zeus/step": float(steps)}

    def on_epoch_end(self) -> None:
        """Close the epoch's window and make :attr:`epoch_metrics` (a collective)."""
        self.zeus_optimizers.on_epoch_end()
        if not self._in_epoch:
            return
        self._in_epoch = False
        if not self._paused:
            self._epoch.add(self.monitor.end_window(self._name("epoch")))
        self.epochs_done += 1
        self.epoch_metrics = self._metrics(self._epoch, "epoch")

    def on_train_end(self, failed: bool = False) -> None:
        """End the run (exactly once, also on failure).

        Args:
            failed: Training ended by an exception. Then other ranks may never reach this point,
                so ``train_metrics`` holds this rank's own figures and no collective is called.
        """
        try:
            if self._in_train:
                self._in_train = False
                self._pending_steps.clear()  # steps of the last ~0.1 s: in the epoch and fit totals
                self._cancel_open_windows()
                if not self._paused:
                    self._train.add(self.monitor.end_window(self._name("train")))
                self._paused = False
                total = _Totals()
                total.merge(self._prior)
                total.merge(self._train)
                self.train_metrics = self._metrics(total, "train", local=failed)
        finally:
            self.zeus_optimizers.on_train_end()

    def _cancel_open_windows(self) -> None:
        """Close step, stage and epoch windows without counting them (a run that ended early)."""
        for scope, is_open in (("step", self._step_open), ("stage", self._stage_open)):
            if is_open:
                self.monitor.end_window(self._name(scope), cancel=True)
        self._step_open = self._stage_open = False
        if self._in_epoch:  # training failed mid-epoch: close it without counting an epoch
            self._in_epoch = False
            if not self._paused:
                self.monitor.end_window(self._name("epoch"), cancel=True)

    # -- results -------------------------------------------------------------------------------------
    def _metrics(self, totals: _Totals, scope: str, local: bool = False) -> dict[str, float]:
        """Sum over ranks and name the numbers; every rank calls it at the same point (unless ``local``)."""
        world = 1 if local else distributed.world_size()
        if world > 1:
            gathered = distributed.all_gather_object(
                (totals.time, totals.devices, totals.estimated, totals.simulated)
            )
        else:
            gathered = [(totals.time, totals.devices, totals.estimated, totals.simulated)]
        time_s = max(g[0] for g in gathered)
        per_device: dict[str, float] = {}
        for rank, (_, devices, _, _) in enumerate(gathered):
            for label, joules in devices.items():
                per_device[f"rank{rank}_{label}" if world > 1 else label] = joules
        energy = sum(per_device.values())
        key = stage_key if scope in STAGES else metric_key
        out = {
            key("energy", scope): energy,
            key("time", scope): time_s,
            key("power", scope): energy / time_s if time_s > 0 else 0.0,
            "simulated": float(any(g[3] for g in gathered)),
            "estimated": float(any(g[2] for g in gathered)),
        }
        if scope == "train":
            for kind in ("gpu", "cpu", "dram"):
                out[metric_key("energy", scope, kind)] = sum(  # per device kind, J
                    (v for k, v in per_device.items() if k.split("_")[-1].startswith(kind)), 0.0
                )
        elif scope != "step":
            for label, joules in per_device.items():
                out[key("energy", scope, label)] = joules
        return out

    # -- checkpointing -------------------------------------------------------------------------------
    def _live(self, scope: str) -> _Totals:
        """The running window of ``scope`` so far (empty when paused or closed)."""
        running = _Totals()
        is_open = self._in_train if scope == "train" else self._in_epoch
        if is_open and not self._paused:
            running.add(self.monitor.read_window(self._name(scope)))
        return running

    def running_train(self) -> tuple[float, float]:
        """This rank's time (s) and energy (J) of the run so far, a resumed run's earlier part included."""
        so_far = _Totals()
        for part in (self._prior, self._train, self._live("train")):
            so_far.merge(part)
        return so_far.time, sum(so_far.devices.values())

    def running_epoch(self) -> tuple[float, float]:
        """This rank's time (s) and energy (J) of the open epoch so far; ``(0, 0)`` outside an epoch."""
        so_far = _Totals()
        if self._in_epoch:
            so_far.merge(self._epoch)
            so_far.merge(self._live("epoch"))
        return so_far.time, sum(so_far.devices.values())

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state: totals so far, the running epoch's part, and each optimizer's state.

        Under torch.distributed every rank must call this at the same point: ``"ranks"`` holds every
        rank's own totals (each rank measures only its devices), so a resumed job adds each rank's
        prior energy exactly once (see :meth:`load_state_dict`). A checkpoint saved inside an epoch
        holds that epoch's figures so far, so a resumed fit continues the epoch.
        """
        done = _Totals()
        for part in (self._prior, self._train, self._live("train")):
            done.merge(part)
        epoch = _Totals()
        if self._in_epoch:
            epoch.merge(self._epoch)
            epoch.merge(self._live("epoch"))
        own = {**done.as_state(), "epoch_part": epoch.as_state() if self._in_epoch else None}
        ranks = distributed.all_gather_object(own) if distributed.world_size() > 1 else [own]
        return {
            "version": _STATE_VERSION,
            "epochs_done": self.epochs_done,
            "steps_done": self.steps_done,
            "time_s": done.time,
            "energy_j": done.devices,
            "ranks": ranks,
            "optimizers": [
                opt.state_dict() if hasattr(opt, "state_dict") else None
                for opt in self.zeus_optimizers.callbacks
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (any version): totals and a running epoch carry on."""
        version = state.get("version")
        if version not in (1, _STATE_VERSION):
            logger.warning(
                "TrainingTracker state has version %r (expected %d); loading what matches.",
                version,
                _STATE_VERSION,
            )
        self.epochs_done = int(state.get("epochs_done", 0))
        self.steps_done = int(state.get("steps_done", 0))
        self._prior, self._epoch_part = _prior_of_this_rank(state)
        saved = state.get("optimizers", [])
        for opt, opt_state in zip(self.zeus_optimizers.callbacks, saved):
            if opt_state is not None and hasattr(opt, "load_state_dict"):
                opt.load_state_dict(opt_state)
        if len(saved) != len(self.zeus_optimizers.callbacks):
            logger.warning(
                "Checkpoint holds state for %d optimizers, this tracker drives %d.",
                len(saved),
                len(self.zeus_optimizers.callbacks),
            )


def _totals_of(entries: list[dict[str, Any]]) -> _Totals:
    totals = _Totals()
    for entry in entries:
        totals.time = max(totals.time, float(entry.get("time_s", 0.0)))
        for label, joules in entry.get("energy_j", {}).items():
            totals.devices[label] = totals.devices.get(label, 0.0) + float(joules)
    return totals


def _prior_of_this_rank(state: dict[str, Any]) -> tuple[_Totals, _Totals]:
    """This rank's share of the totals in a checkpoint, and of its running epoch (J, s).

    Same world size: each rank continues its own totals. Otherwise the saved totals are merged
    into global rank 0 (per device label) and other ranks start from zero, so the job total is
    still counted exactly once.
    """
    entries = state.get("ranks") or [
        {"time_s": state.get("time_s", 0.0), "energy_j": state.get("energy_j", {})}
    ]
    world, rank = distributed.world_size(), distributed.rank()
    if len(entries) == world:
        mine = [entries[rank]]
    else:
        logger.warning(
            "Checkpoint totals come from %d rank(s), this job has %d; rank 0 carries them on.",
            len(entries),
            world,
        )
        mine = entries if rank == 0 else []
    parts = [e["epoch_part"] for e in mine if isinstance(e.get("epoch_part"), dict)]
    return _totals_of(mine), _totals_of(parts)
