"""Profile-file reuse and checkpoint state of :class:`GlobalPowerLimitOptimizer` (a mixin).

Both resume the same way: from measured limits, :func:`~.planner.next_action` says where
profiling continues, so a resumed job goes on exactly where an uninterrupted one would.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from zeus_core import _distributed as distributed
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit.measurement import PowerLimitMeasurement
from zeus_core.optimizer.power_limit.planner import Action, ActionKind
from zeus_core.optimizer.power_limit.profile import JobGPUs, PowerLimitProfile, load_profile_on_every_rank
from zeus_core.optimizer.power_limit.states import Done, Ready, State, state_to_dict
from zeus_core.optimizer.power_limit.visits import VisitLog

if TYPE_CHECKING:
    from zeus_core.optimizer.power_limit.selectors import OptimumSelector

__all__ = ["PersistenceMixin", "STATE_VERSION"]

logger = logging.getLogger(__name__)

STATE_VERSION = 1
"""Version of :meth:`PersistenceMixin.state_dict`'s format."""


class PersistenceMixin:
    """``state_dict`` / ``load_state_dict`` and the profile file, for the optimizer that mixes it in."""

    # Provided by GlobalPowerLimitOptimizer.
    wait_steps: int
    profile_path: Path | None
    optimum_selector: "OptimumSelector"
    power_limits: list[float]
    _state: State
    _measurements: list[PowerLimitMeasurement]
    _job: JobGPUs | None
    _loaded_state: Mapping[str, Any] | None
    _active: bool
    _info: Callable[..., None]
    _next_action: Callable[[Sequence[PowerLimitMeasurement]], Action]
    _cancel_open_window: Callable[[], None]
    _set_limit: Callable[[float], None]
    _num_gpus: Callable[[], int]
    _visits: VisitLog
    _unsampled: list[PowerLimitMeasurement]

    def _adopt(
        self, measurements: Sequence[PowerLimitMeasurement], visits: Any, source: str
    ) -> list[PowerLimitMeasurement]:
        """Take saved measurements and their visits' samples (see :mod:`.visits`) as this job's own.

        Limits saved with their samples are re-judged from them, exactly as the job that saved
        them would have; limits saved without (older files) are used as they are.
        """
        try:
            log = VisitLog.from_json(visits, {m.power_limit_w for m in measurements})
        except ZeusProfileError as e:
            logger.warning("Ignoring the profiling samples saved in %s: %s", source, e)
            log = VisitLog()
        sampled = {v.power_limit_w for v in log.visits}
        self._visits = log
        self._unsampled = [m for m in measurements if m.power_limit_w not in sampled]
        return log.measurements(self._num_gpus(), self._unsampled) if sampled else list(measurements)

    def _plan(self, measurements: Sequence[PowerLimitMeasurement], source: str) -> State:
        """Where to continue given limits already measured: the next limit to measure, or ``Done``."""
        self._measurements = sorted(measurements, key=lambda m: -m.power_limit_w)
        action = self._next_action(self._measurements)
        if action.kind is ActionKind.DONE:
            return Done(action.power_limit_w, f"reused from {source}: {action.reason}")
        refine = action.kind is ActionKind.REFINE
        if self._measurements:
            self._info(
                "Reusing %d measured limit(s) from %s; profiling continues at %g W%s.",
                len(self._measurements),
                source,
                action.power_limit_w,
                " (a contender)" if refine else "",
            )
        return Ready(action.power_limit_w, self.wait_steps + 1, refine)

    def _reuse_profile(self) -> None:
        assert self.profile_path is not None and self._job is not None
        profile = load_profile_on_every_rank(self.profile_path, self._job)
        source = f"profile {str(self.profile_path)!r}"
        if (
            profile is not None
            and profile.optimal_power_limit_w is not None
            and profile.selector == repr(self.optimum_selector)
        ):
            # The same selector already decided on these GPUs (perhaps when its step budget ran out,
            # which re-planning from the measurements alone would not know): keep its decision.
            self._measurements = self._adopt(profile.measurements, profile.extra.get("visits"), source)
            self._state = Done(profile.optimal_power_limit_w, f"reused from {source}: {profile.reason}")
        elif profile is not None:
            measurements = self._adopt(profile.measurements, profile.extra.get("visits"), source)
            self._state = self._plan(measurements, source)
        else:
            self._info("No profile at %r yet; it will be written there.", str(self.profile_path))

    def _save_profile(self, optimal: float | None, reason: str) -> None:
        if self.profile_path is None or self._job is None or not distributed.is_rank_zero():
            return
        measured = tuple(self._measurements)
        profile = PowerLimitProfile(
            self._job,
            measured,
            optimal,
            repr(self.optimum_selector),
            reason,
            extra={"visits": self._visits.to_json()},
        )
        profile.save(self.profile_path)
        if optimal is not None:
            self._info("Saved the power-limit profile to %r.", str(self.profile_path))

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state for checkpoints: measurements so far, the state, and the hardware."""
        return {
            "version": STATE_VERSION,
            "state": state_to_dict(self._state),
            "measurements": [m.to_dict() for m in self._measurements],
            "power_limits_w": list(self.power_limits),
            "hardware": self._job.to_dict() if self._job is not None else None,
            "visits": self._visits.to_json(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`: measured limits are not profiled again.

        Progress is re-planned from the measurements, so a limit that was being profiled when the
        checkpoint was taken is profiled again. Measurements from other hardware are dropped with
        a warning. Call it before or after ``on_train_begin``.
        """
        if self._job is None:  # hardware unknown until on_train_begin, which applies it
            self._loaded_state = dict(state)
        else:
            self._apply_state_dict(state)

    def _apply_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            logger.warning(
                "GlobalPowerLimitOptimizer state has version %r (expected %d); loading what matches.",
                state.get("version"),
                STATE_VERSION,
            )
        assert self._job is not None
        try:
            if state.get("hardware") is not None:
                saved = PowerLimitProfile(JobGPUs.from_dict(state["hardware"]))
                saved.check(self._job, "The checkpointed state")
        except ZeusProfileError as e:
            logger.warning("Dropping the checkpointed power-limit measurements: %s", e)
            return
        measurements = []
        for item in state.get("measurements", []):
            try:
                measurements.append(PowerLimitMeasurement.from_dict(item))
            except ZeusProfileError as e:
                logger.warning("Dropping a checkpointed measurement: %s", e)
        self._cancel_open_window()
        measurements = self._adopt(measurements, state.get("visits"), "the checkpoint")
        self._state = self._plan(measurements, "the checkpoint")
        if self._active:
            self._set_limit(
                self._state.optimal_power_limit_w if isinstance(self._state, Done) else self.power_limits[0]
            )
