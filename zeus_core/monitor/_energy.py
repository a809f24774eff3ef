"""ZeusMonitor: time and energy of any number of named, nested or overlapping windows."""

from __future__ import annotations

import logging
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from zeus_core.device._base import CPU, GPU, Clock, CpuEnergy, wall_clock
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusPermissionError,
    ZeusWindowError,
)
from zeus_core.monitor import _reader
from zeus_core.monitor._measurement import Measurement, new_measurement
from zeus_core.monitor._reader import (
    DEFAULT_INTERVAL_S,
    BackgroundReader,
    GpuTrack,
    PendingGpuEnergy,
    Stamp,
    shared_reader,
)
from zeus_core.monitor._sync import check_sync_framework, synchronizer
from zeus_core.monitor._window_log import WindowLog

if TYPE_CHECKING:
    from zeus_core.monitor._power import PowerMonitor

__all__ = ["ZeusMonitor", "WindowHandle"]

logger = logging.getLogger(__name__)

_NO_READINGS: tuple = ()
_FINALIZE_TIMEOUT_S = 10.0  # longest wait for the reader to finalize a window's energy


class _Unresolved:
    """Sentinel for "sync function not looked up yet" (a class, so it survives pickling by identity)."""


_Window = tuple[float, Sequence[float], Sequence[CpuEnergy], Stamp | None]


class WindowHandle:
    """An open window created by :meth:`ZeusMonitor.window`.

    Attributes:
        name: The window's name.
        measurement: The final :class:`Measurement`, set when the ``with`` block exits.

    Example:
        >>> from zeus_core import ZeusMonitor
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
        >>> with monitor.window("eval") as handle:
        ...     clock.advance(1.0)
        ...     so_far = handle.read().time
        >>> so_far, handle.measurement.gpu_energy
        (1.0, {0: 300.0})
    """

    def __init__(self, monitor: "ZeusMonitor", name: str) -> None:
        self._monitor = monitor
        self.name = name
        self.measurement: Measurement | None = None

    def read(self) -> Measurement:
        """Time and energy so far, without ending the window."""
        if self.measurement is not None:
            return self.measurement
        return self._monitor.read_window(self.name)


