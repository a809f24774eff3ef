"""GlobalPowerLimitOptimizer: the state machine, the GPUs' limits and the checkpoint state.

Sampling, statistics and the plan live in their own modules (docs/optimizers/power-limit.md).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.callback import TrainingCallback
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement, Visit
from zeus_core.optimizer.power_limit._options import PowerLimitOptions, check_arguments
from zeus_core.optimizer.power_limit._planner import Action, Planner, PlanThread, Step, candidate_limits
from zeus_core.optimizer.power_limit._profile import check_gpus, gather_job_gpus
from zeus_core.optimizer.power_limit._record import Record
from zeus_core.optimizer.power_limit._sampling import Mode, Sampler, window_name
from zeus_core.optimizer.power_limit._selectors import OptimumSelector, ZeusCost
from zeus_core.optimizer.power_limit._states import Deciding, Done, Measuring, Ready, State, Warmup
from zeus_core.settings import Setting, SettingsGuard

__all__ = ["GlobalPowerLimitOptimizer"]

logger = logging.getLogger("zeus_core.optimizer.power_limit")
_STATE_VERSION = 2  # checkpoints of version 1 (measurements without samples) load too


def _info(msg: str, *args: Any) -> None:
    if distributed.is_rank_zero():
        logger.info(msg, *args)


class GlobalPowerLimitOptimizer(TrainingCallback):
    """Finds the best GPU power limit in the first steps of training and keeps it set.

    Driven by the training protocol or Zeus's documented loop, on every monitored GPU of every rank;
    the limits found at the start come back when training ends, on exceptions, at exit and on
    SIGTERM/SIGINT. How it works: docs/optimizers/power-limit.md.

    Args:
        monitor: Measures this process's GPUs; their limit is the one set.
        optimum_selector: What "best" means (default ``ZeusCost(0.5)``, as in Zeus).
        wait_steps: Steps before profiling starts, >= 0.
        warmup_steps: Unmeasured steps after each change of limit, >= 0.
        profile_steps: Zeus's measured steps per limit, >= 1 (its sweep's, and what a choice rests on).
        pl_step: Spacing of the profiled limits, W, > 0.
        profile_path: JSON profile to reuse and to save to (``None``: neither).
        options: The other knobs (:class:`PowerLimitOptions`); its fields are keyword arguments too.

    Raises:
        ZeusConfigError: A bad argument, no GPUs, or GPUs of different models or ranges.
        ZeusPermissionError: This process may not set power limits (the message says how).

    Example:
        >>> from zeus_core import PhysicalModel, SimulatedGPU, VirtualClock, ZeusMonitor
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
        >>> plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=[gpu], cpu_indices=[]), warmup_steps=2)
        >>> for epoch in range(3):  # Zeus's loop
        ...     plo.on_epoch_begin()
        ...     for step in range(200):
        ...         plo.on_step_begin(); _ = gpu.run_steps(1); plo.on_step_end()
        ...     plo.on_epoch_end()
        >>> plo.optimal_power_limit_w == gpu.get_power_limit()
        True
        >>> plo.close(); gpu.get_power_limit()
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
        options: PowerLimitOptions | None = None,
        **overrides: Any,
    ) -> None:
        selector = ZeusCost(0.5) if optimum_selector is None else optimum_selector
        gpus = list(getattr(monitor, "gpus", []))
        check_arguments(selector, gpus, wait_steps, warmup_steps, profile_steps, pl_step)
        self.options = PowerLimitOptions.of(options, overrides)
        constraints = check_gpus(gpus)
        self.monitor, self.optimum_selector, self.profile_steps = monitor, selector, profile_steps
        self.wait_steps, self.warmup_steps, self.pl_step = wait_steps, warmup_steps, float(pl_step)
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.power_limits = candidate_limits(constraints.max_w, constraints.min_w, self.pl_step)
        """Candidate limits, W, highest first."""
        self.budget_steps: int = self.options.budget_steps or (
            wait_steps + (warmup_steps + profile_steps) * len(self.power_limits)
        )
        """Most steps before the decision (default: Zeus's sweep length)."""
        self._gpus = gpus
        self._planner = Planner(selector, self.power_limits, self.options, profile_steps, warmup_steps)
        self._sampler = Sampler(monitor, self.options)
        self._settings = SettingsGuard(
            gpus, {Setting.POWER_LIMIT}, what="GPU power limits", before_restore=self._deactivate
        )
        self._state: State = Ready(self.power_limits[0], wait_steps + 1)
        self._action = Action(Step.MEASURE, self.power_limits[0], cap=profile_steps)
        self._record = Record(self.options, self.profile_path, repr(selector), self._tag())
        self._loaded_state: Mapping[str, Any] | None = None
        self._stale_window: str | None = None  # a visit cut by a restore, cancelled by _restore
        self._active = self._begun = self._warned_inactive = False
        self._steps_used = 0
        self._plans = PlanThread(self._simulated_clock)  # plans after each visit, off this thread

    # -- read-only views ----------------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The current state: ``Ready``, ``Warmup``, ``Measuring``, ``Deciding`` or ``Done``."""
        return self._state

    @property
    def measurements(self) -> tuple[PowerLimitMeasurement, ...]:
        """The limits measured so far, highest first."""
        self._plans.settle()
        return tuple(self._record.log.measurements())

    @property
    def visits(self) -> tuple[Visit, ...]:
        """Every finished visit's samples, in order (what the measurements come from)."""
        self._plans.settle()
        return tuple(self._record.log.visits)

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
        """Steps run before the decision so far (wait, warm-up, measured)."""
        return self._steps_used

    def metrics(self) -> dict[str, float]:
        """For loggers: ``power/limit_w`` (the limit in force, W); ``power/optimal_limit_w`` once chosen."""
        out = {"power/limit_w": float(self._gpus[0].get_power_limit())}
        if isinstance(self._state, Done):
            out["power/optimal_limit_w"] = float(self._state.optimal_power_limit_w)
        return out

    # -- training protocol --------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        """Check the job's GPUs, reuse a checkpoint or profile file, and set the starting limit.

        Raises:
            ZeusConfigError: Ranks monitor different GPU models, or two ranks one GPU.
            ZeusProfileError: ``profile_path`` holds another hardware's profile, or is malformed.
        """
        if self._active:
            logger.warning("GlobalPowerLimitOptimizer.on_train_begin called twice; ignoring the second call.")
            return
        try:
            self._record.job = job = gather_job_gpus(self._gpus)
            self._record.log.num_gpus = job.num_gpus
            if self._loaded_state is not None:
                state, self._loaded_state = self._loaded_state, None
                self.load_state_dict(state)
            elif self.profile_path is not None and not isinstance(self._state, Done):
                if (reused := self._record.reuse_file(self.power_limits)) is not None:
                    source, decided = reused
                    self._state = Done(*decided) if decided else self._resumed(source)
            elif isinstance(self._state, (Warmup, Measuring, Deciding)):  # left mid-visit by an earlier fit
                self._state = Ready(self._state.power_limit_w, self.wait_steps + 1)
            self._settings.record()  # restored on every exit path from here on
            self._active = self._begun = True
            self._warned_inactive = False
            self._set_limit(self._limit_to_set())
            if isinstance(done := self._state, Done):
                limit, why = done.optimal_power_limit_w, done.reason
                console.info(f"Power limit {limit:g} W applied without profiling ({why}){self._tag()}.")
                return
            self._plans.post(lambda: None)  # the planner thread starts now, not on a step
            self._sampler.watch_heat(self._gpus)
        except BaseException:
            self._restore_quietly()
            raise

    def on_epoch_begin(self) -> None:
        """Begin training if nothing did yet (Zeus's loop starts with this call)."""
        self._begin_if_inactive()

    def on_step_begin(self) -> None:
        """Advance the state machine (count down, set limits, cut samples, decide)."""
        self._begin_if_inactive()
        self._dispatch("step_begin")

    def on_step_end(self) -> None:
        """Note when the step ended (an epoch ending right after keeps its open sample)."""
        if isinstance(self._state, Measuring):
            self._sampler.step_end()

    def on_epoch_end(self) -> None:
        """Pause a visit at the epoch boundary; it goes on at the next step (nothing between is measured)."""
        self._dispatch("epoch_end")

    def on_train_end(self) -> None:
        """Restore every GPU's original power limit (also called when training failed)."""
        self._restore()
        self._plans.close()  # and the profile file written

    def close(self) -> None:
        """Restore the original power limits now (as :meth:`on_train_end`)."""
        self.on_train_end()

    def on_init_end(self, *args: Any, **kwargs: Any) -> None:
        """Refuse, with the fix, to be a Hugging Face ``TrainerCallback`` (``ZeusConfigError``)."""
        raise ZeusConfigError(
            "GlobalPowerLimitOptimizer is not a Hugging Face TrainerCallback. Pass "
            "zeus_integrations.HFGlobalPowerLimitOptimizer(monitor, ...) (same arguments) to "
            "Trainer(callbacks=[...]) instead, or give this optimizer to ZeusTrainerCallback."
        )

    def __enter__(self) -> "GlobalPowerLimitOptimizer":
        """``with GlobalPowerLimitOptimizer(...) as plo:`` restores the limits at the block's exit."""
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """Restore the limits found at ``on_train_begin`` (also when the block raised)."""
        if exc_type is None:
            self.close()
        else:
            self._restore_quietly()

    def _begin_if_inactive(self) -> None:
        if not self._active and not self._begun:  # Zeus's loop has no on_train_begin
            self.on_train_begin()

    # -- the state machine (see ._states) -----------------------------------------------------------
    def _dispatch(self, event: str) -> None:
        if not self._active:
            if not self._warned_inactive:
                self._warned_inactive = True
                logger.warning(
                    "GlobalPowerLimitOptimizer got %s outside training (before the first epoch or step began "
                    "it, or after the limits were restored); ignoring it.",
                    event,
                )
            return
        try:
            state = self._transition(self._state, event)
            if event == "step_begin" and not isinstance(state, Done):
                if self._steps_used >= self.budget_steps:
                    state = self._out_of_budget()
                else:
                    self._steps_used += 1
            self._state = state
        except BaseException:
            self._restore_quietly()
            raise

    def _transition(self, state: State, event: str) -> State:
        """The one place where states change."""
        match state, event:
            case Ready(next_power_limit_w=limit, steps_left=left), "step_begin":
                return Ready(limit, left - 1) if left > 1 else self._start(limit, changed=True)
            case Deciding(power_limit_w=limit), "step_begin":
                return self._follow(self._plans.take(), set_w=limit) if self._plans.ready() else state
            case Warmup(power_limit_w=limit, steps_left=left), "step_begin":
                if self._plans.pending:  # the next survey limit warms up while its plan comes
                    if not self._plans.ready():
                        return Warmup(limit, max(left - 1, 1))
                    action = self._plans.take()
                    if (action.step, action.power_limit, action.again) != (Step.MEASURE, limit, False):
                        return self._follow(action, set_w=limit)
                    self._action = action
                return Warmup(limit, left - 1) if left > 1 else self._begin_visit(limit)
            case Measuring(), "step_begin":
                visit = self._sampler.step()
                return state if visit is None else self._finish(visit)
            case Measuring(), "epoch_end":
                self._sampler.pause()
        return state

    def _start(self, limit: float, changed: bool) -> State:
        """Set ``limit``, warm up (unless the limit did not change), then measure."""
        self._set_limit(limit)
        return Warmup(limit, self.warmup_steps) if self.warmup_steps and changed else self._begin_visit(limit)

    def _begin_visit(self, limit: float) -> Measuring:
        again, ms = self._action.again, self._record.log.measurements()
        prior = next((m for m in ms if m.power_limit == limit), None) if again else None
        hint = prior or (ms[-1] if ms else None)  # the last limit measured: this one's steps are no shorter
        self._sampler.begin(
            limit,
            min(self._action.cap - (prior.steps if prior else 0), self.budget_steps - self._steps_used),
            Mode.FULL if not self._planner.early else Mode.AGAIN if again else Mode.SURVEY,
            prior_samples=prior.samples if prior else 0,  # type: ignore[arg-type]
            step_s=hint.time if hint else None,
            first_step=self._steps_used,
            judge=self._judge if self._simulated_clock() else lambda v: self._plans.post(self._judge, v),
        )
        return Measuring(limit, again)

    def _judge(self, visit: Visit) -> bool:
        """Whether a revisit has measured enough (on the planner thread, except on a simulated clock)."""
        current = self._record.log.with_running(visit)
        return self._planner.enough(next(m for m in current if m.power_limit == visit.power_limit), current)

    def _finish(self, visit: Visit) -> State:
        """A visit was handed over: plan off this thread; a survey warms up the next limit meanwhile.

        A window the GPUs' heat made unusable is measured again at once (twice at most).
        """
        limit, again = visit.power_limit, self._action.again
        if self._sampler.unusable and self._record.refuse(limit, "thermal", self._sampler.unusable):
            return self._start(limit, changed=False)
        self._plans.submit(self._plan_after, visit, self._action, self.budget_steps - self._steps_used - 1)
        measured = {v.power_limit for v in self._record.log.visits} | {limit}
        lower = [w for w in self.power_limits if w < limit and w not in measured]
        if not again and lower and self.warmup_steps:
            self._action = Action(Step.MEASURE, lower[0], cap=self.profile_steps)
            return self._start(lower[0], changed=True)
        return Deciding(limit)

    def _plan_after(self, visit: Visit, action: Action, budget_left: int) -> Action:
        """On the planner thread: keep the visit (or measure it again), plan, save the profile."""
        if self._record.keep(visit, action.again):
            return action
        action = self._planner.next_action(
            self._record.log.measurements(), self._record.left_out, budget_left
        )
        self._record.save()
        return action

    def _follow(self, action: Action, set_w: float | None = None) -> State:
        if action.step is Step.DONE:
            return self._decide(action.power_limit, action.reason)
        self._action = action
        return self._start(action.power_limit, changed=action.power_limit != set_w)

    def _out_of_budget(self) -> State:
        """The budget is spent while undecided: decide from what is measured (and final)."""
        if self._plans.pending and (action := self._plans.take()).step is Step.DONE:
            return self._decide(action.power_limit, action.reason)
        self._plans.settle()
        if isinstance(self._state, Measuring) and (visit := self._sampler.abandon()) is not None:
            self._record.keep(visit, retry=False)
        if not (ms := self._record.log.measurements()):
            return self._decide(self.power_limits[0], f"no limit measured within {self.budget_steps} steps")
        return self._decide(self._planner.choose(ms), f"the budget of {self.budget_steps} steps is spent")

    def _decide(self, optimal: float, reason: str) -> Done:
        self._set_limit(optimal)
        self._plans.post(self._sampler.stop_watching)  # joins a thread: not on this one
        self._record.decided(optimal, reason, self._steps_used, len(self.power_limits), post=self._plans.post)
        return Done(optimal, reason)

    # -- limits and restore -------------------------------------------------------------------------
    def _set_limit(self, watts: float) -> None:
        for gpu in self._gpus:
            if gpu.get_power_limit() != watts:
                gpu.set_power_limit(watts)

    def _limit_to_set(self) -> float:
        """The chosen limit once done, else the highest (where profiling starts), W."""
        return self._state.optimal_power_limit_w if isinstance(self._state, Done) else self.power_limits[0]

    def _restore(self) -> None:
        """The single restore path: every GPU's limit found at ``on_train_begin`` comes back."""
        restored = self._settings.restore()  # calls _deactivate first; signals wait until it is done
        self._sampler.stop_watching()
        window, self._stale_window = self._stale_window, None
        if window is not None and window in self.monitor.open_windows:
            self.monitor.end_window(window, cancel=True)
        if restored:
            limits = ", ".join(f"GPU {i}: {s.power_limit_w:g} W" for i, s in self._settings.recorded.items())
            _info("Restored the original power limits (%s).", limits)

    def _deactivate(self) -> None:
        """Stop changing limits; runs before a restore, maybe in a signal handler (state changes only)."""
        self._active = False
        if isinstance(self._state, Measuring):
            self._stale_window = window_name(self._state.power_limit_w)
            self._sampler.limit = None
        if isinstance(self._state, (Warmup, Measuring, Deciding)):
            self._state = Ready(self._state.power_limit_w, self.wait_steps + 1)

    def _restore_quietly(self) -> None:
        try:
            self._restore()
        except Exception:  # the original error matters more
            logger.debug("Restoring power limits failed while handling another error.", exc_info=True)

    # -- profile file and checkpoints -----------------------------------------------------------------
    def _resumed(self, source: str) -> State:
        """Where profiling goes on after the record was resumed from ``source``."""
        action = self._planner.next_action(self._record.log.measurements(), (), self.budget_steps)
        if action.step is Step.DONE:
            return Done(action.power_limit, f"reused from {source}: {action.reason}")
        self._action = action
        if visits := self._record.log.visits:
            _info(f"Reusing {len(visits)} visit(s) from {source}; now at {action.power_limit:g} W.")
        return Ready(action.power_limit, self.wait_steps + 1)

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state for checkpoints: the visits' samples, the state and the hardware."""
        self._plans.settle()
        state = self._state
        summary = {"kind": type(state).__name__.lower(), "power_limit_w": next(iter(vars(state).values()))}
        if isinstance(state, Done):
            summary["reason"] = state.reason
        record = {**self._record.to_checkpoint(), "power_limits_w": list(self.power_limits)}
        return {"version": _STATE_VERSION, "state": summary, **record}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`, before or after ``on_train_begin``.

        Measured limits are not profiled again, a visit cut by the checkpoint is measured again, and
        a checkpoint of other (or unnamed) hardware is dropped with a warning.

        Raises:
            ZeusProfileError: The state is malformed (the message names the field).
        """
        if self._record.job is None:
            self._loaded_state = dict(state) if isinstance(state, Mapping) else state
        elif self._record.resume_checkpoint(state, self.power_limits):
            self._sampler.cancel()
            self._state = self._resumed("the checkpoint")
            if self._active:
                self._set_limit(self._limit_to_set())

    def _simulated_clock(self) -> bool:
        return self.monitor.clock is not time.time

    def _tag(self) -> str:
        return " [simulated GPUs]" if any(g.simulated for g in self._gpus) else ""
