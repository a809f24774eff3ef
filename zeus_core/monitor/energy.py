"""ZeusMonitor: time and energy of any number of named, nested or overlapping windows."""

from __future__ import annotations

import csv
import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from zeus_core.device.base import CPU, GPU, Clock, CpuEnergy, wall_clock
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusPermissionError,
    ZeusWindowError,
)
from zeus_core.monitor.measurement import Measurement

if TYPE_CHECKING:
    from zeus_core.monitor.power import PowerMonitor

__all__ = ["ZeusMonitor", "WindowHandle"]

logger = logging.getLogger(__name__)


class _Unresolved:
    """Sentinel; pickles as a reference to the module-level instance, so ``is`` holds after ddp_spawn."""

    def __reduce__(self) -> str:
        return "_UNRESOLVED"


_UNRESOLVED = _Unresolved()
_NO_READINGS: tuple = ()


def _measurement_factory() -> Callable[[float, dict, dict, dict, frozenset, bool], Measurement]:
    """A constructor of :class:`Measurement` for the hot path of :meth:`ZeusMonitor.end_window`.

    The frozen dataclass's ``__init__`` assigns each field through ``object.__setattr__``, which
    costs about 1 µs per window; filling the instance ``__dict__`` directly gives the identical
    object in a third of the time. Where ``Measurement`` ever gains slots or a
    ``__post_init__``, the regular constructor is used instead.
    """
    fields = ("time", "gpu_energy", "cpu_energy", "dram_energy", "estimated_gpus", "simulated")
    plain = (
        not hasattr(Measurement, "__slots__")
        and not hasattr(Measurement, "__post_init__")
        and tuple(Measurement.__dataclass_fields__) == fields  # type: ignore[attr-defined]
    )
    if not plain:
        return Measurement

    new = object.__new__

    def make(
        time_s: float, gpu: dict, cpu: dict, dram: dict, estimated: frozenset, simulated: bool
    ) -> Measurement:
        m = new(Measurement)
        d = m.__dict__
        d["time"] = time_s
        d["gpu_energy"] = gpu
        d["cpu_energy"] = cpu
        d["dram_energy"] = dram
        d["estimated_gpus"] = estimated
        d["simulated"] = simulated
        return m

    return make


_new_measurement = _measurement_factory()


