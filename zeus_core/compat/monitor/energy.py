"""Zeus's ``zeus.monitor.energy``: :class:`ZeusMonitor` and :class:`Measurement` with Zeus's meanings.

The suite's :class:`zeus_core.ZeusMonitor` measures every device it is given, and its
``Measurement.total_energy`` sums GPUs, CPU packages and DRAM. Zeus's sums GPUs only, reports
``cpu_energy``/``dram_energy`` as ``None`` when they were not measured and has ``soc_energy``;
its log file has GPU columns only and gets each window's row when the window ends. This module
gives exactly that, on the suite's monitor (the same windows, background reader and devices).

Example:
    >>> from zeus_core.compat.monitor import ZeusMonitor
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> clock = VirtualClock()
    >>> monitor = ZeusMonitor(gpus=[simulated_gpu("a40", clock=clock, busy=True)])
    >>> monitor.begin_window("epoch"); clock.advance(2.0)
    >>> m = monitor.end_window("epoch")
    >>> m.total_energy, m.cpu_energy, m.soc_energy  # GPU only; no CPU measured; no SoC
    (600.0, None, None)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from zeus_core.exceptions import ZeusPermissionError
from zeus_core.monitor import _energy, _measurement
from zeus_core.monitor._window_log import WindowLog

__all__ = ["ZeusMonitor", "Measurement"]


@dataclass(frozen=True)
class Measurement(_measurement.Measurement):
    """Time and energy of one window, with Zeus's field meanings.

    Attributes:
        time: Duration of the window, s.
        gpu_energy: Energy per GPU, J, keyed by GPU index (``cuda:<i>``).
        cpu_energy: Energy per CPU package, J, or ``None`` where no CPU was measured.
        dram_energy: Energy of each package's DRAM, J, or ``None`` where no DRAM was measured.
        soc_energy: The SoC's energies (Apple silicon, Jetson), or ``None`` without an SoC.

    Example:
        >>> from zeus_core.compat.monitor import Measurement
        >>> m = Measurement(time=2.0, gpu_energy={0: 500.0, 1: 520.0}, cpu_energy={0: 80.0})
        >>> m.total_energy, m.dram_energy  # GPU energy only, as in Zeus
        (1020.0, None)
    """

    cpu_energy: dict[int, float] | None = None  # type: ignore[assignment]
    dram_energy: dict[int, float] | None = None  # type: ignore[assignment]
    soc_energy: Any = None

    @property
    def total_energy(self) -> float:
        """Energy of the measured GPUs only, J (Zeus's definition; CPU and DRAM are apart)."""
        return sum(self.gpu_energy.values())

    @classmethod
    def of(cls, m: _measurement.Measurement, soc_energy: Any = None) -> Measurement:
        """Zeus's view of one of the suite's measurements (a GPU energy still being finalized stays lazy).

        Example:
            >>> from zeus_core import Measurement as SuiteMeasurement
            >>> from zeus_core.compat.monitor import Measurement
            >>> Measurement.of(SuiteMeasurement(1.0, {0: 300.0}, cpu_energy={0: 40.0})).total_energy
            300.0
        """
        out = object.__new__(cls)
        state = out.__dict__
        state.update(m.__dict__)
        state["cpu_energy"] = m.cpu_energy or None
        state["dram_energy"] = m.dram_energy or None
        state["soc_energy"] = soc_energy
        return out


class ZeusMonitor(_energy.ZeusMonitor):
    """Zeus's ``ZeusMonitor``: the same arguments, windows and results, on the suite's monitor.

    Windows return :class:`Measurement` (GPU-only ``total_energy``); ``log_file`` gets Zeus's columns
    (``start_time,window_name,elapsed_time,gpu<i>_energy...``), is started afresh, and each window's
    row is written when ``end_window`` returns. A CPU package that cannot be read while
    ``cpu_indices`` was given raises ``RuntimeError``, as in Zeus.

    Args:
        gpu_indices: GPUs to measure (``cuda:<i>``); ``None``: all.
        cpu_indices: CPU packages to measure; ``None``: all readable ones; ``[]``: none.
        approx_instant_energy: Estimate windows shorter than the energy counter's period.
        log_file: CSV file of one row per ended window (GPU energy, J).
        sync_execution_with: ``"torch"``, ``"jax"`` or ``"cupy"``: whose queued GPU work to wait for.
        **suite_options: The suite's keyword options (``gpus=``, ``cpus=``, ...; see
            :class:`zeus_core.ZeusMonitor`).

    Raises:
        RuntimeError: ``cpu_indices`` was given and RAPL cannot be read.

    Example:
        >>> from zeus_core.compat.monitor import ZeusMonitor
        >>> from zeus_core.testing import VirtualClock, simulated_gpu
        >>> clock = VirtualClock()
        >>> monitor = ZeusMonitor(gpus=[simulated_gpu("a40", clock=clock, busy=True)])
        >>> monitor.begin_window("step"); clock.advance(1.0)
        >>> monitor.begin_window("step", restart=True)  # a notebook cell run again
        >>> clock.advance(1.0); monitor.end_window("step").gpu_energy
        {0: 300.0}
    """

    def __init__(
        self,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        sync_execution_with: str = "torch",
        **suite_options: Any,
    ) -> None:
        try:
            super().__init__(
                gpu_indices, cpu_indices, approx_instant_energy, None, sync_execution_with, **suite_options
            )
        except ZeusPermissionError as e:
            raise RuntimeError(f"{e} Or disable CPU measurement with cpu_indices=[].") from e
        self._args["log_file"] = log_file  # a pickled monitor is re-created with it
        self.sync_with = sync_execution_with
        self._zeus_log: WindowLog | None = None
        if log_file is not None:
            Path(log_file).unlink(missing_ok=True)  # Zeus starts the file afresh
            self._zeus_log = WindowLog(Path(log_file), self.gpu_indices, [], [])
            self._zeus_log.open()

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """End window ``key``; its row is in the log file when this returns (unless ``cancel``).

        Raises:
            ValueError: No window ``key`` is open (a ``ZeusWindowError``).
        """
        start = self._windows.get(key)
        m = Measurement.of(super().end_window(key, sync_execution, cancel))
        if self._zeus_log is not None and start is not None and not cancel:
            self._zeus_log.add(key, start[0], m)
            self._zeus_log.flush(wait=True)
        return m

    def read_window(self, name: str, sync_execution: bool = False) -> Measurement:
        """Time and energy of the open window ``name`` so far (Zeus's shape)."""
        return Measurement.of(super().read_window(name, sync_execution))

    def close(self) -> None:
        """Stop background sampling and close the log file."""
        if self._zeus_log is not None:
            self._zeus_log.close()
        super().close()
