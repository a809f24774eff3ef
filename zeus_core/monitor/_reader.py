"""The background device reader: one thread per process samples every GPU a monitor measures.

Monitors only take timestamps; this thread reads each GPU's energy counter and instant power and
turns any timestamp into the energy the counter would have shown then: exact counter deltas over
whole refresh periods, apportioned by power at a window's edges. docs/measuring.md explains it.
"""

from __future__ import annotations

import atexit
import bisect
import logging
import os
import threading
import time
import weakref
from collections import deque
from typing import Iterable, Sequence

from zeus_core.device._base import GPU, wall_clock
from zeus_core.exceptions import ZeusDeviceError, ZeusError

__all__ = ["BackgroundReader", "GpuTrack", "Stamp", "PendingGpuEnergy", "shared_reader", "generation"]

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.002
"""Default pause between two sampling rounds, s (instant power is sampled about this often)."""

_KEEP_TICKS = 64  # counter ticks kept per GPU (a few seconds at 100 ms)
_KEEP_SAMPLES = 8192  # power samples kept per GPU before trimming
_STALE_PERIODS = 3.0  # a counter unchanged this many periods after t: no energy since its last tick
_DEFAULT_PERIOD_S = 0.5  # assumed counter period until two ticks have been seen
_FIT_TICKS = 16  # ticks in the least-squares fit of the counter's refresh lattice


class Stamp:
    """A timestamp (a window's begin or end) whose counter value ``V(t)`` each GPU's track fills in.

    One stamp serves every GPU of a window, so a window costs one object however many GPUs it has.

    Attributes:
        t: Wall-clock time, s.
        values: Per track, ``V(t)`` in J once resolved, or the error that made it unknowable.
    """

    __slots__ = ("t", "values")

    def __init__(self, t: float) -> None:
        self.t = t
        self.values: dict[GpuTrack, float | ZeusError] = {}


def _integral(ts: Sequence[float], ws: Sequence[float], a: float, b: float) -> float:
    """Trapezoid integral of the samples ``(ts, ws)`` over ``[a, b]``, J (``ws`` in W).

    Power at the bounds is interpolated; beyond the samples the first/last value holds.
    """
    n = len(ts)
    if n == 0 or b <= a:
        return 0.0

    def at(x: float, i: int) -> float:  # i: first sample index with ts[i] > x
        if i <= 0:
            return ws[0]
        if i >= n:
            return ws[-1]
        t0, t1 = ts[i - 1], ts[i]
        return ws[i - 1] + (ws[i] - ws[i - 1]) * (x - t0) / (t1 - t0)

    i = bisect.bisect_right(ts, a)
    j = bisect.bisect_left(ts, b)
    x_prev, w_prev = a, at(a, i)
    total = 0.0
    for k in range(i, j):
        total += (w_prev + ws[k]) * 0.5 * (ts[k] - x_prev)
        x_prev, w_prev = ts[k], ws[k]
    return total + (w_prev + at(b, j)) * 0.5 * (b - x_prev)


