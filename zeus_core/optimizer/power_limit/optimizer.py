"""GlobalPowerLimitOptimizer: just-in-time power-limit profiling with early stopping."""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from zeus_core import distributed
from zeus_core.callback import TrainingCallback
from zeus_core.device.base import GPU
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError
from zeus_core.monitor.energy import ZeusMonitor
from zeus_core.optimizer.power_limit._persistence import PersistenceMixin
from zeus_core.optimizer.power_limit.measurement import EarlyStopping, PowerLimitMeasurement
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
from zeus_core.optimizer.power_limit.selectors import MaxSlowdownConstraint, OptimumSelector
from zeus_core.optimizer.power_limit.states import (
    Done,
    Profiling,
    Ready,
    State,
    Warmup,
)
from zeus_core.settings import Setting, SettingsGuard

__all__ = ["GlobalPowerLimitOptimizer", "window_name"]

logger = logging.getLogger(__name__)


def window_name(power_limit_w: float) -> str:
    """The monitor window that measures one power limit (the only place the name is made)."""
    return f"__GlobalPowerLimitOptimizer_{power_limit_w:g}"


class _Event(enum.Enum):
    STEP_BEGIN = "step_begin"
    EPOCH_END = "epoch_end"


class GlobalPowerLimitOptimizer(PersistenceMixin, TrainingCallback):
    """Finds the best GPU power limit during the first steps of training and keeps it set.

    Driven by the training protocol (:mod:`zeus_core.callback`; steps are optimizer steps).
    From ``on_train_begin`` it sets every monitored GPU to the highest limit, waits
    ``wait_steps`` steps, then profiles limits from the maximum down in ``pl_step`` W steps:
    each limit runs ``warmup_steps`` steps unmeasured, then up to ``profile_steps`` measured
    steps. When the sweep ends, ``optimum_selector`` picks the limit, which stays set on every
    GPU until ``on_train_end``, when the limits each GPU had at ``on_train_begin`` come back. An
    ``on_epoch_end`` during a limit's warm-up or measurement cancels it; that limit is profiled
    again from the next step.

    **Early stopping** (``early_stopping``; ``None`` gives Zeus's exhaustive sweep of every
    limit for ``profile_steps`` steps). A *survey sweep* gives each limit, from the maximum
    down, ``warmup_steps`` and then only ``min_steps`` measured steps, and stops as soon as no
    lower limit can win (the cost rose significantly, by more than ``margin``, at ``patience``
    consecutive limits after the best; or ``patience`` consecutive limits are significantly too
    slow for :class:`MaxSlowdownConstraint`). A *refinement* then measures only the contenders
    (limits not significantly worse than the best) again, each until its time-per-step and
    power estimates are tight (±``rel_tol`` at ``confidence``) or it is told apart from the
    others, or until the choice is known to be within ``tie_tol`` (0.5 %) of every contender's
    cost; contenders still tied after ``profile_steps`` steps are measured on, in rounds of
    ``profile_steps``, up to ``max_refine_steps`` (3 × ``profile_steps`` by default) in all. The
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
        optimum_selector: What "best" means (default: least energy within 10 % of the fastest).
        wait_steps: Steps to let pass before profiling (e.g. cuDNN autotuning), >= 0.
        warmup_steps: Unmeasured steps after setting each limit, >= 0.
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
        optimum_selector: OptimumSelector = MaxSlowdownConstraint(1.1),
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: float = 25,
        profile_path: str | Path | None = None,
        *,
        early_stopping: EarlyStopping | None = EarlyStopping(),
        min_sample_s: float = 0.25,
    ) -> None:
        problems = []
        if (
            isinstance(min_sample_s, bool)
            or not isinstance(min_sample_s, (int, float))
            or not 0 <= min_sample_s < math.inf
        ):
            problems.append(f"min_sample_s={min_sample_s!r} (use a number of seconds >= 0, e.g. 0.25)")
        if not isinstance(wait_steps, int) or wait_steps < 0:
            problems.append(f"wait_steps={wait_steps!r} (use an int >= 0)")
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            problems.append(f"warmup_steps={warmup_steps!r} (use an int >= 0)")
        if not isinstance(profile_steps, int) or profile_steps < 1:
            problems.append(f"profile_steps={profile_steps!r} (use an int >= 1)")
        if not pl_step > 0:
            problems.append(f"pl_step={pl_step!r} (use a positive number of watts, e.g. 25)")
        if not isinstance(optimum_selector, OptimumSelector):
            problems.append(f"optimum_selector={optimum_selector!r} (use an OptimumSelector, e.g. Energy())")
        if early_stopping is not None and not isinstance(early_stopping, EarlyStopping):
            problems.append(f"early_stopping={early_stopping!r} (use an EarlyStopping or None)")
        gpus: list[GPU] = list(getattr(monitor, "gpus", []))
        if not gpus:
            problems.append("the monitor has no GPUs (pass a ZeusMonitor that measures at least one GPU)")
        if problems:
            raise ZeusConfigError("GlobalPowerLimitOptimizer: " + "; ".join(problems) + ".")

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

        self.monitor = monitor
        self.optimum_selector = optimum_selector
        self.wait_steps = wait_steps
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = float(pl_step)
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.early_stopping = early_stopping
        self.min_sample_s = float(min_sample_s)
        self._gpus = gpus
        self._constraints = next(iter(constraints))
        self.power_limits: list[float] = candidate_limits(
            self._constraints.max_w, self._constraints.min_w, self.pl_step
        )
        """Candidate limits, W, highest first."""

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
        self._warned_short = False
        self._epoch_cancels = 0

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

    # -- training protocol ----------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        """Check the job's GPUs, reuse a saved profile or checkpoint, and set the starting limit.

        Raises:
            ZeusConfigError: Ranks monitor different GPU models, or two ranks monitor one GPU.
            ZeusProfileError: ``profile_path`` holds a profile of other hardware, or is malformed.
        """
        if self._active:
            logger.warning("GlobalPowerLimitOptimizer.on_train_begin called twice; ignoring the second call.")
            return
        try:
            self._job = gather_job_gpus(self._gpus)
            if self._loaded_state is not None:  # a checkpoint wins over the profile file
                state, self._loaded_state = self._loaded_state, None
                self._apply_state_dict(state)
            elif self.profile_path is not None:
                self._reuse_profile()
            elif isinstance(self._state, (Warmup, Profiling)):  # left mid-profile by an earlier fit
                self._state = Ready(self._state.power_limit_w, self.wait_steps + 1, self._state.refine)
            self._settings.record()  # restored on every exit path from here on
            self._active = True
            self._warned_inactive = False
            if isinstance(self._state, Done):
                self._set_limit(self._state.optimal_power_limit_w)
                self._info(
                    "Power limit %g W applied without profiling (%s).",
                    self._state.optimal_power_limit_w,
                    self._state.reason,
                )
            else:
                self._set_limit(self.power_limits[0])
                assert isinstance(self._state, Ready)
                self._info(
                    "Profiling power limits %s W%s; %g W first, after %d step(s) at %g W.",
                    "/".join(f"{w:g}" for w in self.power_limits),
                    self._tag(),
                    self._state.next_power_limit_w,
                    self._state.steps_left - 1,
                    self.power_limits[0],
                )
        except BaseException:
            self._restore_quietly()
            raise

    def on_step_begin(self) -> None:
        """Advance the state machine: count down, set limits, open or close measurements."""
        self._dispatch(_Event.STEP_BEGIN)

    def on_epoch_end(self) -> None:
        """Cancel a warm-up or measurement cut by the epoch boundary; it is redone next epoch."""
        self._dispatch(_Event.EPOCH_END)

    def on_train_end(self) -> None:
        """Restore every GPU's original power limit (also called when training failed)."""
        self._restore()

    def close(self) -> None:
        """Restore the original power limits now (same as :meth:`on_train_end`)."""
        self._restore()

    # -- state machine ----------------------------------------------------------------------------------
    def _dispatch(self, event: _Event) -> None:
        if not self._active:
            if not self._warned_inactive:
                self._warned_inactive = True
                logger.warning(
                    "GlobalPowerLimitOptimizer got %s outside training (before on_train_begin or after the "
                    "limits were restored); ignoring it.",
                    event.value,
                )
            return
        try:
            self._state = self._transition(self._state, event)
        except BaseException:
            self._restore_quietly()
            raise

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
            case Profiling() as profiling, _Event.STEP_BEGIN:
                return self._measure_step(profiling)
            case Warmup(power_limit_w=limit, refine=refine) | Profiling(
                power_limit_w=limit, refine=refine
            ), _Event.EPOCH_END:
                if isinstance(state, Profiling):
                    self.monitor.end_window(window_name(limit), cancel=True)
                self._epoch_cancels += 1
                self._info(
                    "%s of %g W cut short by the end of an epoch; it is redone next epoch.",
                    "Warm-up" if isinstance(state, Warmup) else "Measurement",
                    limit,
                )
                if self._epoch_cancels == 3:
                    logger.warning(
                        "Epochs keep ending before a power limit is profiled (%d times). With %d warm-up and "
                        "up to %d measured steps per limit, epochs need more steps than that; lower "
                        "warmup_steps/profile_steps.",
                        self._epoch_cancels,
                        self.warmup_steps,
                        self.profile_steps,
                    )
                self._set_limit(self.power_limits[0])
                return Ready(limit, 1, refine)
            case _:
                return state

    def _start_limit(self, limit: float, refine: bool) -> State:
        if self.warmup_steps > 0:
            return Warmup(limit, self.warmup_steps, refine)
        return self._begin_measuring(limit, refine)

    def _begin_measuring(self, limit: float, refine: bool) -> Profiling:
        rule = self.early_stopping
        first_check = 0 if rule is None else rule.check_every if refine else rule.min_steps
        self._window = SampleWindow(self.monitor, window_name(limit), first_check, sync=self.min_sample_s > 0)
        return Profiling(limit, refine=refine)

    def _measured(self, limit: float) -> PowerLimitMeasurement | None:
        return next((m for m in self._measurements if m.power_limit_w == limit), None)

    def _measure_step(self, state: Profiling) -> State:
        """A measured step ended: maybe end a sample (one read), check the rules, finish the limit."""
        limit, refine, steps, window = state.power_limit_w, state.refine, state.steps + 1, self._window
        assert window is not None
        prior = self._measured(limit) if refine else None
        prior_steps = prior.steps if prior is not None else 0
        left = visit_cap(prior, self.profile_steps, self.early_stopping) - steps - prior_steps
        per_sample = state.steps_per_sample or (1 if self.min_sample_s <= 0 else 0)  # 0: first sample
        if per_sample:
            ends = sample_ends(steps, window.boundary_step, per_sample, left)
        else:  # where every rank's clock says the first sample lasted min_sample_s (sampling rule 1)
            ends = left <= 0 or (left >= steps and window.first_sample_ends(steps, self.min_sample_s))
        if not ends:
            return replace(state, steps=steps, steps_per_sample=per_sample)
        samples = len(state.sample_steps) + len(window.steps) + 1  # this visit's, the ending one included
        rule = self.early_stopping
        last, check = left <= 0, False
        if rule is not None:
            if refine:
                pooled = samples + (prior.samples if prior is not None else 0)
                check = steps >= window.next_check and pooled >= rule.min_samples
            elif self.optimum_selector.supports_early_stopping:  # survey: min_steps and min_samples
                last = last or (steps >= rule.min_steps and samples >= rule.min_samples)
            else:
                check = steps >= window.next_check and samples >= rule.min_samples
        reading = window.close_sample(steps, last)
        if not per_sample and not last:
            per_sample = window.agree_steps_per_sample(reading, steps, self.min_sample_s)
        if not (last or check):
            return replace(state, steps=steps, steps_per_sample=per_sample)
        reduced_t, reduced_e, counts = window.reduce()
        times, energies = state.times_s + tuple(reduced_t), state.energies_j + tuple(reduced_e)
        sample_steps = state.sample_steps + tuple(counts)
        if not last:
            assert rule is not None
            partial = PowerLimitMeasurement.from_samples(
                limit, times, energies, self._num_gpus(), steps=sample_steps
            )
            if not measured_enough(
                prior.merge(partial) if prior is not None else partial,
                self._measurements,
                self.optimum_selector,
                rule,
            ):
                window.next_check += rule.check_every * (1 + (steps - window.next_check) // rule.check_every)
                per_sample = steps_per_sample(self.min_sample_s, partial.time_per_step_s)  # same on all ranks
                return Profiling(limit, steps, times, energies, refine, sample_steps, per_sample)
            reading = window.end()  # synchronised totals
        return self._finish_limit(
            limit, reading.time, reading.gpu_total_energy, times, energies, sample_steps, prior
        )

    def _finish_limit(
        self,
        limit: float,
        local_time: float,
        local_energy: float,
        times: Sequence[float],
        energies: Sequence[float],
        sample_steps: Sequence[int],
        prior: PowerLimitMeasurement | None,
    ) -> State:
        (energy,) = distributed.all_reduce([local_energy], "sum")
        (elapsed,) = distributed.all_reduce([local_time], "max")
        m = PowerLimitMeasurement.from_samples(
            limit, times, energies, self._num_gpus(), elapsed, energy, steps=sample_steps
        )
        self._warn_if_too_few_samples(prior.merge(m) if prior is not None else m)
        if prior is None:
            self._measurements.append(m)
            self._info("Profiled %s%s", m.describe(), self._tag())
        else:
            m = prior.merge(m)
            self._measurements = [m if old.power_limit_w == limit else old for old in self._measurements]
            self._info("Refined %s%s", m.describe(), self._tag())
        action = self._next_action(self._measurements)
        if action.kind is ActionKind.DONE:
            return self._decide(action.power_limit_w, action.reason)
        self._save_profile(None, "")
        if action.kind is ActionKind.REFINE and prior is None:
            self._info("Sweep over (%s); measuring the contenders again to tell them apart.", action.reason)
        self._set_limit(action.power_limit_w)
        return self._start_limit(action.power_limit_w, refine=action.kind is ActionKind.REFINE)

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
            or m.samples >= rule.min_samples
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
        return next_action(
            measurements, self.power_limits, self.optimum_selector, self.early_stopping, self.profile_steps
        )

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
        self._save_profile(optimal, reason)
        return Done(optimal, reason)

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
