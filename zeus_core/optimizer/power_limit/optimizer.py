"""GlobalPowerLimitOptimizer: just-in-time power-limit profiling with early stopping."""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.callback import TrainingCallback
from zeus_core.device._base import GPU, PowerLimitConstraints
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit._persistence import PersistenceMixin
from zeus_core.optimizer.power_limit.measurement import (
    EarlyStopping,
    PowerLimitMeasurement,
    drop_stalls,
)
from zeus_core.optimizer.power_limit.planner import (
    Action,
    ActionKind,
    candidate_limits,
    measured_enough,
    next_action,
    visit_cap,
)
from zeus_core.optimizer.power_limit.profile import (
    JobGPUs,
    gather_job_gpus,
)
from zeus_core.optimizer.power_limit.sampling import SampleWindow, sample_ends, steps_per_sample
from zeus_core.optimizer.power_limit.selectors import OptimumSelector, ZeusCost
from zeus_core.optimizer.power_limit.states import (
    Done,
    Profiling,
    Ready,
    State,
    Warmup,
)
from zeus_core.optimizer.power_limit.visits import Visit, VisitLog
from zeus_core.settings import Setting, SettingsGuard

__all__ = ["GlobalPowerLimitOptimizer", "window_name"]

logger = logging.getLogger(__name__)


def window_name(power_limit_w: float) -> str:
    """The monitor window that measures one power limit (the only place the name is made)."""
    return f"__GlobalPowerLimitOptimizer_{power_limit_w:g}"


_MAX_REJECTIONS = 2
"""Impossible measurements of one limit after which the limit is left out."""


def _argument_problems(
    *,
    optimum_selector: object,
    wait_steps: object,
    warmup_steps: object,
    profile_steps: object,
    pl_step: object,
    early_stopping: object,
    min_sample_s: object,
    power_tolerance: object,
    counter_period_s: object,
    budget_steps: object,
) -> list[str]:
    """Every bad constructor argument, each with the fix."""
    problems = []
    for name, value, example in (
        ("min_sample_s", min_sample_s, "0.25"),
        ("counter_period_s", counter_period_s, "0.1"),
        ("power_tolerance", power_tolerance, "0.05"),
    ):
        if not _is_number(value) or not 0 <= value < math.inf:  # type: ignore[operator]
            problems.append(f"{name}={value!r} (use a finite number >= 0, e.g. {example})")
    for name, value, low in (
        ("wait_steps", wait_steps, 0),
        ("warmup_steps", warmup_steps, 0),
        ("profile_steps", profile_steps, 1),
    ):
        if not _is_int(value) or value < low:  # type: ignore[operator]
            problems.append(f"{name}={value!r} (use an int >= {low})")
    if budget_steps is not None and (not _is_int(budget_steps) or budget_steps < 1):  # type: ignore[operator]
        problems.append(f"budget_steps={budget_steps!r} (use an int >= 1, or None for Zeus's sweep length)")
    if not _is_number(pl_step) or not pl_step > 0:  # type: ignore[operator]
        problems.append(f"pl_step={pl_step!r} (use a positive number of watts, e.g. 25)")
    if not isinstance(optimum_selector, OptimumSelector):
        problems.append(f"optimum_selector={optimum_selector!r} (use an OptimumSelector, e.g. Energy())")
    if early_stopping is not None and not isinstance(early_stopping, EarlyStopping):
        problems.append(f"early_stopping={early_stopping!r} (use an EarlyStopping or None)")
    return problems


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_gpus(gpus: Sequence[GPU]) -> PowerLimitConstraints:
    """The GPUs' common limit range; they must be one model and may have their limits set.

    Raises:
        ZeusConfigError: Different models or limit ranges.
        ZeusPermissionError: This process may not set power limits.
    """
    names = {g.name for g in gpus}
    constraints = {g.power_limit_constraints() for g in gpus}
    if len(names) > 1 or len(constraints) > 1:
        raise ZeusConfigError(
            "GlobalPowerLimitOptimizer sets one power limit on every monitored GPU, so they must be "
            f"the same model with the same limit range; got {[g.describe() for g in gpus]} with ranges "
            f"{sorted((c.min_w, c.max_w) for c in constraints)}. Monitor one kind of GPU "
            "(ZeusMonitor(gpu_indices=[...]))."
        )
    for gpu in gpus:
        try:
            gpu.check_control_permission()
        except ZeusPermissionError as e:
            raise ZeusPermissionError(
                f"GlobalPowerLimitOptimizer must set power limits on {gpu.describe()}, and this process "
                f"may not: {e}"
            ) from e
    return next(iter(constraints))


class _Event(enum.Enum):
    STEP_BEGIN = "step_begin"
    EPOCH_END = "epoch_end"