class ZeusMonitor:
    """Measures time and energy of named windows on GPUs, CPU packages and DRAM.

    Windows nest and overlap freely as long as their names differ; opening and closing one only
    takes a timestamp, and a background reader turns the GPUs' energy counters into each window's
    energy (final about 0.1 s after it ends). docs/measuring.md explains how. The arguments take
    Zeus's order, so code written for ``zeus.monitor.ZeusMonitor`` works with its import changed.

    Args:
        gpu_indices: GPUs to measure, as the user sees them (``cuda:<i>``). ``None``: all.
        cpu_indices: CPU packages to measure. ``None``: all readable ones (silently none where
            RAPL is missing or unreadable; a log line says why). ``[]``: none.
        approx_instant_energy: Zeus's option for windows shorter than the counter's update
            period, which otherwise read 0 J: estimate them as instant power x time (marked
            estimated). Only the synchronous path (``read_in_background=False``) needs it; the
            background reader apportions every window's edges already.
        log_file: CSV file that gets one row per ended window (written once the window is final).
        sync_execution_with: ``"torch"`` (wait for queued CUDA work on the measured GPUs before
            each timestamp, on the calling thread; a no-op without CUDA), ``"jax"``, ``"cupy"``
            (refused where CuPy is not installed), or ``None``.
        gpus: GPU objects to measure instead of this machine's (e.g. simulated GPUs).
        cpus: CPU objects to measure instead of this machine's.
        power_sample_interval_s: Pause between the background reader's sampling rounds, s
            (default 2 ms for real GPUs; 0.1 s for simulated GPUs without a counter).
        read_in_background: ``None`` (default): real GPUs on the wall clock go through the background
            reader (GPUs on a virtual clock are read at the edges: the reader samples in real time).
            ``False``: read every GPU at the window's edges on the calling thread, as Zeus does.

    Attributes:
        gpus: The measured GPU objects.
        cpus: The measured CPU packages.

    Raises:
        ZeusDeviceNotFoundError: A requested index does not exist.
        ZeusPermissionError: ``cpu_indices`` was given explicitly and RAPL is unreadable.
        ZeusConfigError: An argument is invalid (e.g. Zeus Suite's old positional order, or
            ``sync_execution_with="cupy"`` without CuPy).

    Example:
        >>> from zeus_core import ZeusMonitor, SimulatedGPU, PhysicalModel, VirtualClock
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
        >>> monitor.begin_window("epoch")
        >>> clock.advance(10.0)
        >>> m = monitor.end_window("epoch")
        >>> (m.time, round(m.gpu_energy[0]))
        (10.0, 3000)
    """

    def __init__(
        self,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        sync_execution_with: str | None = "torch",
        *,
        gpus: Sequence[GPU] | None = None,
        cpus: Sequence[CPU] | None = None,
        power_sample_interval_s: float | None = None,
        read_in_background: bool | None = None,
    ) -> None:
        _check_arguments(approx_instant_energy, sync_execution_with, power_sample_interval_s)
        self._args = {
            "gpu_indices": None if gpu_indices is None else list(gpu_indices),
            "cpu_indices": None if cpu_indices is None else list(cpu_indices),
            "approx_instant_energy": approx_instant_energy,
            "log_file": log_file,
            "sync_execution_with": sync_execution_with,
            "power_sample_interval_s": power_sample_interval_s,
            "read_in_background": read_in_background,
        }
        # Re-created after unpickling: only discovered or simulated devices can be (see __getstate__).
        self._gpus_given = gpus is not None
        self._cpus_given = cpus is not None
        self.gpus: list[GPU] = _select(
            _discover_gpus() if gpus is None else list(gpus), gpu_indices, "GPU", "gpu_indices"
        )
        self._owns_cpus = cpus is None  # discovered here, so closed here
        self.cpus: list[CPU] = self._init_cpus(cpus, cpu_indices)
        self.approx_instant_energy = approx_instant_energy
        self._sync_with = sync_execution_with
        self._sync: object = _Unresolved
        self._clock = _common_clock(self.gpus)
        self.simulated = any(g.simulated for g in self.gpus) or any(c.simulated for c in self.cpus)
        # The reader samples in real time; GPUs on another clock (a virtual one in replays and tests)
        # are read at the windows' edges unless the caller asks otherwise.
        background = read_in_background if read_in_background is not None else self._clock is time.time
        self._init_gpu_reads(background, power_sample_interval_s)
        self._cpu_idx = [c.index for c in self.cpus]
        self._dram_idx = [c.index for c in self.cpus if c.has_dram]
        self._cpu_read = tuple(c.get_energy for c in self.cpus)

        self._windows: dict[str, _Window] = {}
        self._log = (
            None
            if log_file is None
            else WindowLog(Path(log_file), [g.index for g in self.gpus], self._cpu_idx, self._dram_idx)
        )

    def _init_gpu_reads(self, background: bool, interval_s: float | None) -> None:
        """Split the GPUs: real ones to the background reader, the rest read at the window's edges."""
        self._background = [g for g in self.gpus if background and not g.simulated]
        direct = [g for g in self.gpus if not (background and not g.simulated)]
        counter = [g for g in direct if g.has_energy_counter]
        self._counter_idx = tuple(g.index for g in counter)
        self._counter_read = tuple(g.get_total_energy for g in counter)
        self._counter_gpus = tuple(counter)
        self._estimated = [g for g in direct if not g.has_energy_counter]
        self._power_monitor: PowerMonitor | None = None
        self._power_interval = interval_s or 0.1
        self._reader_interval = interval_s or DEFAULT_INTERVAL_S
        self._tracks: list[GpuTrack] = []
        self._appends: list[Callable[[Stamp], None]] = []
        self._order = tuple(g.index for g in self.gpus)
        self._generation = _reader.generation
        self._attach()

    # -- Zeus's attributes ------------------------------------------------------------------------
    @property
    def gpu_indices(self) -> list[int]:
        """Indices of the measured GPUs (``cuda:<i>``), as in Zeus."""
        return [g.index for g in self.gpus]

    @property
    def cpu_indices(self) -> list[int]:
        """Indices of the measured CPU packages, as in Zeus."""
        return [c.index for c in self.cpus]

    # -- set-up helpers -------------------------------------------------------------------------
    @staticmethod
    def _init_cpus(cpus: Sequence[CPU] | None, cpu_indices: Sequence[int] | None) -> list[CPU]:
        if cpu_indices is not None and len(cpu_indices) == 0:
            return []
        if cpus is None:
            from zeus_core.device._discovery import get_cpus

            try:
                cpus = get_cpus()
            except (ZeusPermissionError, ZeusDeviceError) as e:
                if cpu_indices is not None:
                    raise
                logger.warning("CPU/DRAM energy is not measured: %s", e)
                return []
        return _select(list(cpus), cpu_indices, "CPU", "cpu_indices")

    def _attach(self) -> None:
        """Attach the background-read GPUs to this process's reader (again after a fork)."""
        old = getattr(self, "_release", None)
        if old is not None:
            old.detach()  # forked: the old tracks belong to the parent's reader
        reader = shared_reader()
        self._tracks = [reader.attach(g, self._reader_interval) for g in self._background]
        self._appends = [track.incoming.append for track in self._tracks]
        self._finalizing = (
            self._order,
            [(track.gpu.index, track) for track in self._tracks],
            _FINALIZE_TIMEOUT_S,
        )
        # A monitor dropped without close() must not keep the reader polling its GPUs.
        self._release = weakref.finalize(
            self, _release_tracks, reader, list(self._tracks), self._reader_interval
        )
        self._estimated_idx = frozenset(
            [g.index for g in self._estimated] + [t.gpu.index for t in self._tracks if t.estimated]
        )
        self._interpolated_idx = frozenset(t.gpu.index for t in self._tracks if t.interpolated)
        self._generation = _reader.generation

    def _resolve_sync(self) -> Callable[[], None] | None:
        return synchronizer([g.index for g in self.gpus if not g.simulated], self._sync_with)

    def _sync_now(self) -> None:
        sync = self._sync
        if sync is _Unresolved:
            sync = self._sync = self._resolve_sync()
        if sync is not None:
            sync()  # type: ignore[operator]

    def _ensure_power_monitor(self) -> None:
        if self._estimated and self._power_monitor is None:
            from zeus_core.monitor._power import PowerMonitor

            self._power_monitor = PowerMonitor(gpus=self._estimated, interval_s=self._power_interval)
            self._power_monitor.start()

    # -- windows --------------------------------------------------------------------------------
    def begin_window(self, name: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Open a window named ``name``. Takes a timestamp; reads no GPU on this thread.

        Args:
            name: Unique among currently open windows.
            sync_execution: Wait for queued GPU work first, so it is not counted in this window.
            restart: If a window with this name is open, drop it and begin anew (e.g. a notebook
                cell re-run after it failed inside the window) instead of raising.

        Raises:
            ZeusWindowError: A window with this name is already open (and ``restart`` is false).
        """
        windows = self._windows  # hot path: keep it lean (see benchmarks/monitor_overhead.py)
        if name in windows and restart:
            del windows[name]
        elif name in windows:
            raise ZeusWindowError(
                f"begin_window({name!r}): a window with this name is already open. End it first, "
                "or use a different name."
            )
        if self._estimated:
            self._ensure_power_monitor()
        log = self._log
        if log is not None and not log.is_open:
            log.open()  # a bad log file fails here, before any measurement could be lost
        if self._generation != _reader.generation:
            self._attach()  # forked: this process needs its own reader thread
        if sync_execution:
            self._sync_now()
        counter_read, cpu_read, appends = self._counter_read, self._cpu_read, self._appends
        t = self._clock()
        stamp = None
        if appends:  # hand t to the reader of each background-read GPU (deque appends, no device call)
            stamp = Stamp(t)
            for append in appends:
                append(stamp)
        windows[name] = (
            t,
            [read() for read in counter_read] if counter_read else _NO_READINGS,
            [read() for read in cpu_read] if cpu_read else _NO_READINGS,
            stamp,
        )

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Close the window ``name`` and return its time and energy. Never waits for a device.

        The returned measurement's ``gpu_energy`` is final about one counter period after now;
        reading it earlier waits until then.

        Args:
            name: A window opened by :meth:`begin_window`.
            sync_execution: Wait for queued GPU work first, so it is counted in this window.
            cancel: Discard the window: returns an all-zero measurement and logs nothing.

        Raises:
            ZeusWindowError: No window with this name is open.
        """
        try:
            start = self._windows.pop(name)
        except KeyError:
            raise self._unknown(name, "end_window") from None
        if cancel:
            return Measurement(
                0.0,
                {g.index: 0.0 for g in self.gpus},
                dict.fromkeys(self._cpu_idx, 0.0),
                dict.fromkeys(self._dram_idx, 0.0),
                self._estimated_idx,
                self.simulated,
                self._interpolated_idx,
            )
        if sync_execution:
            self._sync_now()
        m = self._measure(name, start)
        if self._log is not None:
            self._log.add(name, start[0], m)
        return m

    def read_window(self, name: str, sync_execution: bool = False) -> Measurement:
        """Time and energy of the open window ``name`` so far, without ending it.

        Raises:
            ZeusWindowError: No window with this name is open.
        """
        try:
            start = self._windows[name]
        except KeyError:
            raise self._unknown(name, "read_window") from None
        if sync_execution:
            self._sync_now()
        return self._measure(name, start)

    @contextmanager
    def window(self, name: str, sync_execution: bool = True) -> Iterator[WindowHandle]:
        """Measure a ``with`` block; the result is on the handle's ``measurement`` afterwards.

        The window ends even when the block raises.

        Example:
            >>> with monitor.window("eval") as w:  # doctest: +SKIP
            ...     evaluate()
            >>> w.measurement.total_energy  # doctest: +SKIP
        """
        self.begin_window(name, sync_execution)
        handle = WindowHandle(self, name)
        try:
            yield handle
        finally:
            handle.measurement = self.end_window(name, sync_execution)

    def reset_windows(self) -> None:
        """Forget every open window (e.g. after an interrupted notebook cell)."""
        self._windows.clear()

    @property
    def clock(self) -> Clock:
        """The clock window times come from (wall-clock seconds, or the simulated GPUs' clock)."""
        return self._clock

    @property
    def open_windows(self) -> list[str]:
        """Names of the windows currently open."""
        return list(self._windows)

    def _unknown(self, name: str, call: str) -> ZeusWindowError:
        return ZeusWindowError(
            f"{call}({name!r}): no window with this name is open (open: {sorted(self._windows)}). "
            f"Call begin_window({name!r}) first."
        )

    def _measure(self, name: str, start: _Window) -> Measurement:
        t0, gpu_start, cpu_start, begin = start
        t1 = self._clock()
        estimated = self._estimated_idx
        if gpu_start:
            gpu_energy = {
                i: read() - s for i, read, s in zip(self._counter_idx, self._counter_read, gpu_start)
            }
            if self.approx_instant_energy:
                gpu_energy, estimated = self._approximate_zeros(gpu_energy, t1 - t0)
        else:
            gpu_energy = {}
        if self._estimated:
            pm = self._power_monitor
            assert pm is not None  # started in begin_window
            pm.sample_now()
            gpu_energy.update(pm.get_energy(t0, t1))
        cpu_energy: dict[int, float] = {}
        dram_energy: dict[int, float] = {}
        if cpu_start:
            for idx, read, s in zip(self._cpu_idx, self._cpu_read, cpu_start):
                now = read()
                cpu_energy[idx] = now.cpu_j - s.cpu_j
                if now.dram_j is not None and s.dram_j is not None:
                    dram_energy[idx] = now.dram_j - s.dram_j
        pending = None
        if begin is not None:
            end = Stamp(t1)
            for append in self._appends:
                append(end)
            pending = PendingGpuEnergy(self._finalizing, gpu_energy, begin, end, name)
        return new_measurement(
            t1 - t0,
            gpu_energy,
            cpu_energy,
            dram_energy,
            estimated,
            self.simulated,
            self._interpolated_idx,
            pending,
        )

    def _approximate_zeros(self, gpu_energy: dict[int, float], seconds: float) -> tuple[dict, frozenset]:
        """Zeus's ``approx_instant_energy``: a window that saw no counter tick gets power x time."""
        estimated = set(self._estimated_idx)
        for gpu in self._counter_gpus:
            if gpu_energy[gpu.index] == 0.0 and seconds > 0:
                gpu_energy[gpu.index] = gpu.get_power() * seconds
                estimated.add(gpu.index)
        return gpu_energy, frozenset(estimated)

    # -- lifetime ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Finalize logged windows, stop background sampling, close the log. Open windows are forgotten.

        Measurements returned before are still readable: they are finalized first.
        """
        if self._log is not None:
            self._log.close()  # waits for the logged windows to be final first
        self._detach()
        if self._power_monitor is not None:
            self._power_monitor.stop()
            self._power_monitor = None
        if self._owns_cpus:
            for cpu in self.cpus:
                close = getattr(cpu, "close", None)  # e.g. RAPL's wraparound poller
                if close is not None:
                    close()
        self._windows.clear()

    def _detach(self) -> None:
        """Release this monitor's GPUs from the reader, once their pending windows are final."""
        if not self._tracks:
            return
        if self._generation == _reader.generation:
            for track in self._tracks:
                track.wait(track.outstanding(), timeout_s=_FINALIZE_TIMEOUT_S)  # windows ended before close
            self._release()
        else:
            self._release.detach()  # forked: the tracks belong to the parent's reader
        self._tracks, self._appends = [], []

    def __enter__(self) -> "ZeusMonitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pickling (Lightning's ddp_spawn pickles callbacks and the monitor they hold) ------------
    def __getstate__(self) -> dict[str, object]:
        """What a child process needs to measure the same devices: the arguments, not the handles.

        Simulated devices travel with their model; real ones (discovered or passed in) are found
        again in the child by index, after its ``CUDA_VISIBLE_DEVICES``. Open windows stay behind
        (they are this process's).
        """
        args = dict(self._args)
        state: dict[str, object] = {"args": args}
        if self._gpus_given and all(g.simulated for g in self.gpus):
            state["gpus"] = self.gpus
        elif self._gpus_given:
            args["gpu_indices"] = self.gpu_indices
        if self._cpus_given and all(c.simulated for c in self.cpus):
            state["cpus"] = self.cpus
        elif self._cpus_given:
            args["cpu_indices"] = self.cpu_indices
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        args = dict(state["args"])  # type: ignore[call-overload]
        self.__init__(**args, gpus=state.get("gpus"), cpus=state.get("cpus"))  # type: ignore[misc]


def _release_tracks(reader: BackgroundReader, tracks: list[GpuTrack], interval_s: float) -> None:
    for track in tracks:
        reader.detach(track, interval_s)


def _discover_gpus() -> list[GPU]:
    from zeus_core.device._discovery import get_gpus

    return get_gpus()


def _check_arguments(approx: object, sync_with: object, interval_s: float | None) -> None:
    if isinstance(approx, str) or approx is None:
        raise ZeusConfigError(
            f"ZeusMonitor(..., {approx!r}): the third positional argument is approx_instant_energy "
            "(Zeus's order: gpu_indices, cpu_indices, approx_instant_energy, log_file, "
            f"sync_execution_with). Pass sync_execution_with={approx!r} by keyword."
        )
    check_sync_framework(sync_with)
    if interval_s is not None and not interval_s > 0:
        raise ZeusConfigError(
            f"ZeusMonitor(power_sample_interval_s={interval_s}): the sampling period must be > 0 s."
        )


def _select(devices: list, indices: Sequence[int] | None, kind: str, arg: str) -> list:
    if indices is None:
        return devices
    by_index = {d.index: d for d in devices}
    chosen = []
    for i in dict.fromkeys(indices):
        if i not in by_index:
            raise ZeusDeviceNotFoundError(
                f"ZeusMonitor({arg}={list(indices)}): there is no {kind} {i}; this process sees "
                f"{kind}s {sorted(by_index)}. Pick from those (indices follow CUDA_VISIBLE_DEVICES for GPUs)."
            )
        chosen.append(by_index[i])
    return chosen


def _common_clock(gpus: Sequence[GPU]) -> Clock:
    clocks = {id(g.clock): g.clock for g in gpus}
    if len(clocks) > 1:
        raise ZeusConfigError(
            "ZeusMonitor: the GPUs run on different clocks (e.g. simulated GPUs with separate "
            "VirtualClocks). Give them one shared clock."
        )
    return next(iter(clocks.values()), wall_clock)
