"""Zeus's ``zeus.profile``: :func:`measure` and the duration sweeps, on :mod:`zeus_core.profile`'s trials.

Each trial is the suite's (:func:`zeus_core.profile.measure`: cooldown, warm-up calls, a window of
whole calls; energy summed over ranks, time the slowest rank's); the sweeps are Zeus's: every
duration in a search range gets ``num_trials`` trials after ``num_warmup_trials`` unmeasured
ones, and a duration is valid when the trials' energy per iteration spreads less than
``trial_stddev_threshold`` J. The suite's own :func:`zeus_core.profile.profile` finds the
durations for you instead (the cooldown from the GPU temperature).

Example:
    >>> from zeus_core.compat.monitor import ZeusMonitor
    >>> from zeus_core.compat.profile import measure
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> clock = VirtualClock()
    >>> monitor = ZeusMonitor(gpus=[simulated_gpu("a40", clock=clock, busy=True)])
    >>> trial = measure(lambda: clock.advance(0.01), monitor, measurement_duration=1.005,
    ...                 cooldown_duration=0.0)
    >>> trial.iterations, round(trial.energy_per_iter, 2)  # 0.01 s at 300 W
    (100, 3.0)
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from zeus_core import _distributed
from zeus_core import profile as _profile
from zeus_core.monitor._energy import ZeusMonitor

__all__ = [
    "TrialResult",
    "SweepResult",
    "SweepReport",
    "measure",
    "profile_measurement_duration",
    "profile_cooldown_duration",
    "profile_parameters",
]

logger = logging.getLogger(__name__)

_DEFAULT_SEARCH_RANGE = [float(x) for x in range(1, 11)]  # Zeus's: 1 to 10 s


@dataclass
class TrialResult:
    """One trial, Zeus's fields (J, s, °C; temperature is ``nan`` where the GPUs report none).

    Example:
        >>> from zeus_core.compat.profile import TrialResult
        >>> TrialResult(2.0, 0.01, 200.0, 1.0, 100, 40.0, 42.0).energy_per_iter
        2.0
    """

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


@dataclass
class SweepResult:
    """The trials at one duration and whether they agree (``energy_std < trial_stddev_threshold``).

    Example:
        >>> from zeus_core.compat.profile import SweepResult
        >>> r = SweepResult(5.0, 10.0, [], 2.0, 0.001, 40.0, 42.0, 5.0, 200.0, True)
        >>> print(r)  # doctest: +NORMALIZE_WHITESPACE
        measurement=5.0 s  cooldown=10.0 s  mean=2.0000 J  std=0.0010 J
        temp_before=40.0 °C  temp_after=42.0 °C  [VALID]
    """

    measurement_duration: float
    cooldown_duration: float
    trials: list[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def __str__(self) -> str:
        return (
            f"measurement={self.measurement_duration:.1f} s  cooldown={self.cooldown_duration:.1f} s  "
            + _figures(self)
        )


@dataclass
class SweepReport:
    """A sweep of one duration with the other fixed: one :class:`SweepResult` per value.

    Example:
        >>> from zeus_core.compat.profile import SweepReport, SweepResult
        >>> entry = SweepResult(5.0, 10.0, [], 2.0, 0.001, 40.0, 42.0, 5.0, 200.0, True)
        >>> print(SweepReport(("measurement_duration", [5.0]), ("cooldown_duration", 10.0), [entry]))
        ... # doctest: +ELLIPSIS
        Sweep measurement_duration (fixed cooldown_duration=10.0 s):
          measurement_duration=5.0 s  mean=2.0000 J  std=0.0010 J  temp_before=40.0 °C  ...  [VALID]
    """

    sweep_param: tuple[str, list[float]]
    fixed_param: tuple[str, float]
    entries: list[SweepResult]

    def __str__(self) -> str:
        swept, _ = self.sweep_param
        fixed, value = self.fixed_param
        prefixes = [f"{swept}={getattr(e, swept):.1f} s" for e in self.entries]
        width = max((len(p) for p in prefixes), default=0)
        lines = [f"Sweep {swept} (fixed {fixed}={value:.1f} s):"]
        lines += [f"  {p:<{width}}  {_figures(e)}" for p, e in zip(prefixes, self.entries)]
        return "\n".join(lines)


def _figures(e: SweepResult) -> str:
    return (
        f"mean={e.energy_mean:.4f} J  std={e.energy_std:.4f} J  "
        f"temp_before={e.avg_temperature_before:.1f} °C  "
        f"temp_after={e.avg_temperature_after:.1f} °C  [{'VALID' if e.is_valid else 'INVALID'}]"
    )


def _trial(
    fn: Callable[[], Any], monitor: ZeusMonitor, calls: int, cooldown_s: float, warmup_calls: int
) -> TrialResult:
    t = _profile.measure(
        fn, monitor, measurement_s=0.0, cooldown_s=cooldown_s, warmup_calls=warmup_calls, calls=calls
    )
    nan = math.nan
    before = nan if t.temperature_before_c is None else t.temperature_before_c
    after = nan if t.temperature_after_c is None else t.temperature_after_c
    return TrialResult(t.energy_per_call_j, t.time_per_call_s, t.energy_j, t.time_s, t.calls, before, after)


def _iteration_duration(fn: Callable[[], Any], monitor: ZeusMonitor, warmup: int, calibration: int) -> float:
    """Time of one call after ``warmup`` calls, s, the slowest rank's (Zeus's calibration)."""
    t = _profile.measure(fn, monitor, measurement_s=0.0, warmup_calls=warmup, calls=max(1, calibration))
    return t.time_per_call_s


def _calls(duration_s: float, iteration_s: float) -> int:
    return max(1, int(duration_s / max(iteration_s, 1e-12)))


def _sweep(
    fn: Callable[[], Any],
    monitor: ZeusMonitor,
    values: Sequence[float],
    fixed: float,
    swept: Literal["cooldown_duration", "measurement_duration"],
    settings: dict[str, Any],
) -> SweepReport:
    cooldown_sweep = swept == "cooldown_duration"
    iteration_s = settings["iteration_duration"]
    warm_measure = fixed if cooldown_sweep else max(values)
    for _ in range(settings["num_warmup_trials"]):
        _trial(fn, monitor, _calls(warm_measure, iteration_s), 0.0, 0)
    entries = []
    for value in values:
        cooldown, duration = (value, fixed) if cooldown_sweep else (fixed, value)
        if _distributed.is_rank_zero():
            logger.info("Starting %s=%.1f s [%d trials]", swept, value, settings["num_trials"])
        trials = [
            _trial(fn, monitor, _calls(duration, iteration_s), cooldown, settings["num_warmup_iterations"])
            for _ in range(settings["num_trials"])
        ]
        energies = [t.energy_per_iter for t in trials]
        std = statistics.stdev(energies) if len(energies) >= 2 else 0.0
        n = len(trials)
        entries.append(
            SweepResult(
                duration,
                cooldown,
                trials,
                statistics.fmean(energies),
                std,
                sum(t.temperature_before for t in trials) / n,
                sum(t.temperature_after for t in trials) / n,
                sum(t.total_time for t in trials) / n,
                sum(t.total_energy for t in trials) / n,
                std < settings["trial_stddev_threshold"],
            )
        )
    other = "measurement_duration" if cooldown_sweep else "cooldown_duration"
    return SweepReport((swept, list(values)), (other, fixed), entries)


def _settings(
    fn: Callable[[], Any],
    monitor: ZeusMonitor,
    iteration_duration: float | None,
    num_trials: int,
    num_warmup_trials: int,
    trial_stddev_threshold: float,
    num_warmup_iterations: int,
    num_calibration_iterations: int,
) -> dict[str, Any]:
    """What :func:`_sweep` needs, both sweeps alike; the iteration is timed here unless given."""
    if iteration_duration is None:
        iteration_duration = _iteration_duration(
            fn, monitor, num_warmup_iterations, num_calibration_iterations
        )
    return dict(
        iteration_duration=iteration_duration,
        num_trials=num_trials,
        num_warmup_trials=num_warmup_trials,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
    )


def measure(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: float | None = None,
) -> TrialResult:
    """One trial with the durations given: calibrate, cool down, warm up, measure whole iterations.

    Args:
        target_function: One iteration of the workload (no arguments).
        zeus_monitor: The monitor (one ``ZeusMonitor(gpu_indices=[local_rank])`` per rank).
        measurement_duration: How long to measure, s.
        cooldown_duration: Idle time before the measurement, s.
        num_warmup_iterations: Iterations before calibration and before the window.
        num_calibration_iterations: Iterations timed to size the window.
        warmup_settle_duration: Idle time after the warm-up iterations, s (``None``: none).

    Example:
        >>> from zeus_core.compat.profile import measure
        >>> trial = measure(train_step, monitor, 5.0, 10.0)  # doctest: +SKIP
    """
    iteration_s = _iteration_duration(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations
    )
    if warmup_settle_duration:
        _profile.measure(
            lambda: None, zeus_monitor, measurement_s=0.0, cooldown_s=warmup_settle_duration, calls=1
        )
    return _trial(
        target_function,
        zeus_monitor,
        _calls(measurement_duration, iteration_s),
        cooldown_duration,
        num_warmup_iterations,
    )


def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep measurement durations with the cooldown fixed (Zeus's defaults: 1-10 s, 10 trials each).

    Example:
        >>> from zeus_core.compat.profile import profile_measurement_duration
        >>> report = profile_measurement_duration(step, monitor, [2.0, 4.0])  # doctest: +SKIP
    """
    settings = _settings(
        target_function,
        zeus_monitor,
        iteration_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
    )
    values = measurement_duration_search_range or _DEFAULT_SEARCH_RANGE
    return _sweep(target_function, zeus_monitor, values, cooldown_duration, "measurement_duration", settings)


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    cooldown_duration_search_range: list[float] | None = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep cooldown durations with the measurement duration fixed (Zeus's defaults).

    Example:
        >>> from zeus_core.compat.profile import profile_cooldown_duration
        >>> report = profile_cooldown_duration(step, monitor, [5.0, 10.0])  # doctest: +SKIP
    """
    settings = _settings(
        target_function,
        zeus_monitor,
        iteration_duration,
        num_trials,
        num_warmup_trials,
        trial_stddev_threshold,
        num_warmup_iterations,
        num_calibration_iterations,
    )
    values = cooldown_duration_search_range or _DEFAULT_SEARCH_RANGE
    return _sweep(target_function, zeus_monitor, values, measurement_duration, "cooldown_duration", settings)


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration_search_range: list[float] | None = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> tuple[SweepReport, SweepReport]:
    """Both sweeps, each holding the other duration at the maximum of its range (Zeus's procedure).

    Returns:
        ``(measurement_report, cooldown_report)``.

    Example:
        >>> from zeus_core.compat.profile import profile_parameters
        >>> measured, cooled = profile_parameters(step, monitor)  # doctest: +SKIP
    """
    m_range = measurement_duration_search_range or _DEFAULT_SEARCH_RANGE
    c_range = cooldown_duration_search_range or _DEFAULT_SEARCH_RANGE
    iteration_s = _iteration_duration(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations
    )
    common: dict[str, Any] = dict(
        num_trials=num_trials,
        num_warmup_trials=num_warmup_trials,
        trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations,
        iteration_duration=iteration_s,
    )
    measured = profile_measurement_duration(
        target_function, zeus_monitor, m_range, cooldown_duration=max(c_range), **common
    )
    cooled = profile_cooldown_duration(
        target_function, zeus_monitor, c_range, measurement_duration=max(m_range), **common
    )
    return measured, cooled
