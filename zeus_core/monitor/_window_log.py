"""The CSV log of a :class:`~zeus_core.monitor.ZeusMonitor`: one row per ended window, once final.

Rows are written in the order the windows ended, each once its GPU energy is final (about one
counter period after the window ends), so a row never holds a provisional figure. An existing
file is appended to only if it has the same columns (the same devices). Rows still waiting when
the interpreter exits are written then (an ``atexit`` hook), so a script that never calls
``close()`` loses no row.
"""

from __future__ import annotations

import atexit
import csv
from pathlib import Path
from typing import Any, Sequence, TextIO

from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError
from zeus_core.monitor._measurement import Measurement

__all__ = ["WindowLog"]


class WindowLog:
    """Appends a row per ended window to a CSV file, in Zeus's columns.

    Args:
        path: The CSV file (created with its parent folder when missing).
        gpu_indices: The measured GPUs, in column order.
        cpu_indices: The measured CPU packages.
        dram_indices: The CPU packages whose DRAM is measured.
    """

    def __init__(
        self, path: Path, gpu_indices: Sequence[int], cpu_indices: Sequence[int], dram_indices: Sequence[int]
    ) -> None:
        self.path = path
        self._gpus, self._cpus, self._drams = list(gpu_indices), list(cpu_indices), list(dram_indices)
        self._file: TextIO | None = None
        self._writer: Any = None  # a csv writer
        self._queue: list[tuple[str, float, Measurement]] = []

    @property
    def is_open(self) -> bool:
        """Whether the file is open for appending."""
        return self._file is not None

    def header(self) -> list[str]:
        """The columns: start time, window name, elapsed time, then J per GPU, CPU package, DRAM."""
        return (
            ["start_time", "window_name", "elapsed_time"]
            + [f"gpu{i}_energy" for i in self._gpus]
            + [f"cpu{i}_energy" for i in self._cpus]
            + [f"dram{i}_energy" for i in self._drams]
        )

    def open(self) -> None:
        """Open the file for appending; an existing file must have the same columns.

        Raises:
            ZeusConfigError: The file has other columns (other devices).
        """
        header = self.header()
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open(newline="") as f:
                existing = next(csv.reader(f), [])
            if existing != header:
                raise ZeusConfigError(
                    f"ZeusMonitor log_file {str(self.path)!r} has columns {existing}, but this monitor "
                    f"writes {header}. Use a new file for a different set of devices."
                )
            self._file = self.path.open("a", newline="")
            self._writer = csv.writer(self._file)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", newline="")
            self._writer = csv.writer(self._file)
            self._writer.writerow(header)
            self._file.flush()
        atexit.register(self.close)  # rows of windows ended before exit are written even without close()

    def add(self, name: str, start_time: float, m: Measurement) -> None:
        """Queue an ended window; rows are written as far as they are final."""
        self._queue.append((name, start_time, m))
        self.flush(wait=False)

    def flush(self, wait: bool) -> None:
        """Write the queued rows, in order, as far as they are final (all of them if ``wait``)."""
        queue = self._queue
        done = 0
        for name, start_time, m in queue:
            if not wait and not m.finalized:
                break
            self._write(name, start_time, m)
            done += 1
        del queue[:done]

    def close(self) -> None:
        """Write every queued row (waiting for each to be final) and close the file."""
        for _, _, m in self._queue:
            _wait_quietly(m)
        self.flush(wait=True)
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None
        atexit.unregister(self.close)

    def _write(self, name: str, start_time: float, m: Measurement) -> None:
        if self._writer is None:
            self.open()
        row = [start_time, name, m.time]
        try:
            row += [m.gpu_energy[i] for i in self._gpus]
        except ZeusDeviceError:
            row += ["nan" for _ in self._gpus]  # the GPU failed: the row still says the window existed
        row += [(m.cpu_energy or {}).get(i, 0.0) for i in self._cpus]
        row += [(m.dram_energy or {}).get(i, 0.0) for i in self._drams]
        self._writer.writerow(row)
        if self._file is not None:
            self._file.flush()


def _wait_quietly(m: Measurement) -> None:
    """Finalize ``m``; a device failure stays on the measurement (the log row says nan)."""
    try:
        m.gpu_energy  # noqa: B018
    except ZeusDeviceError:
        pass
