"""The sample lifecycle of a visit: its window, samples, checks, epoch ends and ranks.

Explained in docs/optimizers/power-limit.md ("Samples").
"""

from __future__ import annotations

import enum
import math
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from zeus_core import _distributed as distributed
from zeus_core.monitor._thermal import TemperatureMonitor, check_window
from zeus_core.optimizer.power_limit._measurement import Visit
from zeus_core.optimizer.power_limit._options import PowerLimitOptions

if TYPE_CHECKING:
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.monitor._measurement import Measurement

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


_MAX_WAIT = 1
"""Steps a finished visit waits for its energy without blocking (steps of a few microseconds, in tests)."""

Judge = Callable[[Visit], "Future[bool] | bool"]
"""Whether the visit so far has measured enough: the answer, or a future one (judged off the thread)."""


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
        """The limit being measured (``None``: no visit)."""
        self.sample_s: float | None = None
        """Shortest sample, s: ``min_sample_s``, or 100 reads' time where reading the GPUs takes
        time on this thread (a monitor that reads the counters itself): reads then cost 1 %."""

    def _probe(self) -> float:
        """The shortest sample, from the time one reading of the monitor takes (every rank agrees)."""
        if self.options.min_sample_s <= 0:
            return 0.0
        clock, name = self.monitor.clock, "__GlobalPowerLimitOptimizer_probe"
        start = clock()
        self.monitor.begin_window(name, sync_execution=False)
        self.monitor.end_window(name, sync_execution=False)  # energy from a reader thread costs nothing here
        (read_s,) = distributed.all_reduce([(clock() - start) / 2], "max")
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
        first_step: int = 0, judge: Judge | None = None,
    ) -> None:  # fmt: skip
        """Open the window of a visit of ``limit`` (W) at the step that begins now, for ``cap`` steps at most.

        ``prior_samples`` count towards ``min_samples``; ``step_s`` (the time per step, if known) sets
        the steps per sample at once; ``first_step`` is kept in the visit; ``judge`` is asked at checks.
        """
        self.limit, self.cap, self.mode, self.judge = limit, max(1, cap), mode, judge
        self.verdict: Future[bool] | None = None  # the judge's answer, taken at the next sample end
        self.prior, self.first_step = prior_samples, first_step
        self.steps = 0  # measured steps that ended
        if self.sample_s is None:
            self.sample_s = self._probe()
        self.per_sample = steps_per_sample(self.sample_s, step_s) if step_s else 0
        self.next_check = self.options.check_every
        self.local: list[tuple[Any, Any, int]] = []  # this rank's samples: start and end readings, steps
        self.times: list[float] = []  # job-wide samples, reduced over ranks
        self.energies: list[float] = []
        self.counts: list[int] = []
        self.ended = False  # every sample is cut; the visit waits for their energy
        self.waited = 0  # steps the visit has waited for energy
        self.step_ended_s: float | None = None
        self._open_segment()
        self.began_s, self.unusable = self.start_s, ""
        if self.temps is not None:
            self.temps.sample_now()  # a slowdown from the window's start on is seen

    def _open_segment(self) -> None:
        self.monitor.begin_window(window_name(self.limit), sync_execution=self.sync)  # type: ignore[arg-type]
        self.open, self.start_s = True, self.monitor.clock()
        self.segment_start = self.boundary = self.steps
        self.base: Any = None  # the reading the next sample starts from (None: the segment's start)

    def step(self) -> Visit | None:
        """A step began after a measured one (or while the visit waits for energy): the visit, once done."""
        self.step_ended_s = None
        if self.ended:
            return self._finished()
        if not self.open:  # an epoch ended mid-visit: measuring resumes with this step
            self._open_segment()
            return None
        self.steps += 1
        left = self.cap - self.steps
        if not self._sample_ends(left):
            return None
        enough_samples = len(self.local) + 1 + self.prior >= self.options.min_samples
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
        every = self.options.check_every
        self.next_check += every * (1 + (self.steps - self.next_check) // every)
        visit = self._reduce(partial=True)
        answer = self.judge(visit) if visit is not None and self.judge is not None else None
        if answer is True:
            return self._end()
        self.verdict = answer if isinstance(answer, Future) else None
        if answer is False:  # judged on this thread: the next sample starts after the judge's work
            self.base = self.monitor.read_window(window_name(self.limit))  # type: ignore[arg-type]
        if self.counts:  # the step time so far sets the next samples' length
            self.per_sample = steps_per_sample(self.sample_s, sum(self.times) / sum(self.counts))  # type: ignore[arg-type]
        return None

    def _sample_ends(self, left: int) -> bool:
        """Whether the sample in progress ends after measured step :attr:`steps`."""
        in_sample = self.steps - self.boundary
        if left <= 0:
            return True
        if self.per_sample:
            return in_sample >= self.per_sample and left >= self.per_sample
        in_segment = self.steps - self.segment_start  # the first sample: at steps 1, 2, 4, ... once it lasted
        if in_segment & (in_segment - 1) or left < in_segment:
            return False
        (elapsed,) = distributed.all_reduce([self.monitor.clock() - self.start_s], "max")
        return elapsed >= (self.sample_s or 0.0)

    def _cut(self, last: bool) -> None:
        """End the sample after measured step :attr:`steps` with one reading (the window's end if last)."""
        name = window_name(self.limit)  # type: ignore[arg-type]
        if last:
            reading = self.monitor.end_window(name, sync_execution=self.sync)
            self.open = False
        else:
            reading = self.monitor.read_window(name, sync_execution=self.sync)
        steps = self.steps - self.boundary
        self.local.append((self.base, reading, steps))
        self.base, self.boundary = reading, self.steps
        if not self.per_sample:  # the first sample fixes the steps per sample, the same on every rank
            start = self.local[-1][0]
            (elapsed,) = distributed.all_reduce(
                [reading.time - (0.0 if start is None else start.time)], "max"
            )
            self.per_sample = steps_per_sample(self.sample_s, elapsed / steps)  # type: ignore[arg-type]

    def _end(self) -> Visit | None:
        if self.open:
            self.monitor.end_window(window_name(self.limit), cancel=True)  # type: ignore[arg-type]
            self.open = False
        self.ended = True
        if self.temps is not None:  # the thermal verdict, the same on every rank
            reason = check_window(self.temps, self.began_s, self.monitor.clock(), lookback_s=0.0).reason
            if distributed.world_size() > 1:
                (bad,) = distributed.all_reduce([1.0 if reason else 0.0], "max")
                reason = reason or ("another rank's GPUs were throttled or settling" if bad else "")
            self.unusable = reason
        return self._finished()

    def _finished(self) -> Visit | None:
        """The visit once its energy is final: after ``_MAX_WAIT`` steps without, it is waited for."""
        self.waited += 1
        visit = self._reduce(partial=False, wait=self.waited > _MAX_WAIT)
        if visit is not None:
            self.limit = None
        return visit

    # -- samples across ranks ---------------------------------------------------------------------
    def _reduce(self, partial: bool, wait: bool = False) -> Visit | None:
        """Take the samples whose energy is final on every rank (``wait``: all); the visit so far, if any."""
        ready = len(self.local) if wait else 0
        for start, end, _ in self.local if not wait else ():
            if not (end.finalized and (start is None or start.finalized)):
                break
            ready += 1
        if distributed.world_size() > 1:
            (ready,) = (int(x) for x in distributed.all_reduce([ready], "min"))
        if not partial and ready < len(self.local):
            return None
        taken, self.local = self.local[:ready], self.local[ready:]
        times = [end.time - (start.time if start is not None else 0.0) for start, end, _ in taken]
        energies = [_energy(end) - (_energy(start) if start is not None else 0.0) for start, end, _ in taken]
        self.times += distributed.all_reduce(times, "max")
        self.energies += distributed.all_reduce(energies, "sum")
        self.counts += [n for _, _, n in taken]
        if not self.counts:
            return None if partial else Visit(self.limit, (), (), (), self.first_step)  # type: ignore[arg-type]
        return Visit(self.limit, tuple(self.times), tuple(self.energies), tuple(self.counts), self.first_step)  # type: ignore[arg-type]

    # -- epochs and aborts ----------------------------------------------------------------------
    def step_end(self) -> None:
        """A step ended (``on_step_end``): an epoch ending right after it keeps the open sample."""
        self.step_ended_s = self.monitor.clock()

    def pause(self) -> None:
        """An epoch ended: keep the samples (and the open one if clean); measuring resumes next step."""
        if not self.open or self.ended:
            return
        if self._open_sample_is_clean():
            self.steps += 1  # the epoch's last step ended too
            self._cut(last=False)
        self.monitor.end_window(window_name(self.limit), cancel=True)  # type: ignore[arg-type]
        self.open = False
        self.steps = self.boundary  # the open sample's steps are dropped (they count against the budget)

    def _open_sample_is_clean(self) -> bool:
        """Whether the open sample holds only training (the same answer on every rank).

        It does with half a sample or more, when ``on_epoch_end`` came within a quarter of a step
        after ``on_step_end``.
        """
        open_steps = self.steps + 1 - self.boundary
        sample_s = self.sample_s or 0.0
        if sample_s <= 0 or (self.per_sample and 2 * open_steps < self.per_sample):
            return False
        now = self.monitor.clock()
        gap = math.inf if self.step_ended_s is None else now - self.step_ended_s
        gap, elapsed = distributed.all_reduce([gap, now - self.start_s], "max")
        if not self.per_sample:
            return elapsed >= 0.5 * sample_s and gap <= 0.25 * elapsed / open_steps
        return gap <= 0.25 * sample_s / self.per_sample

    def abandon(self) -> Visit | None:
        """Stop the visit now (the budget is spent): its samples whose energy is final, if any."""
        if self.limit is None:
            return None
        if self.open:
            self.monitor.end_window(window_name(self.limit), cancel=True)
            self.open = False
        self.ended, self.verdict = True, None
        visit = self._reduce(partial=True)
        self.limit = None
        return visit if visit is not None and visit.steps else None

    def cancel(self) -> None:
        """Forget the visit (its window, if open, is cancelled)."""
        if self.limit is not None and self.open:
            name = window_name(self.limit)
            if name in self.monitor.open_windows:
                self.monitor.end_window(name, cancel=True)
        self.limit, self.open, self.verdict = None, False, None


def _energy(reading: "Measurement") -> float:
    return reading.gpu_total_energy
