"""The sample lifecycle of a visit (docs/optimizers/power-limit.md, "Samples", "Off the training thread")."""

from __future__ import annotations

import enum
import math
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from zeus_core import _distributed as distributed
from zeus_core.monitor._measurement import Measurement
from zeus_core.monitor._thermal import TemperatureMonitor, check_window
from zeus_core.optimizer.power_limit._measurement import Visit
from zeus_core.optimizer.power_limit._options import PowerLimitOptions

if TYPE_CHECKING:
    from zeus_core.monitor._energy import ZeusMonitor

__all__ = ["Mode", "Sampler", "window_name", "steps_per_sample"]


def window_name(power_limit_w: float) -> str:
    """The monitor window that measures one power limit (Zeus's name).

    Example:
        >>> window_name(250.0)
        '__GlobalPowerLimitOptimizer_250'
    """
    return f"__GlobalPowerLimitOptimizer_{power_limit_w:g}"


def steps_per_sample(min_sample_s: float, step_s: float) -> int:
    """Steps a sample needs to last ``min_sample_s`` when a step takes ``step_s`` (at least one).

    Example:
        >>> steps_per_sample(0.25, 0.010), steps_per_sample(0.25, 0.3), steps_per_sample(0.0, 0.01)
        (25, 1, 1)
    """
    if min_sample_s <= 0 or not 0 < step_s < math.inf:
        return 1
    return max(1, math.ceil(min_sample_s / step_s * (1.0 - 1e-9)))


class Mode(enum.Enum):
    """How a visit ends."""

    SURVEY = "survey"
    """At the first sample end with ``min_steps`` steps and ``min_samples`` samples (or the cap)."""
    AGAIN = "again"
    """When the judge says so (checked every ``check_every`` steps), or at the cap."""
    FULL = "full"
    """At the cap (Zeus's sweep)."""


_START = Measurement(time=0.0, gpu_energy={})
"""The reading a window starts from: a segment's first sample begins there."""