class WindowHandle:
    """An open window created by :meth:`ZeusMonitor.window`.

    Attributes:
        name: The window's name.
        measurement: The final :class:`Measurement`, set when the ``with`` block exits.
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

    Any number of windows may be open at once; they nest and overlap freely as long as their
    names differ. GPUs with an energy counter (NVIDIA Volta and newer, AMD, simulated) are read
    directly; for GPUs without one, energy is integrated from power sampled in the background by
    a :class:`~zeus_core.monitor.power.PowerMonitor` and the measurement marks it as estimated.

    Args:
        gpu_indices: GPUs to measure, as the user sees them (``cuda:<i>``). ``None``: all.
        cpu_indices: CPU packages to measure. ``None``: all readable ones (silently none where
            RAPL is missing or unreadable; a log line says why). ``[]``: none.
        sync_execution_with: ``"torch"`` (wait for queued CUDA work on the measured GPUs before
            each reading; a no-op without CUDA), ``"jax"``, or ``None`` (never wait).
        log_file: CSV file that gets one row per ended window, flushed at once.
        gpus: GPU objects to measure instead of this machine's (e.g. simulated GPUs).
        cpus: CPU objects to measure instead of this machine's.
        power_sample_interval_s: Power sampling period for GPUs without an energy counter, s.

    Raises:
        ZeusDeviceNotFoundError: A requested index does not exist.
        ZeusPermissionError: ``cpu_indices`` was given explicitly and RAPL is unreadable.

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
        sync_execution_with: str | None = "torch",
        log_file: str | Path | None = None,
        *,
        gpus: Sequence[GPU] | None = None,
        cpus: Sequence[CPU] | None = None,
        power_sample_interval_s: float = 0.1,
    ) -> None:
        if sync_execution_with not in ("torch", "jax", None):
            raise ZeusConfigError(
                f"ZeusMonitor(sync_execution_with={sync_execution_with!r}): use 'torch', 'jax' or None."
            )
        if gpus is None:
            from zeus_core.device.discovery import get_gpus

            gpus = get_gpus()
        self.gpus: list[GPU] = _select(list(gpus), gpu_indices, "GPU", "gpu_indices")
        self._owns_cpus = cpus is None  # discovered here, so closed here
        self.cpus: list[CPU] = self._init_cpus(cpus, cpu_indices)
        self._sync_with = sync_execution_with
        self._sync: object = _UNRESOLVED
        self._clock = _common_clock(self.gpus)
        self.simulated = any(d.simulated for d in (*self.gpus, *self.cpus))

        counter = [g for g in self.gpus if g.has_energy_counter]
        self._counter_idx = tuple(g.index for g in counter)
        self._counter_read = tuple(g.get_total_energy for g in counter)
        self._estimated = [g for g in self.gpus if not g.has_energy_counter]
        self._estimated_idx = frozenset(g.index for g in self._estimated)
        self._power_monitor: PowerMonitor | None = None
        self._power_interval = power_sample_interval_s
        self._cpu_idx = [c.index for c in self.cpus]
        self._dram_idx = [c.index for c in self.cpus if c.has_dram]
        self._cpu_read = tuple(c.get_energy for c in self.cpus)

        self._windows: dict[str, tuple[float, Sequence[float], Sequence[CpuEnergy]]] = {}
        self._log_path = Path(log_file) if log_file is not None else None
        self._log = None
        self._log_writer = None

    # -- set-up helpers -------------------------------------------------------------------------
    @staticmethod
    def _init_cpus(cpus: Sequence[CPU] | None, cpu_indices: Sequence[int] | None) -> list[CPU]:
        if cpu_indices is not None and len(cpu_indices) == 0:
            return []
        if cpus is None:
            from zeus_core.device.discovery import get_cpus

            try:
                cpus = get_cpus()
            except (ZeusPermissionError, ZeusDeviceError) as e:
                if cpu_indices is not None:
                    raise
                logger.warning("CPU/DRAM energy is not measured: %s", e)
                return []
        return _select(list(cpus), cpu_indices, "CPU", "cpu_indices")

    def _resolve_sync(self) -> Callable[[], None] | None:
        real = [g.index for g in self.gpus if not g.simulated]
        if not real or self._sync_with is None:
            return None
        if self._sync_with == "torch":
            torch = sys.modules.get("torch")  # not imported: this process queued no CUDA work
            if torch is None or not torch.cuda.is_available():
                return None

            def sync_torch() -> None:
                for i in real:
                    torch.cuda.synchronize(i)

            return sync_torch
        jax = sys.modules.get("jax")
        if jax is None:
            return None

        def sync_jax() -> None:
            for d in jax.devices("gpu"):
                jax.device_put(0.0, device=d).block_until_ready()

        return sync_jax

    def _sync_now(self) -> None:
        sync = self._sync
        if sync is _UNRESOLVED:
            sync = self._sync = self._resolve_sync()
        if sync is not None:
            sync()  # type: ignore[operator]

    def _ensure_power_monitor(self) -> None:
        if self._estimated and self._power_monitor is None:
            from zeus_core.monitor.power import PowerMonitor

            self._power_monitor = PowerMonitor(gpus=self._estimated, interval_s=self._power_interval)
            self._power_monitor.start()

    # -- windows --------------------------------------------------------------------------------
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Open a window named ``name``.

        Args:
            name: Unique among currently open windows.
            sync_execution: Wait for queued GPU work first, so it is not counted in this window.

        Raises:
            ZeusWindowError: A window with this name is already open.
        """
        windows = self._windows  # hot path: keep it lean (see benchmarks/monitor_overhead.py)
        if name in windows:
            raise ZeusWindowError(
                f"begin_window({name!r}): a window with this name is already open. End it first, "
                "or use a different name."
            )
        if self._estimated:
            self._ensure_power_monitor()
        if self._log_writer is None and self._log_path is not None:
            self._open_log()  # a bad log file fails here, before any measurement could be lost
        if sync_execution:
            self._sync_now()
        cpu_read = self._cpu_read
        windows[name] = (
            self._clock(),
            [read() for read in self._counter_read],
            [read() for read in cpu_read] if cpu_read else _NO_READINGS,
        )

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Close the window ``name`` and return its time and energy.

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
            )
        if sync_execution:
            self._sync_now()
        m = self._measure(name, start)
        if self._log_path is not None:
            self._write_log(name, start[0], m)
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

    def _measure(self, name: str, start: tuple[float, Sequence[float], Sequence[CpuEnergy]]) -> Measurement:
        t0, gpu_start, cpu_start = start
        t1 = self._clock()
        gpu_energy = {i: read() - s for i, read, s in zip(self._counter_idx, self._counter_read, gpu_start)}
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
        return _new_measurement(
            t1 - t0, gpu_energy, cpu_energy, dram_energy, self._estimated_idx, self.simulated
        )

    # -- CSV log ----------------------------------------------------------------------------------
    def _log_header(self) -> list[str]:
        return (
            ["start_time", "window_name", "elapsed_time"]
            + [f"gpu{g.index}_energy" for g in self.gpus]
            + [f"cpu{i}_energy" for i in self._cpu_idx]
            + [f"dram{i}_energy" for i in self._dram_idx]
        )

    def _open_log(self) -> None:
        """Open the CSV log for appending; check an existing file's columns first."""
        header = self._log_header()
        path = self._log_path
        assert path is not None
        if path.exists() and path.stat().st_size > 0:
            with path.open(newline="") as f:
                existing = next(csv.reader(f), [])
            if existing != header:
                raise ZeusConfigError(
                    f"ZeusMonitor log_file {str(path)!r} has columns {existing}, but this monitor "
                    f"writes {header}. Use a new file for a different set of devices."
                )
            self._log = path.open("a", newline="")
            self._log_writer = csv.writer(self._log)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log = path.open("a", newline="")
            self._log_writer = csv.writer(self._log)
            self._log_writer.writerow(header)
            self._log.flush()

    def _write_log(self, name: str, start_time: float, m: Measurement) -> None:
        if self._log_writer is None:
            self._open_log()
        row = [start_time, name, m.time]
        row += [m.gpu_energy[g.index] for g in self.gpus]
        row += [m.cpu_energy.get(i, 0.0) for i in self._cpu_idx]
        row += [m.dram_energy.get(i, 0.0) for i in self._dram_idx]
        self._log_writer.writerow(row)
        assert self._log is not None
        self._log.flush()

    # -- lifetime ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop background sampling and close the log file. Open windows are forgotten."""
        if self._power_monitor is not None:
            self._power_monitor.stop()
            self._power_monitor = None
        if self._owns_cpus:
            for cpu in self.cpus:
                close = getattr(cpu, "close", None)  # e.g. RAPL's wraparound poller
                if close is not None:
                    close()
        if self._log is not None:
            self._log.close()
            self._log = None
            self._log_writer = None
        self._windows.clear()

    def __enter__(self) -> "ZeusMonitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
