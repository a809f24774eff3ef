"""How a power limit's measurement is cut into samples, and this rank's samples so far.

A *sample* is a group of consecutive measured steps that is read once from the energy counter
(``ZeusMonitor.read_window``). Reading once per step does not work on real GPUs: an NVML
energy read takes milliseconds (3.6–4.3 ms measured on an H100), which slows the steps being
measured, and the counter itself only advances every ~20–100 ms (100 ms on that H100), so the
energy of a 4 ms step reads as 0 or as many steps' worth (0 to 15 kW implied under a 700 W cap).
A sample therefore lasts at least ``min_sample_s`` (0.25 s by default), so reads cost ~1–2 % of
the profiled time and a counter update period adds at most ``update period / min_sample_s`` of
noise to a sample's energy. That noise does not reach a limit's mean energy, which comes from
the whole window (the errors of consecutive samples cancel), but it widens the intervals that
early stopping judges: on GPUs whose counter updates every 100 ms, energy-driven selectors stop
sooner with ``min_sample_s`` of 0.5–1 s. Per-step values of a sample are its time and energy
divided by its steps; :class:`~.measurement.PowerLimitMeasurement` weights each sample by its
steps.

**Where samples end** (every rank must cut identically, because each cut that is checked is
followed by an all-reduce that every rank has to reach). Cuts are step counts, never clock
readings:

1. The first sample of each visit of a limit ends at the first of the measured steps 1, 2, 4,
   8, … at which the time since the window began, by each rank's clock (``monitor.clock()``,
   no energy read) and all-reduced (max), is at least ``min_sample_s``. Its read, like every
   sample's, is synchronised; all-reducing (max) its time ``T`` over its ``k`` steps fixes
   ``n = max(1, ceil(min_sample_s · k / T))`` steps per sample — the same ``n`` on every rank.
   Ranks of a data-parallel job wait for each other every step, so the slowest rank's time is
   the job's. Timing one step alone would not do: right after a synchronisation a step is not
   overlapped with the CPU's work of queuing the next, and on an H100 a 4 ms step then took 18 ms.
   Where fewer steps than the first sample's are left before the cap, it runs on to the cap
   (``n`` is at most the first sample's steps, so no shorter sample can follow).
2. A sample ends once it has ``n`` steps, unless fewer than ``n`` steps would be left before the
   ``profile_steps`` cap: then it runs on to the cap, so no sample is shorter than ``n`` steps
   (except a measurement shorter than ``n`` steps, which is one sample).
3. Whenever the samples are all-reduced (for an early-stopping check, at most every
   ``check_every`` steps), ``n`` is recomputed from the job's mean step time over the visit's
   samples so far — again the same on every rank — so a first sample that misjudged the step
   time does not set the size of every later one.

Every sample's read is synchronised with the GPU (queued work finishes first), so a sample's
time is the GPU's: without it the clock measures the CPU, which enqueues asynchronous steps and
may run many of them ahead, and on an H100 the per-sample times of 4 ms steps then spread by
±50 %. One wait per sample (every ``min_sample_s`` or longer) costs next to nothing.

With steps that already last ``min_sample_s`` or more, ``n`` is 1: one sample per step, the
per-step statistics of a plain profiler. ``min_sample_s=0`` forces that, without
synchronisation or extra all-reduces (the per-step profiler of earlier versions). A measurement
never calls ``read_window`` more often than it has steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeus_core import _distributed as distributed
from zeus_core.monitor._measurement import Measurement

if TYPE_CHECKING:
    from zeus_core.monitor._energy import ZeusMonitor

__all__ = ["steps_per_sample", "sample_ends", "LocalSamples", "SampleWindow"]


def steps_per_sample(min_sample_s: float, step_time_s: float) -> int:
    """Steps a sample needs to last ``min_sample_s`` when a step takes ``step_time_s``.

    Args:
        min_sample_s: Shortest sample, s (>= 0; 0 gives one step per sample).
        step_time_s: Time of one step, s (the slowest rank's).

    Example:
        >>> steps_per_sample(0.25, 0.010), steps_per_sample(0.25, 0.3), steps_per_sample(0.0, 0.01)
        (25, 1, 1)
    """
    if min_sample_s <= 0 or not step_time_s > 0 or math.isinf(step_time_s):
        return 1
    # The small relative slack keeps 0.25 s / 0.01 s at 25 despite binary rounding.
    return max(1, math.ceil(min_sample_s / step_time_s * (1.0 - 1e-9)))


def sample_ends(steps: int, boundary_step: int, per_sample: int, steps_left: int) -> bool:
    """Whether the sample in progress ends after measured step ``steps`` (rule 2 of the module).

    Args:
        steps: Steps measured in this visit so far, the one just finished included.
        boundary_step: ``steps`` at the end of the previous sample (0 for the first).
        per_sample: Steps per sample, ``n``.
        steps_left: Steps the cap still allows after this one (0: this was the last step).

    Example:
        >>> [s for s in range(1, 11) if sample_ends(s, (s - 1) // 4 * 4, 4, 10 - s)]  # cap at 10
        [4, 10]
    """
    if steps_left <= 0:
        return True
    return steps - boundary_step >= per_sample and steps_left >= per_sample


@dataclass
class LocalSamples:
    """This rank's samples of the open measurement window that are not yet all-reduced.

    Readings of a window are cumulative from its start; a sample is the difference between two
    consecutive readings.

    Attributes:
        boundary_step: Measured steps at the end of the latest sample.
        next_check: Measured steps from which the next sample end checks the early-stopping rules
            (checks follow a grid of ``check_every`` steps, each at the first sample end on or
            after its grid point).
        times_s: Time of each pending sample on this rank, s.
        energies_j: GPU energy of each pending sample on this rank, J.
        steps: Steps of each pending sample.
        last_time_s: Cumulative window time at the latest reading, s.
        last_energy_j: Cumulative window energy at the latest reading, J.
    """

    boundary_step: int = 0
    next_check: int = 0
    times_s: list[float] = field(default_factory=list)
    energies_j: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    last_time_s: float = 0.0
    last_energy_j: float = 0.0

    def add(self, reading: Measurement, steps: int) -> None:
        """Close the sample that ends after measured step ``steps`` with a cumulative ``reading``."""
        self.times_s.append(reading.time - self.last_time_s)
        self.energies_j.append(reading.gpu_total_energy - self.last_energy_j)
        self.steps.append(steps - self.boundary_step)
        self.last_time_s, self.last_energy_j = reading.time, reading.gpu_total_energy
        self.boundary_step = steps

    def take(self) -> tuple[list[float], list[float], list[int]]:
        """The pending samples (times, energies, steps), which are then no longer pending."""
        out = (self.times_s, self.energies_j, self.steps)
        self.times_s, self.energies_j, self.steps = [], [], []
        return out


class SampleWindow(LocalSamples):
    """This rank's side of one limit's measurement: a monitor window read once per sample.

    Opening it begins the window ``name`` on ``monitor``. Every rank must call
    :meth:`agree_steps_per_sample` and :meth:`reduce` at the same measured steps.

    Args:
        monitor: The monitor of this rank's GPUs.
        name: The window's name.
        next_check: Measured steps from which sample ends check the early-stopping rules.
        sync: Synchronise every sample's read with the GPU.
    """

    def __init__(self, monitor: "ZeusMonitor", name: str, next_check: int = 0, sync: bool = True) -> None:
        monitor.begin_window(name)
        super().__init__(next_check=next_check)
        self.monitor = monitor
        self.name = name
        self.sync = sync
        self.start_s = monitor.clock()
        """The monitor's clock when the window (or its latest segment) began, s."""
        self.segment_start = 0
        """Measured steps of the visit before the current segment (see :meth:`pause`)."""
        self.open = True
        """Whether the monitor window is open (``False`` between epochs)."""

    def pause(self) -> int:
        """End the segment at an epoch boundary: the open sample's steps are dropped, unread.

        The time between epochs (evaluation, checkpoints) is not part of any sample, so a limit's
        measurement may span epochs. Returns the measured steps kept (the last sample's end).
        """
        self.monitor.end_window(self.name, cancel=True)
        self.open = False
        return self.boundary_step

    def resume(self) -> None:
        """Start a new segment at the next step (the window is begun again; readings restart at 0)."""
        self.monitor.begin_window(self.name)
        self.open = True
        self.start_s = self.monitor.clock()
        self.segment_start = self.boundary_step
        self.last_time_s = self.last_energy_j = 0.0

    def first_sample_ends(self, steps: int, min_sample_s: float) -> bool:
        """Rule 1: whether the first sample ends after measured step ``steps`` (of the segment).

        Only at powers of two, where it costs one all-reduce (max) of a clock reading.
        """
        if steps < 1 or steps & (steps - 1):
            return False
        (elapsed,) = distributed.all_reduce([self.monitor.clock() - self.start_s], "max")
        return elapsed >= min_sample_s

    def agree_steps_per_sample(self, reading: Measurement, steps: int, min_sample_s: float) -> int:
        """Rule 1: ``n`` from the first sample's ``reading`` of ``steps`` steps (one all-reduce, max)."""
        (elapsed,) = distributed.all_reduce([reading.time], "max")
        return steps_per_sample(min_sample_s, elapsed / steps)

    def close_sample(self, steps: int, last: bool) -> Measurement:
        """End the sample after measured step ``steps`` with one counter read; ``last`` ends the window.

        Returns the cumulative reading of the window.
        """
        if last:
            reading = self.monitor.end_window(self.name)
            self.open = False
        else:
            reading = self.monitor.read_window(self.name, sync_execution=self.sync)
        self.add(reading, steps)
        return reading

    def reduce(self) -> tuple[list[float], list[float], list[int]]:
        """The pending samples across ranks (time: max, energy: sum) and their steps; then none is pending."""
        times, energies, steps = self.take()
        return distributed.all_reduce(times, "max"), distributed.all_reduce(energies, "sum"), steps

    def close(self) -> None:
        """End the window, if open, without reading it (its samples are already taken)."""
        if self.open:
            self.monitor.end_window(self.name, cancel=True)
            self.open = False