def _least_squares(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """``(intercept, slope)`` of the least-squares line through ``points``; ``None`` if degenerate."""
    m = len(points)
    if m < 3:
        return None
    n_mean = sum(n for n, _ in points) / m
    t_mean = sum(t for _, t in points) / m
    var = sum((n - n_mean) ** 2 for n, _ in points)
    if var <= 0:
        return None
    slope = sum((n - n_mean) * (t - t_mean) for n, t in points) / var
    return (t_mean - slope * n_mean, slope) if slope > 0 else None


class GpuTrack:
    """What the reader knows about one GPU: counter ticks, power samples and pending stamps.

    Callers only append stamps to :attr:`incoming` (lock-free), and call :meth:`value` and
    :meth:`wait`; everything else runs on the reader's thread.

    Attributes:
        gpu: The device.
        has_counter: Whether the GPU has an energy counter.
        has_power: Whether it has an instant power reading.
        error: The failure that stopped its sampling, or ``None``.
        period_s: Estimated counter refresh period, s (``None`` until two ticks were seen).
    """

    def __init__(self, gpu: GPU) -> None:
        self.gpu = gpu
        self.has_counter = gpu.has_energy_counter
        self.has_power = self._probe_power(gpu)
        if not self.has_counter and not self.has_power:
            raise ZeusDeviceError(
                f"{gpu.describe()}: reports neither an energy counter nor power, so its energy "
                "cannot be measured. Leave it out (ZeusMonitor(gpu_indices=[...]))."
            )
        self.error: ZeusError | None = None
        self.period_s: float | None = None
        self.cond = threading.Condition()
        self.incoming: deque[Stamp] = deque()  # appended by callers, drained by the reader
        self._pending: list[Stamp] = []
        self._tick_t: list[float] = []  # estimated tick instants, s
        self._tick_c: list[float] = []  # the counter from each tick on, J
        self._tick_mid: list[float] = []  # raw estimate: midway between the two reads around it, s
        self._tick_lo: list[float] = []  # the tick certainly happened in (lo, hi), s
        self._tick_hi: list[float] = []
        self._pow_t: list[float] = []
        self._pow_w: list[float] = []
        self._cum_j: list[float] = []  # power-only GPUs: integral of power up to each sample
        # (start, end, value) of the last energy read:
        self._last_read: tuple[float, float, float] | None = None
        self._first_read: tuple[float, float] | None = None  # (start, value)
        self._read_latency_s = 0.0
        self.users = 0

    @staticmethod
    def _probe_power(gpu: GPU) -> bool:
        if not gpu.has_instant_power:
            return False
        try:
            gpu.get_power()
        except ZeusError:
            return False
        return True

    @property
    def estimated(self) -> bool:
        """Energy is integrated from sampled power (no counter)."""
        return not self.has_counter

    @property
    def interpolated(self) -> bool:
        """Window edges inside a counter period are apportioned linearly in time (no instant power)."""
        return self.has_counter and not self.has_power

    # -- caller side ------------------------------------------------------------------------------
    def outstanding(self) -> list[Stamp]:
        """Stamps asked for and not resolved yet (by any monitor)."""
        return [s for s in (*self.incoming, *self._pending) if self not in s.values]

    def wait(self, stamps: Iterable[Stamp], timeout_s: float) -> bool:
        """Wait until every stamp has this GPU's value (or error); ``False`` on timeout."""
        todo = [s for s in stamps if self not in s.values]
        if not todo:
            return True
        with self.cond:
            return self.cond.wait_for(lambda: all(self in s.values for s in todo), timeout_s)

    def value(self, stamp: Stamp) -> float | None:
        """``V(stamp.t)``, J, or ``None`` while unresolved.

        Raises:
            ZeusError: This GPU failed, so the value is unknowable.
        """
        v = stamp.values.get(self)
        if isinstance(v, ZeusError):
            raise v
        return v

    # -- reader side ------------------------------------------------------------------------------
    def sample(self) -> None:
        """One sampling round: the counter (when a tick is due) and instant power."""
        if self.error is not None:
            return
        now = wall_clock()
        try:
            if self.has_counter and self._energy_due(now):
                a = wall_clock()
                value = self.gpu.get_total_energy()
                self._on_energy(a, wall_clock(), value)
            if self.has_power:
                a = wall_clock()
                watts = self.gpu.get_power()
                self._on_power((a + wall_clock()) * 0.5, watts)
        except ZeusError as e:
            self.fail(e)

    def _energy_due(self, now: float) -> bool:
        """Read the counter only near its next expected tick (always until the period is known)."""
        if self.period_s is None or not self._tick_t:
            return True
        guard = 3.0 * self._read_latency_s + 0.2 * self.period_s
        return now >= self._tick_t[-1] + self.period_s - guard

    def _on_energy(self, a: float, b: float, value: float) -> None:
        self._read_latency_s = (
            b - a if not self._read_latency_s else 0.8 * self._read_latency_s + 0.2 * (b - a)
        )
        last = self._last_read
        self._last_read = (a, b, value)
        if last is None:
            self._first_read = (a, value)
            return
        if value == last[2]:
            return
        mid = (last[0] + last[1] + a + b) * 0.25  # between the instants the two reads sampled
        if self._tick_t and mid <= self._tick_t[-1]:
            return
        self._add_tick(mid, last[0], b, value)

    def _add_tick(self, mid: float, lo: float, hi: float, value: float) -> None:
        """Record a tick seen in ``(lo, hi)`` and re-fit the tick lattice."""
        self._tick_mid.append(mid)
        self._tick_lo.append(lo)
        self._tick_hi.append(hi)
        self._tick_t.append(mid)
        self._tick_c.append(value)
        self._fit_ticks()
        if len(self._tick_t) > 2 * _KEEP_TICKS:
            for series in (self._tick_mid, self._tick_lo, self._tick_hi, self._tick_t, self._tick_c):
                del series[:_KEEP_TICKS]

    def _fit_ticks(self) -> None:
        """Sharpen the newest tick instants: the counter refreshes periodically.

        One tick is only known to within two reads (~8 ms with 4 ms reads); a least-squares line
        through the last ticks' raw estimates (tick number -> time) is good to a fraction of that.
        Ticks are numbered by the median gap (a tick the reader missed still counts), only ticks
        seen between close reads enter the fit, and the line is used only where it passes through
        each of their intervals: a counter that is not periodic keeps its raw estimates. The fitted
        instant stays inside the interval its own reads prove.

        Only the newest tick moves: stamps up to each older tick were resolved against it already,
        and moving it would make a later stamp's value disagree with theirs (a window could then
        come out negative).
        """
        m = min(len(self._tick_mid), _FIT_TICKS)
        if m < 3:
            return
        mids, los, his = self._tick_mid[-m:], self._tick_lo[-m:], self._tick_hi[-m:]
        gaps = sorted(b - a for a, b in zip(mids, mids[1:]))
        self.period_s = period = gaps[len(gaps) // 2]
        ns = [0]
        for a, b in zip(mids, mids[1:]):
            ns.append(ns[-1] + max(1, round((b - a) / period)))
        widths = [h - lo for lo, h in zip(los, his)]
        narrow = 3.0 * sorted(widths)[len(widths) // 2]
        line = _least_squares([(n, t) for n, t, w in zip(ns, mids, widths) if w <= narrow])
        if line is None:
            return
        intercept, slope = line
        fitted = [intercept + slope * n for n in ns]
        if any(
            w <= narrow and not lo - 1e-3 <= f <= h + 1e-3 for f, lo, h, w in zip(fitted, los, his, widths)
        ):
            return  # not periodic enough: keep the raw estimates
        self.period_s = slope
        newest = len(self._tick_t) - 1
        t = min(max(fitted[-1], self._tick_lo[newest]), self._tick_hi[newest])
        if t > self._tick_t[newest - 1]:
            self._tick_t[newest] = t

    def _on_power(self, t: float, watts: float) -> None:
        if self._pow_t and t <= self._pow_t[-1]:
            return
        if not self.has_counter:
            prev = (
                self._cum_j[-1] + (self._pow_w[-1] + watts) * 0.5 * (t - self._pow_t[-1])
                if self._pow_t
                else 0.0
            )
            self._cum_j.append(prev)
        self._pow_t.append(t)
        self._pow_w.append(watts)
        if len(self._pow_t) > _KEEP_SAMPLES:
            self._trim_power()

    def _trim_power(self) -> None:
        keep_from = min((s.t for s in self._pending), default=self._pow_t[-1])
        if self.has_counter and len(self._tick_t) >= 3:
            keep_from = min(keep_from, self._tick_t[-3])
        cut = min(bisect.bisect_left(self._pow_t, keep_from) - 1, len(self._pow_t) // 2)
        if cut > 0:
            del self._pow_t[:cut], self._pow_w[:cut]
            if self._cum_j:
                del self._cum_j[:cut]

    def resolve(self) -> bool:
        """Resolve the pending stamps the samples now allow; ``True`` if any was."""
        incoming = self.incoming
        while incoming:
            self._pending.append(incoming.popleft())
        if not self._pending:
            return False
        if self.error is not None:
            self.release_all(self.error)
            return True
        resolved = False
        still = []
        for stamp in self._pending:
            v = self.value_at(stamp.t)
            if v is None:
                still.append(stamp)
            else:
                stamp.values[self] = v
                resolved = True
        self._pending = still
        return resolved

    def value_at(self, t: float) -> float | None:
        """``V(t)``, J, or ``None`` while the samples after ``t`` are not in yet."""
        if not self.has_counter:
            return self._power_value_at(t)
        ticks = self._tick_t
        k = bisect.bisect_right(ticks, t)
        if k == len(ticks):
            return self._value_after_last_tick(t)
        if k == 0:
            return self._value_before_first_tick(t)
        t_lo, t_hi = ticks[k - 1], ticks[k]
        c_lo, c_hi = self._tick_c[k - 1], self._tick_c[k]
        share = (t - t_lo) / (t_hi - t_lo)
        if self.has_power:
            whole = _integral(self._pow_t, self._pow_w, t_lo, t_hi)
            if whole > 0 and self._pow_t and self._pow_t[0] <= t_lo:
                share = _integral(self._pow_t, self._pow_w, t_lo, t) / whole
        return c_lo + (c_hi - c_lo) * share

    def _value_after_last_tick(self, t: float) -> float | None:
        """After the newest tick: known only once the counter has stayed put for several periods."""
        last = self._last_read
        if last is None or last[0] <= t:
            return None
        since = self._tick_t[-1] if self._tick_t else (self._first_read or last)[0]
        if last[0] - since > _STALE_PERIODS * (self.period_s or _DEFAULT_PERIOD_S):
            return last[2]  # the counter did not move: no energy (beyond its resolution) since
        return None

    def _value_before_first_tick(self, t: float) -> float | None:
        """Before the first tick seen (the reader just started): step back from it."""
        t0, c0 = self._tick_t[0], self._tick_c[0]
        if self.has_power and self._pow_t:
            return c0 - _integral(self._pow_t, self._pow_w, t, t0)
        if len(self._tick_t) >= 2:
            rate = (self._tick_c[1] - c0) / (self._tick_t[1] - t0)
            return c0 - rate * (t0 - t)
        return None

    def _power_value_at(self, t: float) -> float | None:
        ts = self._pow_t
        if not ts or ts[-1] < t:
            return None
        i = bisect.bisect_right(ts, t)
        if i == 0:
            return self._cum_j[0] - self._pow_w[0] * (ts[0] - t)
        return self._cum_j[i - 1] + _integral(ts, self._pow_w, ts[i - 1], t)

    def fail(self, error: ZeusError) -> None:
        """Stop sampling this GPU; every pending and future stamp gets ``error``."""
        self.error = ZeusDeviceError(
            f"GPU {self.gpu.index}: reading it failed, so the energy of windows open on it is "
            f"unknown ({error}). Windows on the other GPUs are unaffected."
        )
        logger.warning("%s", self.error)
        self.release_all(self.error)

    def release_all(self, error: ZeusError) -> None:
        """Give every pending stamp ``error`` for this GPU and wake the waiters."""
        while self.incoming:
            self._pending.append(self.incoming.popleft())
        for stamp in self._pending:
            stamp.values.setdefault(self, error)
        self._pending = []
        with self.cond:
            self.cond.notify_all()


class BackgroundReader:
    """The per-process daemon thread that samples every attached GPU.

    Use :func:`shared_reader`; monitors attach their GPUs with :meth:`attach` and release them
    with :meth:`detach`. The thread runs while at least one GPU is attached.

    Attributes:
        interval_s: Pause between sampling rounds, s (the smallest any attacher asked for).
    """

    def __init__(self) -> None:
        # Re-entrant: a monitor's garbage-collection finalizer (detach) may run inside attach.
        self._lock = threading.RLock()
        self._tracks: dict[int, GpuTrack] = {}
        self._intervals: list[float] = []
        self.interval_s = DEFAULT_INTERVAL_S
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._cpu_s = 0.0
        self._wall_s = 0.0
        self.rounds = 0

    def attach(self, gpu: GPU, interval_s: float = DEFAULT_INTERVAL_S) -> GpuTrack:
        """Start sampling ``gpu`` (shared with other monitors of the same GPU object)."""
        with self._lock:
            track = self._tracks.get(id(gpu))
            if track is None or track.gpu is not gpu:
                track = self._tracks[id(gpu)] = GpuTrack(gpu)
            track.users += 1
            self._intervals.append(interval_s)
            self.interval_s = min(self._intervals)
            if self._thread is None or not self._thread.is_alive():
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._run, name="zeus-device-reader", daemon=True)
                self._thread.start()
        return track

    def detach(self, track: GpuTrack, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        """Release one attachment of ``track``; the thread stops with the last one."""
        with self._lock:
            track.users -= 1
            if interval_s in self._intervals:
                self._intervals.remove(interval_s)
            self.interval_s = min(self._intervals, default=DEFAULT_INTERVAL_S)
            if track.users <= 0 and self._tracks.get(id(track.gpu)) is track:
                del self._tracks[id(track.gpu)]
            if not self._tracks:
                self.stop()

    def stop(self) -> None:
        """Stop the thread (it restarts on the next :meth:`attach`)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._thread = None

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def cpu_fraction(self) -> float:
        """CPU time the thread used per second of its run time (``0.01``: 1 % of one core)."""
        return self._cpu_s / self._wall_s if self._wall_s > 0 else 0.0

    def _run(self) -> None:
        stop = self._stop
        cpu0, wall0 = time.thread_time(), time.monotonic()
        while not stop.is_set():
            start = time.monotonic()
            for track in list(self._tracks.values()):
                try:
                    track.sample()
                    resolved = track.resolve()
                except Exception as e:  # noqa: BLE001 (the thread must outlive any one GPU's failure)
                    error = e if isinstance(e, ZeusError) else ZeusDeviceError(f"{type(e).__name__}: {e}")
                    track.fail(error)
                    continue
                if resolved:
                    with track.cond:
                        track.cond.notify_all()
            self.rounds += 1
            self._cpu_s, self._wall_s = time.thread_time() - cpu0, time.monotonic() - wall0
            stop.wait(max(self.interval_s - (time.monotonic() - start), 0.0))


class PendingGpuEnergy:
    """The GPU energy of one window, resolved on first access (see :class:`Measurement`).

    Args:
        monitor: What every window of one monitor shares: the GPU indices in the monitor's order,
            ``(gpu index, track)`` of the GPUs the reader samples, and the longest wait, s.
        known: Energy already known (read synchronously), J, by GPU index.
        begin / end: The window's stamps.
        window: The window's name (for error messages).
    """

    __slots__ = ("monitor", "known", "begin", "end", "window")

    def __init__(
        self,
        monitor: tuple[Sequence[int], Sequence[tuple[int, GpuTrack]], float],
        known: dict[int, float],
        begin: Stamp,
        end: Stamp,
        window: str,
    ) -> None:
        self.monitor, self.known, self.begin, self.end, self.window = monitor, known, begin, end, window

    def done(self) -> bool:
        """Whether every GPU's energy is final (resolving then does not wait)."""
        b, e = self.begin.values, self.end.values
        return all(track in b and track in e for _, track in self.monitor[1])

    def resolve(self) -> dict[int, float]:
        """Energy per GPU, J; waits (at most ``timeout_s``) for the reader to finalize it.

        Raises:
            ZeusDeviceError: A GPU failed during the window, or the reader stopped.
        """
        order, tracks, timeout_s = self.monitor
        out = dict(self.known)
        for index, track in tracks:
            track.wait((self.begin, self.end), timeout_s)
            try:
                v0, v1 = track.value(self.begin), track.value(self.end)
            except ZeusError as error:
                raise ZeusDeviceError(f"Window {self.window!r}: {error}") from error
            if v0 is None or v1 is None:
                raise ZeusDeviceError(
                    f"Window {self.window!r}: the energy of GPU {index} was not final {timeout_s:g} s "
                    "after the window ended: the monitor's background reader is not running (was the "
                    "monitor closed, or the process forked, with the window open?). Read measurements "
                    "before closing the monitor, and begin windows in the process that ends them."
                )
            out[index] = max(v1 - v0, 0.0)
        return {i: out[i] for i in order if i in out}


_reader: BackgroundReader | None = None
_reader_lock = threading.Lock()
generation = 0
"""Changes in a forked child: a monitor that sees it change attaches to the child's own reader."""
_old_readers: "weakref.WeakSet[BackgroundReader]" = weakref.WeakSet()


def shared_reader() -> BackgroundReader:
    """This process's reader (created on first use, and again in a forked child)."""
    global _reader
    reader = _reader
    if reader is None:
        with _reader_lock:
            if _reader is None:
                _reader = BackgroundReader()
                _old_readers.add(_reader)
            reader = _reader
    return reader


def _after_fork_in_child() -> None:
    """The parent's thread does not exist here: forget its reader; monitors re-attach."""
    global _reader, generation, _reader_lock
    _reader_lock = threading.Lock()
    generation += 1
    error = ZeusDeviceError(
        "the window began before this process was forked; its energy is only known in the parent. "
        "Begin windows in the process that ends them."
    )
    for reader in list(_old_readers):
        reader._thread = None
        for track in reader._tracks.values():
            track.cond = threading.Condition()
            track.release_all(error)
    _reader = None


def _stop_at_exit() -> None:
    reader = _reader
    if reader is not None:
        reader.stop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_stop_at_exit)
