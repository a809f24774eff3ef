"""GPU temperature and clock-event (throttle) reasons over time, and whether a window was thermally clean.

:class:`TemperatureMonitor` samples every GPU's temperature (°C) and NVML clock-event reasons in a
daemon thread (or on demand with :meth:`~TemperatureMonitor.sample_now`); :func:`check_window`
says whether a measured window is representative: not slowed down by heat or the hardware, and
not taken while the temperature was still climbing. The power-limit optimizer can call it on each
profiling window and measure the limit again when it is not. See docs/insights.md ("Thermally
stable profiling").
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from zeus_core.device._base import GPU, Clock, ClockEventReasons, wall_clock
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusNotSupportedError

__all__ = ["TemperatureMonitor", "ThermalCheck", "check_window"]

logger = logging.getLogger(__name__)


def _run(ref: "weakref.ref[TemperatureMonitor]", stop: threading.Event, period_s: float) -> None:
    """Sampling loop; holds only a weak reference so an abandoned monitor stops its thread."""
    while not stop.wait(period_s):
        monitor = ref()
        if monitor is None:
            return
        monitor._sample()
        del monitor


class TemperatureMonitor:
    """Samples GPU temperature (°C) and clock-event reasons in a background thread.

    GPUs that report neither (simulated GPUs, old drivers) are skipped; :attr:`supported` lists
    the ones sampled. Each series keeps its newest ``capacity`` samples. The method names follow
    Zeus's ``TemperatureMonitor`` (``get_temperature_timeline``, ``get_temperature``), whose
    ``update_period`` this takes too; unlike Zeus's, sampling starts with :meth:`start` (or a
    ``with`` block) and runs in a thread, not a process.

    Args:
        gpus: GPUs to sample; ``None``: this machine's GPUs.
        gpu_indices: Of those, the indices to sample; ``None``: all.
        update_period: Pause between samples, s.
        capacity: Samples kept per GPU.
        clock: Time source, s; default: the GPUs' clock (wall-clock seconds on real GPUs).

    Raises:
        ZeusConfigError: ``update_period`` or ``capacity`` is not positive.
        ZeusDeviceNotFoundError: A requested index does not exist.

    Example:
        >>> from zeus_core.monitor._thermal import TemperatureMonitor
        >>> with TemperatureMonitor(update_period=1.0) as temps:  # doctest: +SKIP
        ...     train_one_epoch()
        >>> temps.get_temperature_timeline()  # doctest: +SKIP
        {0: [(1718000000.0, 41.0), (1718000001.0, 47.0), ...]}
    """

    def __init__(
        self,
        gpus: Sequence[GPU] | None = None,
        gpu_indices: Sequence[int] | None = None,
        *,
        update_period: float = 1.0,
        capacity: int = 36_000,
        clock: Clock | None = None,
    ) -> None:
        if not update_period > 0 or capacity < 1:
            raise ZeusConfigError(
                f"TemperatureMonitor(update_period={update_period}, capacity={capacity}): both must be "
                "positive."
            )
        if gpus is None:
            from zeus_core.device._discovery import get_gpus

            gpus = get_gpus()
        by_index = {g.index: g for g in gpus}
        if gpu_indices is not None:
            missing = [i for i in gpu_indices if i not in by_index]
            if missing:
                raise ZeusDeviceNotFoundError(
                    f"TemperatureMonitor(gpu_indices={list(gpu_indices)}): no GPU {missing[0]}; this "
                    f"process sees GPUs {sorted(by_index)}."
                )
            by_index = {i: by_index[i] for i in dict.fromkeys(gpu_indices)}
        self.gpus: list[GPU] = list(by_index.values())
        self.clock: Clock = clock or (self.gpus[0].clock if self.gpus else wall_clock)
        self.update_period = float(update_period)
        self._temps: dict[int, deque[tuple[float, float]]] = {}
        self._events: dict[int, deque[tuple[float, int]]] = {}
        self._capacity = int(capacity)
        self._unsupported: dict[int, set[str]] = {g.index: set() for g in self.gpus}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- sampling ---------------------------------------------------------------------------------
    @property
    def supported(self) -> list[int]:
        """Indices of the GPUs that reported a temperature or clock-event reasons at least once."""
        return sorted(set(self._temps) | set(self._events))

    def start(self) -> None:
        """Take a sample now, then keep sampling every ``update_period`` s in a daemon thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_run,
            args=(weakref.ref(self), self._stop, self.update_period),
            name="zeus-temperature-monitor",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the sampling thread (idempotent); samples stay queryable."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def running(self) -> bool:
        """Whether the sampling thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def sample_now(self) -> None:
        """Sample every GPU once, on this thread (also while the background thread runs)."""
        self._sample()

    def _sample(self) -> None:
        for gpu in self.gpus:
            skip = self._unsupported[gpu.index]
            t = self.clock()
            if "temperature" not in skip:
                value = self._read(gpu, "temperature")
                if value is not None:
                    self._append(self._temps, gpu.index, (t, float(value)))  # type: ignore[arg-type]
            if "events" not in skip:
                reasons = self._read(gpu, "events")
                if reasons is not None:
                    self._append(self._events, gpu.index, (t, reasons.mask))  # type: ignore[union-attr]

    def _read(self, gpu: GPU, what: str) -> float | ClockEventReasons | None:
        try:
            return gpu.get_temperature() if what == "temperature" else gpu.get_clock_event_reasons()
        except ZeusNotSupportedError:
            self._unsupported[gpu.index].add(what)  # never asked again
        except Exception as e:  # a failing read must not end sampling
            logger.debug("TemperatureMonitor: reading %s of GPU %d failed: %s", what, gpu.index, e)
        return None

    def _append(self, series: dict, index: int, sample: tuple) -> None:
        with self._lock:
            series.setdefault(index, deque(maxlen=self._capacity)).append(sample)

    # -- queries (Zeus's names) ----------------------------------------------------------------------
    def get_temperature_timeline(
        self, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[int, list[tuple[float, float]]]:
        """Temperature samples with ``start_time <= t <= end_time``: GPU index -> ``[(t s, °C)]``."""
        return self._timeline(self._temps, gpu_index, start_time, end_time)

    def get_temperature(self, time: float | None = None) -> dict[int, float] | None:
        """Each GPU's temperature at ``time`` (nearest sample; latest if ``None``), °C, or ``None``."""
        with self._lock:
            series = {i: list(s) for i, s in self._temps.items()}
        if not series:
            return None
        if time is None:
            return {i: s[-1][1] for i, s in series.items()}
        return {i: min(s, key=lambda p: abs(p[0] - time))[1] for i, s in series.items()}

    def get_clock_event_timeline(
        self, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[int, list[tuple[float, ClockEventReasons]]]:
        """Clock-event reasons sampled in ``[start_time, end_time]``: GPU index -> ``[(t s, reasons)]``."""
        raw = self._timeline(self._events, gpu_index, start_time, end_time)
        return {i: [(t, ClockEventReasons(int(m))) for t, m in s] for i, s in raw.items()}

    def slowdown_seconds(self, start: float, end: float) -> dict[int, float]:
        """Time each GPU spent in a thermal or hardware slowdown within ``[start, end]``, s (from samples).

        A sample stands for the interval up to the next one (at most ``update_period`` long), clipped
        to the window.
        """
        with self._lock:
            series = {i: list(s) for i, s in self._events.items()}
        out: dict[int, float] = {}
        for index, samples in series.items():
            total = 0.0
            for k, (t, mask) in enumerate(samples):
                t_next = samples[k + 1][0] if k + 1 < len(samples) else t + self.update_period
                t_next = min(t_next, t + self.update_period)
                lo, hi = max(t, start), min(t_next, end)
                if hi > lo and mask & ClockEventReasons.SLOWDOWN_MASK:
                    total += hi - lo
            out[index] = total
        return out

    def _timeline(
        self, store: dict, gpu_index: int | None, start: float | None, end: float | None
    ) -> dict[int, list]:
        with self._lock:
            series = {i: list(s) for i, s in store.items() if gpu_index is None or i == gpu_index}
        return {
            i: [p for p in s if (start is None or p[0] >= start) and (end is None or p[0] <= end)]
            for i, s in series.items()
        }

    def __enter__(self) -> TemperatureMonitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class ThermalCheck:
    """Whether a measured window is representative: no slowdown, and the temperature had settled.

    Attributes:
        throttled_s: Time some GPU spent in a thermal or hardware slowdown inside the window, s.
        drift_c: The largest temperature change of a GPU up to the window's end, °C.
        samples: Temperature samples taken inside the window, over all GPUs.
        throttled: Whether the slowdown share exceeded what was allowed.
        settling: Whether the temperature was still moving by more than allowed.

    ``bool(check)`` is ``check.ok``.

    Example:
        >>> from zeus_core.monitor import ThermalCheck
        >>> check = ThermalCheck(throttled_s=0.0, drift_c=5.2, samples=40, throttled=False, settling=True)
        >>> bool(check), check.reason
        (False, 'temperature still changing (+5.2 °C across the window)')
    """

    throttled_s: float
    drift_c: float
    samples: int
    throttled: bool
    settling: bool

    @property
    def ok(self) -> bool:
        """The window can be used: neither throttled nor taken while the temperature was settling."""
        return not (self.throttled or self.settling)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def reason(self) -> str:
        """Why the window is not usable (``""`` when it is)."""
        parts = []
        if self.throttled:
            parts.append(f"slowed down by heat or the hardware for {self.throttled_s:.2f} s")
        if self.settling:
            parts.append(f"temperature still changing ({self.drift_c:+.1f} °C across the window)")
        return "; ".join(parts)


def check_window(
    monitor: TemperatureMonitor,
    start: float,
    end: float,
    *,
    max_drift_c: float = 3.0,
    lookback_s: float = 60.0,
    max_slowdown_share: float = 0.0,
) -> ThermalCheck:
    """Was the window ``[start, end]`` throttled, or taken before the GPUs' temperature had settled?

    A window is throttled when some GPU spent more than ``max_slowdown_share`` of it in a thermal
    or hardware slowdown (a power cap, what a power limit does, does not count); it is settling
    when some GPU's temperature changed by more than ``max_drift_c`` from ``lookback_s`` before its
    end (or its start, if earlier) to its end: a short window in the slow approach to a steady
    temperature moves little itself, so the look back spans about one thermal time constant.
    Without temperature samples the window is judged by slowdown alone.
    The power-limit optimizer can discard a window for which this is false and measure the
    limit again (after the GPU has settled at it).

    Args:
        monitor: A :class:`TemperatureMonitor` sampling the window's GPUs (on the same clock).
        start: Window start, s (the monitor's clock).
        end: Window end, s.
        max_drift_c: Largest temperature change still called settled, °C.
        lookback_s: How far before the window's end the temperature change is measured from, s.
        max_slowdown_share: Largest share of the window a GPU may spend slowed down, 0–1.

    Returns:
        The verdict; ``bool(verdict)`` says whether the window can be used.

    Raises:
        ZeusConfigError: ``end`` is before ``start``.

    Example:
        >>> check = check_window(temps, window_start, window_end)  # doctest: +SKIP
        >>> if not check:  # doctest: +SKIP
        ...     print("measure again:", check.reason)
    """
    if end < start:
        raise ZeusConfigError(f"check_window(start={start}, end={end}): end is before start.")
    monitor.sample_now()  # the latest state counts for a window that just ended
    slowed = monitor.slowdown_seconds(start, end)
    throttled_s = max(slowed.values(), default=0.0)
    span = max(end - start, 1e-9)
    drift = 0.0
    count = 0
    for samples in monitor.get_temperature_timeline().values():
        if not samples:
            continue
        first = min(samples, key=lambda p: abs(p[0] - min(start, end - lookback_s)))
        last = min(samples, key=lambda p: abs(p[0] - end))
        count += sum(1 for t, _ in samples if start <= t <= end)
        if abs(last[1] - first[1]) > abs(drift):
            drift = last[1] - first[1]
    return ThermalCheck(
        throttled_s=throttled_s,
        drift_c=drift,
        samples=count,
        throttled=throttled_s > max_slowdown_share * span,
        settling=abs(drift) > max_drift_c,
    )
