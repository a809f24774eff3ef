"""What profiling kept, resumed and saved: docs/optimizers/power-limit.md ("Ranks, restore, profile file")."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement, Visit, expected_savings
from zeus_core.optimizer.power_limit._options import PowerLimitOptions
from zeus_core.optimizer.power_limit._planner import impossible
from zeus_core.optimizer.power_limit._profile import JobGPUs, PowerLimitProfile
from zeus_core.optimizer.power_limit._statistics import SampleLog

__all__ = ["Record"]

logger = logging.getLogger("zeus_core.optimizer.power_limit")
_REJECTIONS = 2  # discarded measurements of a limit after which it is left out (or, if thermal, kept)
_GIVE_UP = {"thermal": "Kept anyway.", "impossible": "That limit is left out."}


class Record:
    """One job's kept visits (:attr:`log`), refused measurements, profile file and checkpoint.

    Args:
        options: The knobs (``power_tolerance`` and ``counter_period_s`` judge impossible readings).
        path: The profile file to reuse and to write (``None``: neither).
        selector: The selector's text form (a saved decision is reused by the same selector only).
        tag: Appended to console lines (``" [simulated GPUs]"`` where they are).
    """

    def __init__(self, options: PowerLimitOptions, path: Path | None, selector: str, tag: str) -> None:
        self.options, self.path, self.selector, self.tag = options, path, selector, tag
        self.log = SampleLog()
        self.job: JobGPUs | None = None
        """The job's GPUs, once gathered at ``on_train_begin``."""
        self._refused: dict[tuple[str, float], int] = {}

    @property
    def left_out(self) -> list[float]:
        """Limits whose readings were impossible more than twice, W."""
        return [w for (kind, w), n in self._refused.items() if kind == "impossible" and n > _REJECTIONS]

    def refuse(self, limit: float, kind: str, why: str) -> bool:
        """Count a discarded measurement of ``limit`` (thermal or impossible); whether to measure it again."""
        self._refused[(kind, limit)] = n = self._refused.get((kind, limit), 0) + 1
        then = "Measuring it again." if n <= _REJECTIONS else _GIVE_UP[kind]
        console.warn(f"Power-limit optimizer: discarded the measurement of {limit:g} W: {why}. {then}")
        return n <= _REJECTIONS

    def keep(self, visit: Visit, again: bool = False, retry: bool = True) -> bool:
        """Keep a finished visit unless its readings are impossible; whether to measure it again."""
        if not visit.steps:
            return False
        m = next(x for x in self.log.with_running(visit) if x.power_limit == visit.power_limit)
        if why := impossible(m, self.options):
            return retry and self.refuse(visit.power_limit, "impossible", why)
        self.log.add(visit)
        if distributed.is_rank_zero():
            logger.info("%s%s%s", "Profiled again " if again else "Profiled ", m.describe(), self.tag)
        return False

    def resume(
        self, measurements: Sequence[PowerLimitMeasurement], visits: Any, limits: Sequence[float], source: str
    ) -> None:
        """Take saved visits of ``limits`` as this job's (measurements saved without visits: one sample each).

        Malformed saved visits are ignored with a warning; their measurements stay.
        """
        try:
            if not isinstance(visits or [], list):
                raise ZeusProfileError(f"field 'visits' is not a list: {str(visits)[:200]}")
            saved = [Visit.from_json(v) for v in visits or []]
        except ZeusProfileError as e:
            logger.warning("Ignoring the profiling samples saved in %s: %s", source, e)
            saved = []
        sampled = {v.power_limit for v in saved}
        saved += [
            Visit(m.power_limit, (m.time * m.steps,), (m.energy * m.steps,), (m.steps,))
            for m in measurements
            if m.power_limit not in sampled
        ]
        keep = {m.power_limit for m in measurements} & set(limits)
        self.log = SampleLog(self.log.num_gpus, [v for v in saved if v.power_limit in keep])

    def to_checkpoint(self) -> dict[str, Any]:
        """The checkpoint's record part: measurements, every visit's samples, the hardware."""
        return {
            "measurements": [m.to_dict() for m in self.log.measurements()],
            "visits": self.log.to_json(),
            "hardware": self.job.to_dict() if self.job is not None else None,
        }

    def resume_checkpoint(self, state: Any, limits: Sequence[float]) -> bool:
        """Take a checkpoint's visits of ``limits``; ``False`` (warned) when it is of other hardware.

        Malformed measurements are dropped one by one with a warning.

        Raises:
            ZeusProfileError: The state is malformed (the message names the field).
        """
        assert self.job is not None
        source = "The power-limit optimizer's checkpointed state"
        if not isinstance(state, Mapping) or not isinstance(state.get("measurements", []), list):
            raise ZeusProfileError(f"{source} is not a state_dict() (field 'measurements' must be a list).")
        if (version := state.get("version")) not in (1, 2):
            logger.warning("Power-limit optimizer state of version %r; loading what matches.", version)
        try:
            if not isinstance(state.get("hardware"), Mapping):  # a null hardware is no proof of the same GPUs
                raise ZeusProfileError(
                    f"{source} does not name the GPUs it was measured on (field 'hardware')."
                )
            PowerLimitProfile(JobGPUs.from_dict(state["hardware"])).check(self.job, source)
        except ZeusProfileError as e:
            logger.warning("Dropping the checkpointed power-limit measurements: %s", e)
            return False
        measurements = []
        for i, item in enumerate(state.get("measurements", [])):
            try:
                measurements.append(PowerLimitMeasurement.from_dict(item))
            except ZeusProfileError as e:
                logger.warning("Dropping a checkpointed measurement (field 'measurements[%d]'): %s", i, e)
        self.resume(measurements, state.get("visits"), limits, "the checkpoint")
        return True

    def reuse_file(self, limits: Sequence[float]) -> tuple[str, tuple[float, str] | None] | None:
        """Resume from the profile file: its name and its decision (by the same selector, else ``None``).

        Rank 0 reads and checks the file; every rank gets its answer. ``None``: no file yet.

        Raises:
            ZeusProfileError: On every rank: the file is malformed, of other hardware, or decides a
                limit that is not one of ``limits`` (W).
        """
        assert self.path is not None and self.job is not None
        profile: PowerLimitProfile | str | None = None  # the profile, the error's message, or no file
        if distributed.is_rank_zero() and self.path.exists():
            try:
                profile = PowerLimitProfile.load(self.path)
                profile.check(self.job, source=f"Power-limit profile {str(self.path)!r}")
            except ZeusProfileError as e:
                profile = str(e)
        if distributed.world_size() > 1:
            profile = distributed.broadcast_object(profile)
        if isinstance(profile, str):
            raise ZeusProfileError(profile)
        if profile is None:
            if distributed.is_rank_zero():
                logger.info("No profile at %r yet; it will be written there.", str(self.path))
            return None
        source = f"profile {str(self.path)!r}"
        decided = profile.optimal_power_limit_w
        if decided is not None and not any(abs(decided - w) < 1e-6 for w in limits):
            raise ZeusProfileError(
                f"Power-limit profile {str(self.path)!r}: field 'optimal_power_limit_w' is {decided:g} W, "
                f"not one of the limits this optimizer sets ({', '.join(f'{w:g}' for w in limits)} W). "
                "Delete the file, or pass the pl_step it was profiled with."
            )
        self.resume(profile.measurements, profile.extra.get("visits"), limits, source)
        if decided is None or profile.selector != self.selector:
            return source, None
        return source, (decided, f"reused from {source}: {profile.reason}")

    def decided(
        self, optimal: float, reason: str, steps: int, limits: int, post: Callable[..., Any] | None = None
    ) -> None:
        """Say on the console what was chosen after ``steps`` steps (of ``limits`` limits), and save it."""
        ms = self.log.measurements()
        line = f"Power limit {optimal:g} W chosen by {self.selector} after {steps} steps"
        line += f" ({len(ms)} of {limits} limits measured; {reason})"
        console.info(f"{line}{expected_savings(optimal, ms)}{self.tag}.")
        self.save(optimal, reason, post=post)

    def save(
        self, optimal: float | None = None, reason: str = "", post: Callable[..., Any] | None = None
    ) -> None:
        """Write the profile file on rank zero (``post``: hand the write over, e.g. to the planner thread)."""
        if self.path is None or self.job is None or not distributed.is_rank_zero():
            return
        ms = tuple(self.log.measurements())
        profile = PowerLimitProfile(
            self.job, ms, optimal, self.selector, reason, {"visits": self.log.to_json()}
        )
        post(profile.save, self.path) if post is not None else profile.save(self.path)
