"""Thermally stable energy per call of a function, with measurement and cooldown durations found for you.

A GPU that heats up draws more power (leakage grows with temperature) and, when hot, slows down,
so back-to-back measurements of the same work drift and disagree. :func:`profile` makes every
trial start from the same thermal state and last long enough to average out the energy counter's
granularity:

1. a few warm-up calls, then calibration: the time of one call, and a warm-up trial;
2. before each trial, a **cooldown**: wait until every GPU is back within
   ``temperature_tolerance_c`` of its temperature before profiling began (without a temperature
   sensor: a fixed pause as long as the measurement);
3. the **measurement duration**: 1 s, 2 s, 4 s, ... until a few trials agree within
   ``target_rel_std`` (trials slowed down by heat are dropped and repeated);
4. the remaining trials at that duration; the result is their mean and spread.

It is the idea of Zeus's ``zeus.profile`` (sweeps of measurement and cooldown durations), with the
cooldown read from the temperature instead of swept. Every rank of a distributed job calls it at
the same time; energy is summed over ranks and time is the slowest rank's. See docs/insights.md.

Example:
    >>> from zeus_core.profile import profile
    >>> result = profile(lambda: model(batch))  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    12.31 J/call ± 0.4 % over 5 trials of 4 s (cooldown up to 18 s) ...
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._thermal import TemperatureMonitor

__all__ = ["Trial", "ProfileResult", "profile", "measure"]

logger = logging.getLogger(__name__)

_WINDOW = "zeus_suite.profile"


@dataclass(frozen=True)
class Trial:
    """One measurement window over ``calls`` calls.

    Attributes:
        energy_per_call_j: GPU energy per call, J (summed over the measured GPUs and ranks).
        time_per_call_s: Time per call, s.
        calls: Calls in the window.
        energy_j: Energy of the window, J.
        time_s: Duration of the window, s.
        cooldown_s: How long the GPUs cooled down before it, s.
        temperature_before_c: Hottest GPU's temperature when it began, °C (``None``: no sensor).
        temperature_after_c: Hottest GPU's temperature when it ended, °C.
        slowdown_s: Time a GPU spent slowed down by heat or the hardware inside it, s.

    Example:
        >>> from zeus_core.profile import Trial
        >>> trial = Trial(energy_per_call_j=2.0, time_per_call_s=0.01, calls=100, energy_j=200.0, time_s=1.0)
        >>> trial.energy_j / trial.calls
        2.0
    """

    energy_per_call_j: float
    time_per_call_s: float
    calls: int
    energy_j: float
    time_s: float
    cooldown_s: float = 0.0
    temperature_before_c: float | None = None
    temperature_after_c: float | None = None
    slowdown_s: float = 0.0


@dataclass(frozen=True)
class ProfileResult:
    """Energy per call from trials that began in the same thermal state.

    Attributes:
        trials: The trials the figures come from.
        measurement_s: The measurement duration used, s.
        cooldown_s: The longest cooldown a trial needed (or the fixed one), s.
        call_time_s: Time of one call from calibration, s.
        rejected: Trials dropped because a GPU slowed down during them.
        sweep: ``(duration s, relative spread)`` of each measurement duration tried.

    Example:
        >>> from zeus_core.profile import ProfileResult, Trial
        >>> trials = [Trial(e, 0.01, 100, 100 * e, 1.0) for e in (1.9, 2.0, 2.1)]
        >>> result = ProfileResult(trials, measurement_s=1.0, cooldown_s=0.0, call_time_s=0.01)
        >>> round(result.energy_per_call_j, 3), round(result.rel_std, 3)
        (2.0, 0.05)
    """

    trials: list[Trial]
    measurement_s: float
    cooldown_s: float
    call_time_s: float
    rejected: list[Trial] = field(default_factory=list)
    sweep: list[tuple[float, float]] = field(default_factory=list)

    @property
    def energy_per_call_j(self) -> float:
        """Mean energy per call over the trials, J."""
        return statistics.fmean(t.energy_per_call_j for t in self.trials)

    @property
    def energy_std_j(self) -> float:
        """Sample standard deviation of the energy per call across trials, J."""
        return _std([t.energy_per_call_j for t in self.trials])

    @property
    def time_per_call_s(self) -> float:
        """Mean time per call over the trials, s."""
        return statistics.fmean(t.time_per_call_s for t in self.trials)

    @property
    def rel_std(self) -> float:
        """The spread relative to the mean (0.01: 1 %)."""
        mean = self.energy_per_call_j
        return self.energy_std_j / mean if mean > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.energy_per_call_j:.4g} J/call ± {100 * self.rel_std:.2g} % over "
            f"{len(self.trials)} trials "
            f"of {self.measurement_s:g} s (cooldown up to {self.cooldown_s:.3g} s), "
            f"{self.time_per_call_s * 1000:.4g} ms/call"
            + (f"; {len(self.rejected)} trial(s) dropped for slowdown" if self.rejected else "")
        )


class _Session:
    """One profiling run: the function, the monitor, its temperature readings and the sleep to cool."""

    def __init__(
        self,
        fn: Callable[[], Any],
        monitor: ZeusMonitor,
        sleep: Callable[[float], None],
        poll_s: float,
    ) -> None:
        self.fn = fn
        self.monitor = monitor
        self.sleep = sleep
        self.poll_s = poll_s
        self.temps = TemperatureMonitor(monitor.gpus, update_period=poll_s, clock=monitor.clock)
        self.temps.sample_now()
        self.baseline = self.hottest()

    def hottest(self) -> float | None:
        now = self.temps.get_temperature()
        return max(now.values()) if now else None

    def calls_for(self, seconds: float, call_time_s: float) -> int:
        return max(1, math.ceil(seconds / max(call_time_s, 1e-9) - 1e-6))  # 5.000000001 calls are 5

    def cool(self, fixed_s: float | None, tolerance_c: float, max_s: float) -> float:
        """Wait ``fixed_s``, or until the GPUs are within ``tolerance_c`` of the baseline; s waited."""
        if fixed_s is not None or self.baseline is None:
            wait = fixed_s or 0.0
            if wait > 0:
                self.sleep(wait)
            return wait
        waited = 0.0
        while waited < max_s:
            self.temps.sample_now()
            hottest = self.hottest()
            if hottest is None or hottest <= self.baseline + tolerance_c:
                break
            self.sleep(self.poll_s)
            waited += self.poll_s
        return waited

    def trial(self, calls: int, warmup_calls: int, cooldown_s: float) -> Trial:
        for _ in range(warmup_calls):
            self.fn()
        self.temps.sample_now()
        before = self.hottest()
        clock = self.monitor.clock
        self.monitor.begin_window(_WINDOW)
        start = last = clock()
        for _ in range(calls):
            self.fn()
            if clock() - last >= self.poll_s:  # slowdowns are sampled inside the window too
                last = clock()
                self.temps.sample_now()
        m = self.monitor.end_window(_WINDOW)
        end = clock()
        self.temps.sample_now()
        slowdown = max(self.temps.slowdown_seconds(start, end).values(), default=0.0)
        energy = distributed.all_reduce([sum(m.gpu_energy.values())], "sum")[0]
        time_s, slowdown = distributed.all_reduce([m.time, slowdown], "max")
        return Trial(
            energy_per_call_j=energy / calls,
            time_per_call_s=time_s / calls,
            calls=calls,
            energy_j=energy,
            time_s=time_s,
            cooldown_s=cooldown_s,
            temperature_before_c=before,
            temperature_after_c=self.hottest(),
            slowdown_s=slowdown,
        )

    def calibrate(self, warmup_calls: int, min_s: float = 0.2, max_calls: int = 1000) -> float:
        """Time of one call, s, after ``warmup_calls`` calls."""
        for _ in range(warmup_calls):
            self.fn()
        clock = self.monitor.clock
        self.monitor.begin_window(_WINDOW)  # synchronises queued GPU work at both ends
        start = clock()
        calls = 0
        while calls < max_calls and (calls < 3 or clock() - start < min_s):
            self.fn()
            calls += 1
        elapsed = self.monitor.end_window(_WINDOW).time
        return distributed.all_reduce([elapsed / calls], "max")[0]


def measure(
    fn: Callable[[], Any],
    monitor: ZeusMonitor | None = None,
    *,
    measurement_s: float,
    cooldown_s: float = 0.0,
    warmup_calls: int = 3,
    calls: int | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Trial:
    """One trial with durations you chose: cooldown, warm-up calls, then calls filling ``measurement_s``.

    Args:
        fn: The work to measure, called with no arguments.
        monitor: The monitor to measure with; default: one over this process's GPUs.
        measurement_s: How long to measure, s (rounded up to whole calls).
        cooldown_s: Idle time before the trial, s.
        warmup_calls: Calls before the window opens.
        calls: Calls in the window (wins over ``measurement_s``; skips calibration).
        sleep: How to wait (default ``time.sleep``; a simulation passes its clock's advance).

    Returns:
        The :class:`Trial`.

    Example:
        >>> trial = measure(lambda: model(batch), measurement_s=5.0, cooldown_s=10.0)  # doctest: +SKIP
        >>> trial.energy_per_call_j  # doctest: +SKIP
    """
    session = _Session(fn, monitor or ZeusMonitor(), sleep or time.sleep, poll_s=0.5)
    if calls is None:
        calls = session.calls_for(measurement_s, session.calibrate(warmup_calls))
    waited = session.cool(cooldown_s, 0.0, cooldown_s)
    return session.trial(calls, warmup_calls, waited)


def profile(
    fn: Callable[[], Any],
    monitor: ZeusMonitor | None = None,
    *,
    trials: int = 5,
    measurement_s: float | None = None,
    cooldown_s: float | None = None,
    warmup_calls: int = 3,
    warmup_trials: int = 1,
    target_rel_std: float = 0.01,
    min_measurement_s: float = 1.0,
    max_measurement_s: float = 32.0,
    temperature_tolerance_c: float = 1.0,
    max_cooldown_s: float = 300.0,
    poll_s: float = 0.5,
    sleep: Callable[[float], None] | None = None,
) -> ProfileResult:
    """Energy per call of ``fn``, from trials that start equally cool and last long enough (see the module).

    Args:
        fn: The work to measure, called with no arguments (e.g. one training step).
        monitor: The monitor to measure with; default: one over this process's GPUs.
        trials: Trials the result is averaged over (at least 2).
        measurement_s: Measurement duration, s; ``None``: found (doubling from ``min_measurement_s``).
        cooldown_s: Fixed cooldown before each trial, s; ``None``: wait until the GPUs are back within
            ``temperature_tolerance_c`` of where they started (a pause as long as the measurement
            without a temperature sensor).
        warmup_calls: Calls before each trial's window.
        warmup_trials: Trials run and dropped first, so every kept trial cools down from the same
            heat (the first would otherwise start cooler than the rest).
        target_rel_std: Relative spread of a duration's trials that ends the duration search.
        min_measurement_s: First measurement duration tried, s.
        max_measurement_s: Longest measurement duration tried, s.
        temperature_tolerance_c: How close to the starting temperature a cooldown waits for, °C.
        max_cooldown_s: Longest cooldown, s.
        poll_s: Temperature sampling period during cooldowns and windows, s.
        sleep: How to wait (default ``time.sleep``; a simulation passes its clock's advance).

    Returns:
        The :class:`ProfileResult`.

    Raises:
        ZeusConfigError: A count or duration is out of range.

    Example:
        >>> result = profile(train_step, trials=5)  # doctest: +SKIP
        >>> result.energy_per_call_j, result.rel_std  # doctest: +SKIP
    """
    if trials < 2 or not 0 < min_measurement_s <= max_measurement_s or poll_s <= 0 or target_rel_std <= 0:
        raise ZeusConfigError(
            f"profile(trials={trials}, min_measurement_s={min_measurement_s}, max_measurement_s="
            f"{max_measurement_s}, poll_s={poll_s}, target_rel_std={target_rel_std}): need trials >= 2, "
            "0 < min_measurement_s <= max_measurement_s, and positive poll_s and target_rel_std."
        )
    session = _Session(fn, monitor or ZeusMonitor(), sleep or time.sleep, poll_s)
    call_time = session.calibrate(warmup_calls)
    kept: list[Trial] = []
    rejected: list[Trial] = []
    sweep: list[tuple[float, float]] = []

    def fixed_pause(duration: float) -> float | None:
        """The fixed cooldown, or ``None`` to wait for the temperature (a pause without a sensor)."""
        if cooldown_s is not None:
            return cooldown_s
        return None if session.baseline is not None else duration

    def run(duration: float, wanted: int) -> list[Trial]:
        fixed = fixed_pause(duration)
        out: list[Trial] = []
        attempts = 0
        while len(out) < wanted and attempts < 2 * wanted:
            attempts += 1
            waited = session.cool(fixed, temperature_tolerance_c, max_cooldown_s)
            trial = session.trial(session.calls_for(duration, call_time), warmup_calls, waited)
            (rejected if trial.slowdown_s > 0 else out).append(trial)
        return out

    duration = measurement_s if measurement_s is not None else min_measurement_s
    for _ in range(warmup_trials):
        session.cool(fixed_pause(duration), temperature_tolerance_c, max_cooldown_s)
        session.trial(session.calls_for(duration, call_time), warmup_calls, 0.0)
    while True:
        pilot = run(duration, trials if measurement_s is not None else min(3, trials))
        spread = _rel_std([t.energy_per_call_j for t in pilot])
        sweep.append((duration, spread))
        kept = pilot
        if measurement_s is not None or spread <= target_rel_std or duration * 2 > max_measurement_s:
            break
        duration *= 2
    if measurement_s is None and spread > target_rel_std:
        console.warn(
            f"profile: trials of {duration:g} s still spread {100 * spread:.2g} % (target "
            f"{100 * target_rel_std:.2g} %); raise max_measurement_s or target_rel_std."
        )
    if len(kept) < trials:
        kept += run(duration, trials - len(kept))
    return ProfileResult(
        trials=kept,
        measurement_s=duration,
        cooldown_s=max((t.cooldown_s for t in kept), default=0.0),
        call_time_s=call_time,
        rejected=rejected,
        sweep=sweep,
    )


def _std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) >= 2 else 0.0


def _rel_std(values: list[float]) -> float:
    if not values:
        return float("inf")
    mean = statistics.fmean(values)
    return _std(values) / mean if mean > 0 else 0.0