class GlobalPowerLimitOptimizer(PersistenceMixin, TrainingCallback):
    """Finds the best GPU power limit during the first steps of training and keeps it set.

    Driven by the training protocol (:mod:`zeus_core.callback`; steps are optimizer steps).
    From ``on_train_begin`` (or, in Zeus's documented loop, which has none, the first
    ``on_epoch_begin`` or ``on_step_begin``) it sets every monitored GPU to the highest limit,
    waits ``wait_steps`` steps, then profiles limits from the maximum down in ``pl_step`` W
    steps: each limit runs ``warmup_steps`` steps unmeasured (not when the limit measured next is
    the one just measured: nothing changed), then up to ``profile_steps`` measured steps. When
    the sweep ends, ``optimum_selector`` picks the limit (one line through
    :mod:`zeus_core.console` names it, the selector and the expected saving), which stays set
    on every GPU until ``on_train_end``, when the limits each GPU had at the start come back.

    **Budget.** No more than ``budget_steps`` steps run before the decision (default: Zeus's
    exhaustive sweep, ``wait_steps + (warmup_steps + profile_steps) × limits``); when they are
    spent, the limit is chosen from what was measured. Decisions are deterministic for identical
    inputs.

    **Epochs.** A measurement spans epoch boundaries: ``on_epoch_end`` keeps the limit set and
    the samples taken, and measuring resumes at the next ``on_step_begin``; time between epochs
    is never measured. The open sample is kept too (read at ``on_epoch_end``) when it holds at
    least half a sample's steps and, on every rank, ``on_epoch_end`` came right after an
    ``on_step_end`` (within a quarter of a step): nothing but training ran in it. Otherwise, as
    after an evaluation run before ``on_epoch_end`` (Lightning validates before its epoch
    ends), its steps are dropped.

    **Robustness.** Samples far slower than the visit's median are stalls and are dropped
    (:func:`~.measurement.drop_stalls`). A measurement whose average power per GPU exceeds its
    limit by more than ``power_tolerance`` plus one energy-counter update (``counter_period_s``)
    over the measured time is impossible: it is discarded and the limit measured again (left out
    after three impossible measurements).

    **Early stopping** (``early_stopping``; ``None`` gives Zeus's exhaustive sweep of every
    limit for ``profile_steps`` steps). A *survey sweep* gives each limit, from the maximum
    down, ``warmup_steps`` and then only ``min_steps`` measured steps, and stops as soon as no
    lower limit can win (the cost rose significantly, by more than ``margin``, at ``patience``
    consecutive limits after the best; or ``patience`` consecutive limits are significantly too
    slow for :class:`MaxSlowdownConstraint`). A *refinement* then measures only the contenders
    (limits not significantly worse than the best) again, each until its time-per-step and
    power estimates are tight (±``rel_tol`` at ``confidence``) or it is told apart from the
    others, or until the choice is known to be within ``tie_tol`` (0.5 %) of every contender's
    cost; each refinement visit adds up to ``profile_steps`` steps, up to ``max_refine_steps``
    (3 × ``profile_steps`` by default) in all. The
    rules, and the assumptions behind them, are stated in
    :mod:`zeus_core.optimizer.power_limit.planner`.

    **Samples.** The energy counter is read once per *sample*, a group of consecutive measured
    steps lasting at least ``min_sample_s``, not once per step: an NVML energy read takes
    milliseconds (it would slow the steps it measures) and the counter only advances every
    ~20–100 ms (per-step energies of short steps would be its quantisation). Each sample's read
    waits for queued GPU work. Means come from the whole window, variances from the samples,
    each weighted by its steps; no measurement is judged before it has ``min_samples`` samples
    (so the survey measures ``max(min_steps, min_samples samples)`` steps) and none calls
    ``read_window`` more often than it has steps. Sample ends are step counts that every rank
    agrees on: the first sample ends at the first of steps 1, 2, 4, … by which every rank's clock
    (all-reduced, max) saw ``min_sample_s`` pass, and its time ``T`` over its ``k`` steps
    (all-reduced) fixes ``n = ceil(min_sample_s · k / T)`` steps per sample, recomputed from
    the job-wide samples at each check. No rank decides from its own clock alone, so all ranks
    reach the same all-reduces. Steps of ``min_sample_s`` or longer are one sample each.
    Details in :mod:`zeus_core.optimizer.power_limit.sampling`.

    **Multiple GPUs and processes.** One limit is set on every monitored GPU. Under
    ``torch.distributed`` each rank monitors its own GPUs; measurements are reduced (energy
    summed over ranks, time the longest rank's) before every decision, so every rank takes the
    same decisions and sets the same limit. Only rank 0 logs and writes the profile file.

    **Profile file** (``profile_path``): after each profiled limit and at the decision the
    measurements are saved as JSON. A file present at ``on_train_begin`` is reused: its limits
    are not profiled again and, when it holds a finished sweep, training starts at the optimum.
    A file measured on another GPU model or another set of GPUs is rejected.

    **Restoring limits.** Original limits are restored on ``on_train_end``, when a protocol
    call raises, on :meth:`close` / leaving a ``with`` block, at interpreter exit and on
    SIGTERM/SIGINT (then passed on to the previous handler) — all through one restore path.

    Log lines (rank 0, logger ``zeus_core.optimizer.power_limit.optimizer``): one per profiled
    limit (W, s/step, average W, J/step, steps) and one for the decision.

    Args:
        monitor: Measures this process's GPUs; its ``gpus`` are the GPUs whose limit is set.
        optimum_selector: What "best" means (default: ``ZeusCost(0.5)``, Zeus's default).
        wait_steps: Steps to let pass before profiling (e.g. cuDNN autotuning), >= 0.
        warmup_steps: Unmeasured steps after each change of limit, >= 0.
        profile_steps: Most measured steps per limit in the sweep, >= 1 (contenders still tied
            after them may get up to ``early_stopping.max_refine_steps``).
        pl_step: Spacing of the profiled limits, W, > 0.
        profile_path: JSON file to reuse and to save the profile to (``None``: neither).
        early_stopping: Early-stopping knobs; ``None`` profiles every limit for
            ``profile_steps`` steps, as Zeus does.
        min_sample_s: Shortest sample, s, >= 0 (default 0.25: NVML energy reads take
            milliseconds and the counter updates every ~20–100 ms, so a 0.25 s sample keeps
            read cost near 1–2 % and counter steps to a fraction of the sample). 0.5–1 s suits
            GPUs whose counter updates every 100 ms (H100) better; 0 reads the counter after
            every step, unsynchronised, as earlier versions did.
        power_tolerance: Fraction above its limit a measured average power per GPU may be, >= 0
            (0.05: NVML's limit enforcement and power-sensor accuracy).
        counter_period_s: Energy-counter update period, s, >= 0 (0.1: an H100's); one update's
            energy at the limit, spread over the measured time, adds to the tolerance.
        budget_steps: Most steps before the decision, >= 1 (``None``: Zeus's sweep length).

    Raises:
        ZeusConfigError: A bad argument, no GPUs, or GPUs of different models or limit ranges.
        ZeusPermissionError: This process may not set power limits; the message says how to
            grant the permission.

    Example:
        >>> from zeus_core import SimulatedGPU, PhysicalModel, VirtualClock, ZeusMonitor, simulate_steps
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock)
        >>> plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=[gpu], cpu_indices=[]), warmup_steps=2,
        ...                                 profile_steps=5)
        >>> plo.on_train_begin(); plo.on_epoch_begin()
        >>> for _ in range(100):
        ...     plo.on_step_begin(); _ = simulate_steps([gpu], 1); plo.on_step_end()
        >>> plo.on_epoch_end(); plo.optimal_power_limit_w == gpu.get_power_limit()
        True
        >>> plo.on_train_end(); gpu.get_power_limit()  # back to the original limit
        300.0
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: float = 25,
        profile_path: str | Path | None = None,
        *,
        early_stopping: EarlyStopping | None = EarlyStopping(),
        min_sample_s: float = 0.25,
        power_tolerance: float = 0.05,
        counter_period_s: float = 0.1,
        budget_steps: int | None = None,
    ) -> None:
        optimum_selector = ZeusCost(0.5) if optimum_selector is None else optimum_selector
        problems = _argument_problems(
            optimum_selector=optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            early_stopping=early_stopping,
            min_sample_s=min_sample_s,
            power_tolerance=power_tolerance,
            counter_period_s=counter_period_s,
            budget_steps=budget_steps,
        )
        gpus: list[GPU] = list(getattr(monitor, "gpus", []))
        if not gpus:
            problems.append("the monitor has no GPUs (pass a ZeusMonitor that measures at least one GPU)")
        if problems:
            raise ZeusConfigError("GlobalPowerLimitOptimizer: " + "; ".join(problems) + ".")
        constraints = _check_gpus(gpus)

        self.monitor = monitor
        self.optimum_selector = optimum_selector
        self.wait_steps = wait_steps
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = float(pl_step)
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.early_stopping = early_stopping
        self.min_sample_s = float(min_sample_s)
        self.power_tolerance = float(power_tolerance)
        self.counter_period_s = float(counter_period_s)
        self._gpus = gpus
        self._constraints = constraints
        self.power_limits: list[float] = candidate_limits(
            self._constraints.max_w, self._constraints.min_w, self.pl_step
        )
        """Candidate limits, W, highest first."""
        self.budget_steps: int = (
            budget_steps
            if budget_steps is not None
            else wait_steps + (warmup_steps + profile_steps) * len(self.power_limits)
        )
        """Most steps before the decision (default: Zeus's sweep, wait + (warm-up + profile) × limits)."""

        self._state: State = Ready(self.power_limits[0], wait_steps + 1)
        self._measurements: list[PowerLimitMeasurement] = []
        self._job: JobGPUs | None = None
        self._loaded_state: Mapping[str, Any] | None = None
        self._active = False
        self._warned_inactive = False
        self._settings = SettingsGuard(
            gpus, {Setting.POWER_LIMIT}, what="GPU power limits", before_restore=self._deactivate
        )
        self._stale_window: str | None = None  # a measurement cut by a restore, cancelled by _restore
        self._window: SampleWindow | None = None
        self._step_ended_s: float | None = None  # monitor clock at on_step_end of the latest step
        self._warned_short = False
        self._steps_used = 0
        self._begun = False
        self._rejected: dict[float, int] = {}
        # Every finished visit's samples: each limit is re-judged with the job-wide jitter.
        self._visits = VisitLog()
        self._unsampled: list[PowerLimitMeasurement] = []  # resumed without samples (older files)

    # -- public read-only views ------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The current state of the profiling state machine."""
        return self._state

    @property
    def measurements(self) -> tuple[PowerLimitMeasurement, ...]:
        """Measurements of the limits profiled so far, highest limit first."""
        return tuple(self._measurements)

    @property
    def optimal_power_limit_w(self) -> float | None:
        """The chosen limit, W, once profiling is done (else ``None``)."""
        return self._state.optimal_power_limit_w if isinstance(self._state, Done) else None

    @property
    def active(self) -> bool:
        """Whether training is on: limits are being profiled or the chosen one is set."""
        return self._active

    @property
    def steps_used(self) -> int:
        """Steps run before the decision so far (wait, warm-up and measured steps of every limit)."""
        return self._steps_used

    def metrics(self) -> dict[str, float]:
        """Figures for a training logger: ``power/limit_w``, the limit now in force on the GPUs, W.

        Once a limit is chosen, ``power/optimal_limit_w`` (W) is there too. Framework adapters log
        this dict every epoch (Lightning's logger, Hugging Face's ``log_history``).
        """
        out = {"power/limit_w": float(self._gpus[0].get_power_limit())}
        if isinstance(self._state, Done):
            out["power/optimal_limit_w"] = float(self._state.optimal_power_limit_w)
        return out

    # -- training protocol ----------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        """Check the job's GPUs, reuse a saved profile or checkpoint, and set the starting limit.

        Optional: the first ``on_epoch_begin`` or ``on_step_begin`` begins training when this was
        not called (Zeus's documented loop has no such call).

        Raises:
            ZeusConfigError: Ranks monitor different GPU models, or two ranks monitor one GPU.
            ZeusProfileError: ``profile_path`` holds a profile of other hardware, or is malformed.
        """
        if self._active:
            logger.warning("GlobalPowerLimitOptimizer.on_train_begin called twice; ignoring the second call.")
            return
        try:
            self._job = gather_job_gpus(self._gpus)
            self._resume_progress()
            self._settings.record()  # restored on every exit path from here on
            self._active = self._begun = True
            self._warned_inactive = False
            self._announce_start()
        except BaseException:
            self._restore_quietly()
            raise

    def on_epoch_begin(self) -> None:
        """Begin training if nothing did yet (Zeus's loop starts with this call)."""
        self._begin_if_inactive()

    def on_step_begin(self) -> None:
        """Advance the state machine: count down, set limits, open or close measurements."""
        self._begin_if_inactive()
        self._step_ended_s = None
        self._dispatch(_Event.STEP_BEGIN)

    def on_step_end(self) -> None:
        """Note when the step ended: an epoch ending right after it keeps its open sample."""
        if isinstance(self._state, Profiling):
            self._step_ended_s = self.monitor.clock()

    def on_epoch_end(self) -> None:
        """Pause a measurement at the epoch boundary; it continues in the next epoch.

        The time between epochs (evaluation, checkpointing) is not measured, and the limit being
        profiled stays set, so epochs of any length cost no more profiling than one long epoch.
        """
        self._dispatch(_Event.EPOCH_END)

    def on_train_end(self) -> None:
        """Restore every GPU's original power limit (also called when training failed)."""
        self._restore()

    def close(self) -> None:
        """Restore the original power limits now (same as :meth:`on_train_end`)."""
        self._restore()

    def on_init_end(self, *args: Any, **kwargs: Any) -> None:
        """Refuse, with the fix, to be a Hugging Face ``TrainerCallback`` (its first event is this one).

        Raises:
            ZeusConfigError: Always.
        """
        raise ZeusConfigError(
            "GlobalPowerLimitOptimizer is not a Hugging Face TrainerCallback. Pass "
            "zeus_integrations.HFGlobalPowerLimitOptimizer(monitor, ...) (same arguments) to "
            "Trainer(callbacks=[...]) instead, or give this optimizer to ZeusTrainerCallback."
        )

    def _begin_if_inactive(self) -> None:
        """Zeus's loop: the first epoch or step event begins training (never again after a restore)."""
        if not self._active and not self._begun:
            self._info("GlobalPowerLimitOptimizer: training begins with the first epoch or step event.")
            self.on_train_begin()

    def _resume_progress(self) -> None:
        """Where profiling starts: a loaded checkpoint, the profile file, or an earlier fit."""
        if self._loaded_state is not None:  # a checkpoint wins over the profile file
            state, self._loaded_state = self._loaded_state, None
            self._apply_state_dict(state)
        elif self.profile_path is not None and not isinstance(self._state, Done):
            self._reuse_profile()
        elif isinstance(self._state, (Warmup, Profiling)):  # left mid-profile by an earlier fit
            self._state = Ready(self._state.power_limit_w, self.wait_steps + 1, self._state.refine)

    def _announce_start(self) -> None:
        if isinstance(self._state, Done):
            self._set_limit(self._state.optimal_power_limit_w)
            console.info(
                f"Power limit {self._state.optimal_power_limit_w:g} W applied without profiling "
                f"({self._state.reason}){self._tag()}."
            )
            return
        self._set_limit(self.power_limits[0])
        assert isinstance(self._state, Ready)
        self._info(
            "Profiling power limits %s W%s; %g W first, after %d step(s) at %g W; at most %d steps.",
            "/".join(f"{w:g}" for w in self.power_limits),
            self._tag(),
            self._state.next_power_limit_w,
            self._state.steps_left - 1,
            self.power_limits[0],
            self.budget_steps,
        )

    # -- state machine ----------------------------------------------------------------------------------
    def _dispatch(self, event: _Event) -> None:
        if not self._active:
            if not self._warned_inactive:
                self._warned_inactive = True
                logger.warning(
                    "GlobalPowerLimitOptimizer got %s outside training (before the first epoch or step began "
                    "it, or after the limits were restored); ignoring it.",
                    event.value,
                )
            return
        try:
            self._state = self._advance(self._state, event)
        except BaseException:
            self._restore_quietly()
            raise

    def _advance(self, state: State, event: _Event) -> State:
        """Apply ``event``, keeping to the step budget: no undecided step beyond ``budget_steps``."""
        if event is not _Event.STEP_BEGIN or isinstance(state, Done):
            return self._transition(state, event)
        state = self._transition(state, event)
        if isinstance(state, Done):
            return state
        if self._steps_used >= self.budget_steps:
            return self._out_of_budget(state)
        self._steps_used += 1
        return state

    def _transition(self, state: State, event: _Event) -> State:
        """The one place where states change (see :mod:`.states` for the diagram)."""
        match state, event:
            case Ready(next_power_limit_w=limit, steps_left=left, refine=refine), _Event.STEP_BEGIN:
                if left > 1:
                    return Ready(limit, left - 1, refine)
                self._set_limit(limit)
                return self._start_limit(limit, refine)
            case Warmup(power_limit_w=limit, steps_left=left, refine=refine), _Event.STEP_BEGIN:
                return Warmup(limit, left - 1, refine) if left > 1 else self._begin_measuring(limit, refine)
            case Profiling(paused=True) as paused, _Event.STEP_BEGIN:
                assert self._window is not None
                self._window.resume()
                return replace(paused, paused=False)
            case Profiling() as profiling, _Event.STEP_BEGIN:
                return self._measure_step(profiling)
            case Profiling(paused=False) as profiling, _Event.EPOCH_END:
                return self._pause(profiling)
            case _:
                return state

    def _start_limit(self, limit: float, refine: bool, changed: bool = True) -> State:
        """Warm up, then measure ``limit``; no warm-up when the limit did not change (nothing to settle)."""
        if self.warmup_steps > 0 and changed:
            return Warmup(limit, self.warmup_steps, refine)
        return self._begin_measuring(limit, refine)

    def _begin_measuring(self, limit: float, refine: bool) -> Profiling:
        rule = self.early_stopping
        first_check = 0 if rule is None else rule.check_every if refine else rule.min_steps
        self._window = SampleWindow(self.monitor, window_name(limit), first_check, sync=self.min_sample_s > 0)
        return Profiling(limit, refine=refine)

    def _measured(self, limit: float) -> PowerLimitMeasurement | None:
        return next((m for m in self._measurements if m.power_limit_w == limit), None)

    def _pause(self, state: Profiling) -> Profiling:
        """An epoch ended mid-measurement: keep its samples, the open one if it is clean (see the class)."""
        window = self._window
        assert window is not None
        if self._open_sample_is_clean(state):
            steps = state.steps + 1  # the epoch's last step ended too: on_step_end came after it
            reading = window.close_sample(steps, last=False)
            per_sample = state.steps_per_sample or window.agree_steps_per_sample(
                reading, steps - window.segment_start, self.min_sample_s
            )
            state = replace(state, steps=steps, steps_per_sample=per_sample)
        state = self._take_samples(state)
        kept = window.pause()
        logger.debug(
            "Measurement of %g W paused by the end of an epoch (%d steps kept).", state.power_limit_w, kept
        )
        return replace(state, steps=kept, paused=True)

    def _open_sample_is_clean(self, state: Profiling) -> bool:
        """Whether the open sample at an epoch end holds only training: same answer on every rank."""
        window = self._window
        assert window is not None
        if self.min_sample_s <= 0:
            return False
        per_sample = state.steps_per_sample
        open_steps = state.steps + 1 - window.boundary_step
        if per_sample and 2 * open_steps < per_sample:  # the same on every rank: no collective
            return False
        now = self.monitor.clock()
        ended = self._step_ended_s
        gap = math.inf if ended is None else now - ended
        gap, elapsed = distributed.all_reduce([gap, now - window.start_s], "max")
        if not per_sample:  # the first sample (rule 1): long enough if it lasted min_sample_s / 2
            return elapsed >= 0.5 * self.min_sample_s and gap <= 0.25 * elapsed / open_steps
        # Within a quarter of a step (a step lasts about min_sample_s / per_sample): nothing else ran.
        return gap <= 0.25 * self.min_sample_s / per_sample

    def _steps_left(self, state: Profiling, steps: int) -> int:
        """Steps this visit may still measure after measured step ``steps``: visit cap and budget."""
        prior = self._measured(state.power_limit_w) if state.refine else None
        prior_steps = prior.steps if prior is not None else 0
        visit_left = visit_cap(prior, self.profile_steps, self.early_stopping) - steps - prior_steps
        return min(visit_left, self.budget_steps - self._steps_used)

    def _sample_ends(self, state: Profiling, steps: int, left: int) -> tuple[int, bool]:
        """Steps per sample (0 until agreed) and whether the sample in progress ends now."""
        window = self._window
        assert window is not None
        per_sample = state.steps_per_sample or (1 if self.min_sample_s <= 0 else 0)  # 0: first sample
        if per_sample:
            return per_sample, sample_ends(steps, window.boundary_step, per_sample, left)
        # where every rank's clock says the first sample lasted min_sample_s (sampling rule 1)
        in_segment = steps - window.segment_start
        return 0, left <= 0 or (
            left >= in_segment and window.first_sample_ends(in_segment, self.min_sample_s)
        )

    def _judge_now(self, state: Profiling, steps: int, left: int) -> tuple[bool, bool]:
        """Whether this sample end is the visit's last, and whether to check the early-stopping rules."""
        window = self._window
        assert window is not None
        rule = self.early_stopping
        samples = len(state.sample_steps) + len(window.steps) + 1  # this visit's, the ending one included
        last = left <= 0
        if rule is None:
            return last, False
        if state.refine:
            prior = self._measured(state.power_limit_w)
            pooled = samples + (prior.samples or 0 if prior is not None else 0)
            return last, steps >= window.next_check and pooled >= rule.min_samples
        if self.optimum_selector.supports_early_stopping:  # survey: min_steps and min_samples
            return last or (steps >= rule.min_steps and samples >= rule.min_samples), False
        return last, steps >= window.next_check and samples >= rule.min_samples

    def _measure_step(self, state: Profiling) -> State:
        """A measured step ended: maybe end a sample (one read), check the rules, finish the limit."""
        window = self._window
        assert window is not None
        steps = state.steps + 1
        left = self._steps_left(state, steps)
        per_sample, ends = self._sample_ends(state, steps, left)
        if not ends:
            return replace(state, steps=steps, steps_per_sample=per_sample)
        last, check = self._judge_now(state, steps, left)
        reading = window.close_sample(steps, last)
        if not per_sample and not last:
            per_sample = window.agree_steps_per_sample(
                reading, steps - window.segment_start, self.min_sample_s
            )
        state = replace(state, steps=steps, steps_per_sample=per_sample)
        if not (last or check):
            return state
        state = self._take_samples(state)
        if not last and not self._measured_enough(state):
            rule = self.early_stopping
            assert rule is not None
            window.next_check += rule.check_every * (1 + (steps - window.next_check) // rule.check_every)
            partial = self._summarize(state)
            return replace(
                state, steps_per_sample=steps_per_sample(self.min_sample_s, partial.time_per_step_s)
            )
        window.close()
        return self._finish_limit(state)

    def _take_samples(self, state: Profiling) -> Profiling:
        """Add the window's pending samples, reduced across ranks, to the state."""
        assert self._window is not None
        times, energies, counts = self._window.reduce()
        return replace(
            state,
            times_s=state.times_s + tuple(times),
            energies_j=state.energies_j + tuple(energies),
            sample_steps=state.sample_steps + tuple(counts),
        )

    def _summarize(self, state: Profiling) -> PowerLimitMeasurement:
        """The visit's measurement from its samples, stalls dropped (:func:`.measurement.drop_stalls`)."""
        spread, _ = self._visits.spreads()
        times, energies, counts = drop_stalls(
            state.times_s, state.energies_j, state.sample_steps, step_spread=spread
        )
        return PowerLimitMeasurement.from_samples(
            state.power_limit_w, times, energies, self._num_gpus(), steps=counts
        )

    def _measured_enough(self, state: Profiling) -> bool:
        rule = self.early_stopping
        assert rule is not None
        visit = Visit(state.power_limit_w, state.times_s, state.energies_j, state.sample_steps)
        current = self._visits.measurements(self._num_gpus(), self._unsampled, extra=visit)
        (m,) = [x for x in current if x.power_limit_w == state.power_limit_w]
        # The other limits as they stand (without this visit's samples in the jitter estimate).
        return measured_enough(m, self._measurements, self.optimum_selector, rule, self.profile_steps)

    def _finish_limit(self, state: Profiling) -> State:
        limit = state.power_limit_w
        m = self._summarize(state)
        if self._impossible(m):
            return self._reject(m, state.refine)
        self._visits.add(Visit(limit, state.times_s, state.energies_j, state.sample_steps))
        # Every limit is re-judged: the job-wide jitter now includes this visit (see .visits).
        self._measurements = self._visits.measurements(self._num_gpus(), self._unsampled)
        m = next(x for x in self._measurements if x.power_limit_w == limit)
        self._warn_if_too_few_samples(m)
        self._info("%s %s%s", "Refined" if state.refine else "Profiled", m.describe(), self._tag())
        return self._follow(self._next_action(self._measurements), first_refine=not state.refine, set_w=limit)

    def _follow(self, action: Action, first_refine: bool = False, set_w: float | None = None) -> State:
        """Enter the state that carries out ``action``; ``set_w``: the limit the steps so far ran at, W."""
        if action.kind is ActionKind.DONE:
            return self._decide(action.power_limit_w, action.reason)
        self._save_profile(None, "")
        if action.kind is ActionKind.REFINE and first_refine:
            self._info("Sweep over (%s); measuring the contenders again to tell them apart.", action.reason)
        self._set_limit(action.power_limit_w)
        return self._start_limit(
            action.power_limit_w, action.kind is ActionKind.REFINE, changed=action.power_limit_w != set_w
        )

    def _impossible(self, m: PowerLimitMeasurement) -> bool:
        """Whether ``m``'s average power per GPU exceeds its limit beyond the device's tolerance.

        The tolerance is ``power_tolerance`` of the limit (NVML's enforcement and power-sensor
        accuracy, 5 % by default) plus one energy-counter update period's energy at the limit
        spread over the measured time (``counter_period_s`` × limit / measured s): a counter that
        moves every ``counter_period_s`` can put up to one update's energy into a window.
        """
        limit = m.power_limit_w
        measured_s = m.time_per_step_s * m.steps
        allowed = limit * (1.0 + self.power_tolerance) + limit * self.counter_period_s / measured_s
        return m.average_power_w / m.num_gpus > allowed

    def _reject(self, m: PowerLimitMeasurement, refine: bool) -> State:
        """Discard an impossible measurement and measure that limit again (twice at most)."""
        limit = m.power_limit_w
        self._rejected[limit] = self._rejected.get(limit, 0) + 1
        again = self._rejected[limit] <= _MAX_REJECTIONS
        console.warn(
            f"Power-limit optimizer: discarded the measurement of {limit:g} W: "
            f"{m.average_power_w / m.num_gpus:.0f} W per GPU on average is impossible under a {limit:g} W "
            f"limit (tolerance {self.power_tolerance:.0%} plus the energy counter's "
            f"{self.counter_period_s:g} s update period). "
            + ("Measuring it again." if again else "That limit is left out.")
        )
        if again:
            return self._start_limit(limit, refine)
        return self._follow(self._next_action(self._measurements))

    def _out_of_budget(self, state: State) -> State:
        """The step budget is spent while undecided: decide from what is measured."""
        if isinstance(state, Profiling) and self._window is not None:
            self._window.close()
        if not self._measurements:
            return self._decide(
                self.power_limits[0],
                f"no limit measured within the budget of {self.budget_steps} steps; kept the highest",
            )
        return self._decide(
            self.optimum_selector.select(self._measurements),
            f"the budget of {self.budget_steps} steps is spent",
        )

    def _warn_if_too_few_samples(self, m: PowerLimitMeasurement) -> None:
        """Once: ``profile_steps`` ended a limit before early stopping had the samples to judge it.

        The suggested ``profile_steps`` leaves room for the first sample, which may run up to about
        twice ``min_sample_s`` (sampling rule 1), and ``min_samples`` more.
        """
        rule = self.early_stopping
        if (
            rule is None
            or self._warned_short
            or m.steps < self.profile_steps
            or m.samples >= rule.min_samples  # type: ignore[operator]
        ):
            return
        self._warned_short = True
        if distributed.is_rank_zero():
            logger.warning(
                "Steps take %.1f ms, so profile_steps=%d measured steps hold %d sample(s) of "
                "min_sample_s=%g s, fewer than the %d early stopping needs to judge a limit: each limit is "
                "measured for all %d steps. Raise profile_steps to %d or more.",
                m.time_per_step_s * 1e3,
                self.profile_steps,
                m.samples,
                self.min_sample_s,
                rule.min_samples,
                self.profile_steps,
                (rule.min_samples + 1) * steps_per_sample(self.min_sample_s, m.time_per_step_s),
            )

    def _next_action(self, measurements: Sequence[PowerLimitMeasurement]) -> Action:
        """The planner's next action, among limits not left out, within the step budget."""
        candidates = [w for w in self.power_limits if self._rejected.get(w, 0) <= _MAX_REJECTIONS]
        if not candidates:
            return Action(ActionKind.DONE, self.power_limits[0], "every limit's measurement was impossible")
        action = next_action(
            measurements,
            candidates,
            self.optimum_selector,
            self.early_stopping,
            self.profile_steps,
            self._budget_left() // (self.warmup_steps + self.profile_steps),
        )
        rule = self.early_stopping
        shortest_visit = self.warmup_steps + (rule.min_steps if rule is not None else 1)
        if action.kind is not ActionKind.DONE and measurements and self._budget_left() < shortest_visit:
            return Action(
                ActionKind.DONE,
                self.optimum_selector.select(measurements),
                f"the budget of {self.budget_steps} steps is spent",
            )
        return action

    def _budget_left(self) -> int:
        return self.budget_steps - self._steps_used

    def _decide(self, optimal: float, reason: str) -> Done:
        measured = {m.power_limit_w for m in self._measurements}
        skipped = [w for w in self.power_limits if w not in measured]
        self._set_limit(optimal)
        self._info(
            "Optimal power limit: %g W by %r%s, after profiling %d of %d limits in %d measured steps; %s%s.",
            optimal,
            self.optimum_selector,
            self._tag(),
            len(self._measurements),
            len(self.power_limits),
            sum(m.steps for m in self._measurements),
            reason,
            f" (not profiled: {'/'.join(f'{w:g}' for w in skipped)} W)" if skipped else "",
        )
        console.info(self._decision_line(optimal))
        self._save_profile(optimal, reason)
        return Done(optimal, reason)

    def _decision_line(self, optimal: float) -> str:
        """One line for the user: the limit, the selector, and the expected saving against the maximum."""
        head = (
            f"Power limit {optimal:g} W chosen by {self.optimum_selector!r} after {self._steps_used} "
            f"profiling steps{self._tag()}"
        )
        chosen, top = self._measured(optimal), self._measurements[0] if self._measurements else None
        if (
            chosen is None
            or top is None
            or top is chosen
            or top.energy_per_step_j <= 0
            or top.time_per_step_s <= 0
        ):
            return head + "."
        energy = 1.0 - chosen.energy_per_step_j / top.energy_per_step_j
        time = chosen.time_per_step_s / top.time_per_step_s - 1.0
        return (
            f"{head}: expected {energy:+.1%} energy saved per step, time per step {time:+.1%}, "
            f"compared with {top.power_limit_w:g} W."
        )

    # -- limits, restore ----------------------------------------------------------------------------------
    def _set_limit(self, watts: float) -> None:
        for gpu in self._gpus:
            if gpu.get_power_limit() != watts:
                gpu.set_power_limit(watts)

    def _restore(self) -> None:
        """The single restore path: put back every GPU's limit found at ``on_train_begin``."""
        restored = self._settings.restore()  # calls _deactivate first; signals wait until it is done
        window, self._stale_window = self._stale_window, None
        if window is not None and window in self.monitor.open_windows:
            self.monitor.end_window(window, cancel=True)
        if restored:
            self._info(
                "Restored the original power limits (%s).",
                ", ".join(f"GPU {i}: {s.power_limit_w:g} W" for i, s in self._settings.recorded.items()),
            )

    def _deactivate(self) -> None:
        """Stop changing limits; the settings guard runs this before it restores.

        It may run inside a signal handler, so it only changes this object's state (no monitor
        call that could wait on a lock the interrupted thread holds); :meth:`_restore` cancels the
        measurement that was cut short.
        """
        self._active = False
        if isinstance(self._state, Profiling):
            self._stale_window = window_name(self._state.power_limit_w)
        if isinstance(self._state, (Warmup, Profiling)):
            self._state = Ready(self._state.power_limit_w, self.wait_steps + 1, self._state.refine)

    def _cancel_open_window(self) -> None:
        if isinstance(self._state, Profiling):
            name = window_name(self._state.power_limit_w)
            if name in self.monitor.open_windows:
                self.monitor.end_window(name, cancel=True)

    def _restore_quietly(self) -> None:
        try:
            self._restore()
        except Exception:  # the original error matters more; the failure is logged in _restore
            logger.debug("Restoring power limits failed while handling another error.", exc_info=True)

    # -- job ------------------------------------------------------------------------------------------------
    def _num_gpus(self) -> int:
        return self._job.num_gpus if self._job is not None else len(self._gpus)

    # -- logging ------------------------------------------------------------------------------------------
    def _tag(self) -> str:
        return " [simulated GPUs]" if any(g.simulated for g in self._gpus) else ""

    @staticmethod
    def _info(msg: str, *args: Any) -> None:
        if distributed.is_rank_zero():
            logger.info(msg, *args)

    # -- context manager ------------------------------------------------------------------------------
    def __enter__(self) -> "GlobalPowerLimitOptimizer":
        """``with GlobalPowerLimitOptimizer(...) as plo:``: the original limits come back at the exit."""
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """Restore the limits found at ``on_train_begin`` (also when the block raised)."""
        if exc_type is None:
            self._restore()
        else:
            self._restore_quietly()  # the block's error matters more; a failed restore is logged