class Sampler:
    """This rank's side of one visit at a time; every rank calls :meth:`step` at the same steps.

    Args:
        monitor: The monitor of this rank's GPUs.
        options: ``min_sample_s``, ``min_samples``, ``min_steps``, ``check_every``.
    """

    def __init__(self, monitor: "ZeusMonitor", options: PowerLimitOptions) -> None:
        self.monitor, self.options = monitor, options
        self.temps: TemperatureMonitor | None = None
        """Samples the GPUs' temperature and clock events while profiling (see :meth:`watch_heat`)."""
        self.unusable = ""
        """Why the last finished visit cannot be used (``""``: it can), agreed by every rank."""
        self.sync = options.min_sample_s > 0
        self.limit: float | None = None
        """The limit being measured, W (``None``: no visit)."""
        self.sample_s: float | None = None
        """Shortest sample, s: ``min_sample_s``, or 100 reads' time where reads cost time ("Samples")."""

    def _probe(self) -> float:
        """The shortest sample, s, from the time one reading of the monitor takes (every rank agrees)."""
        if self.options.min_sample_s <= 0:
            return 0.0
        name, start = "__GlobalPowerLimitOptimizer_probe", self.monitor.clock()
        self.monitor.begin_window(name, sync_execution=False)
        self.monitor.end_window(name, sync_execution=False)  # energy from a reader thread costs nothing here
        (read_s,) = distributed.all_reduce([(self.monitor.clock() - start) / 2], "max")
        return max(self.options.min_sample_s, 100 * read_s)

    def watch_heat(self, gpus: list[Any]) -> None:
        """Check every visit's window for heat (``thermal_check``) where the GPUs report it (docs: "Heat")."""
        if self.options.thermal_check and self.temps is None:
            temps = TemperatureMonitor(gpus, update_period=0.5, clock=self.monitor.clock)
            temps.sample_now()
            if temps.supported:  # simulated GPUs report neither
                temps.start()
                self.temps = temps

    def stop_watching(self) -> None:
        """Stop sampling the GPUs' temperature (profiling is over)."""
        temps, self.temps = self.temps, None
        if temps is not None:
            temps.stop()

    # -- the visit ------------------------------------------------------------------------------
    def begin(
        self, limit: float, cap: int, mode: Mode, *, prior_samples: int = 0, step_s: float | None = None,
        first_step: int = 0, judge: Callable[[Visit], Future[bool] | bool] | None = None,
    ) -> None:  # fmt: skip
        """Open the window of a visit of ``limit`` (W) at the step that begins now, for ``cap`` steps at most.

        ``prior_samples`` count towards ``min_samples``; ``step_s`` (s per step, if known) sets the steps per
        sample at once; ``first_step`` is kept in the visit; ``judge`` answers checks (a bool or a future).
        """
        self.limit, self.cap, self.mode, self.judge = limit, max(1, cap), mode, judge
        self.window = window_name(limit)
        self.verdict: Future[bool] | None = None  # the judge's answer, taken at the next sample end
        self.prior, self.steps = prior_samples, 0  # measured steps that ended
        if self.sample_s is None:
            self.sample_s = self._probe()
        self.per_sample = steps_per_sample(self.sample_s, step_s) if step_s else 0
        self.next_check = self.options.check_every
        self.local: list[tuple[Measurement, Measurement, int]] = []  # this rank's samples: start, end, steps
        self.visit = Visit(limit, (), (), (), first_step)  # the job-wide samples taken so far
        self.ended = False  # every sample is cut; the visit waits for their energy
        self.step_ended_s: float | None = None
        self._open_segment()
        self.began_s, self.unusable = self.start_s, ""
        if self.temps is not None:
            self.temps.sample_now()  # a slowdown from the window's start on is seen

    def _open_segment(self) -> None:
        self.monitor.begin_window(self.window, sync_execution=self.sync)
        self.open, self.start_s = True, self.monitor.clock()
        self.boundary = self.steps
        self.base = _START  # the reading the next sample starts from

    def step(self) -> Visit | None:
        """A step began after a measured one (or while the visit waits for energy): the visit, once done."""
        self.step_ended_s = None
        if self.ended:  # the step after the end waits for the energy, if still needed
            return self._finished(wait=True)
        if not self.open:  # an epoch ended mid-visit: measuring resumes with this step
            self._open_segment()
            return None
        self.steps += 1
        left = self.cap - self.steps
        if not self._sample_ends(left):
            return None
        enough_samples = len(self.visit.steps) + len(self.local) + 1 + self.prior >= self.options.min_samples
        survey_done = self.mode is Mode.SURVEY and self.steps >= self.options.min_steps and enough_samples
        last = left <= 0 or survey_done or self._judged_enough()
        self._cut(last)
        if last:
            return self._end()
        if self.mode is Mode.AGAIN and self.steps >= self.next_check and enough_samples and not self.verdict:
            return self._check()
        return None

    def _judged_enough(self) -> bool:
        """The judge's answer, taken when ready (on several ranks: now, the same step on every rank)."""
        verdict = self.verdict
        if verdict is None or not (verdict.done() or distributed.world_size() > 1):
            return False
        self.verdict = None
        return bool(verdict.result())

    def _check(self) -> Visit | None:
        """Ask the judge whether the visit so far has measured enough; the visit if it has (at once)."""
        self.next_check = (self.steps // self.options.check_every + 1) * self.options.check_every
        visit = self._reduce(partial=True)
        answer = self.judge(visit) if visit is not None and self.judge is not None else None
        if answer is True:
            return self._end()
        self.verdict = answer if isinstance(answer, Future) else None
        if answer is False:  # judged on this thread: the next sample starts after the judge's work
            self.base = self.monitor.read_window(self.window)
        if visit is not None:  # the step time so far sets the next samples' length
            self.per_sample = steps_per_sample(self.sample_s, sum(visit.times_s) / visit.total_steps)  # type: ignore[arg-type]
        return None

    def _sample_ends(self, left: int) -> bool:
        """Whether the sample in progress ends after measured step :attr:`steps` (``left``: to the cap)."""
        in_sample = self.steps - self.boundary
        if left <= 0:
            return True
        if self.per_sample:
            return in_sample >= self.per_sample and left >= self.per_sample
        if in_sample & (in_sample - 1) or left < in_sample:  # the first sample: after 1, 2, 4, ... steps
            return False
        (elapsed,) = distributed.all_reduce([self.monitor.clock() - self.start_s], "max")
        return elapsed >= (self.sample_s or 0.0)

    def _cut(self, last: bool) -> None:
        """End the sample after measured step :attr:`steps` with one reading (the window's end if last)."""
        read = self.monitor.end_window if last else self.monitor.read_window
        reading = read(self.window, sync_execution=self.sync)
        self.open = not last
        steps = self.steps - self.boundary
        self.local.append((self.base, reading, steps))
        if not self.per_sample:  # the first sample fixes the steps per sample, the same on every rank
            (elapsed,) = distributed.all_reduce([reading.time - self.base.time], "max")
            self.per_sample = steps_per_sample(self.sample_s, elapsed / steps)  # type: ignore[arg-type]
        self.base, self.boundary = reading, self.steps

    def _close(self) -> None:
        """Cancel the window if open (the samples cut from it are kept)."""
        if self.open:
            self.monitor.end_window(self.window, cancel=True)
            self.open = False

    def _end(self) -> Visit | None:
        self._close()
        self.ended = True
        if self.temps is not None:  # the thermal verdict, the same on every rank
            reason = check_window(self.temps, self.began_s, self.monitor.clock(), lookback_s=0.0).reason
            if distributed.world_size() > 1:
                (bad,) = distributed.all_reduce([1.0 if reason else 0.0], "max")
                reason = reason or ("another rank's GPUs were throttled or settling" if bad else "")
            self.unusable = reason
        return self._finished(wait=False)

    def _finished(self, wait: bool) -> Visit | None:
        """The visit, if its energy is final (``wait``: once it is)."""
        visit = self._reduce(partial=False, wait=wait)
        if visit is not None:
            self.limit = None
        return visit

    # -- samples across ranks ---------------------------------------------------------------------
    def _reduce(self, partial: bool, wait: bool = False) -> Visit | None:
        """Take the samples whose energy is final on every rank (``wait``: all); the visit so far, if any."""
        ready = 0  # this rank's samples whose energy is final, oldest first
        while ready < len(self.local) and (wait or all(r.finalized for r in self.local[ready][:2])):
            ready += 1
        if distributed.world_size() > 1:
            ready = int(distributed.all_reduce([ready], "min")[0])
        if not partial and ready < len(self.local):
            return None
        taken, self.local = self.local[:ready], self.local[ready:]
        times = [end.time - start.time for start, end, _ in taken]
        energies = [end.gpu_total_energy - start.gpu_total_energy for start, end, _ in taken]
        v = self.visit
        self.visit = Visit(
            v.power_limit,
            v.times_s + tuple(distributed.all_reduce(times, "max")),
            v.energies_j + tuple(distributed.all_reduce(energies, "sum")),
            v.steps + tuple(steps for _, _, steps in taken),
            v.first_step,
        )
        return None if partial and not self.visit.steps else self.visit

    # -- epochs and aborts ----------------------------------------------------------------------
    def step_end(self) -> None:
        """A step ended (``on_step_end``): an epoch ending right after it keeps the open sample."""
        self.step_ended_s = self.monitor.clock()

    def pause(self) -> None:
        """An epoch ended: keep the samples (and the open one if clean); measuring resumes next step."""
        if self.open and self._open_sample_is_clean():
            self.steps += 1  # the epoch's last step ended too
            self._cut(last=False)
        self._close()
        self.steps = self.boundary  # an open sample's steps are dropped (they count against the budget)

    def _open_sample_is_clean(self) -> bool:
        """Whether the open sample is half a sample or more of training only (every rank agrees)."""
        open_steps = self.steps + 1 - self.boundary
        if not self.sample_s or (self.per_sample and 2 * open_steps < self.per_sample):
            return False
        now = self.monitor.clock()
        gap = math.inf if self.step_ended_s is None else now - self.step_ended_s  # since on_step_end
        gap, elapsed = distributed.all_reduce([gap, now - self.start_s], "max")
        if not self.per_sample:
            return elapsed >= 0.5 * self.sample_s and gap <= 0.25 * elapsed / open_steps
        return gap <= 0.25 * self.sample_s / self.per_sample  # a quarter of a step at most

    def abandon(self) -> Visit | None:
        """Stop the visit now (the budget is spent): its samples whose energy is final, if any."""
        if self.limit is None:
            return None
        self._close()
        visit = self._reduce(partial=True)
        self.cancel()
        return visit

    def cancel(self) -> None:
        """Forget the visit (its window, if open, is cancelled)."""
        if self.limit is not None and self.window in self.monitor.open_windows:
            self._close()
        self.limit, self.open, self.verdict = None, False, None
