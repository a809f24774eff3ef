"""How busy a simulated GPU is: the CPU time of the work it stands in for.

On a machine without a GPU, the user's "GPU work" runs on the CPU. A :class:`SimulatedGPU` that
follows an :class:`Activity` is busy over each interval for the share of it that this work used
the CPU: utilization = CPU seconds used / wall seconds elapsed, capped at 1 (several busy threads
still make one GPU busy). Its power then follows its model at the user's real step times, and
drops to idle power while the work sleeps or waits.

* :class:`ProcessActivity`: this process (``time.process_time``: all its threads).
* :class:`ChildProcessActivity`: a child process and the children it waited for (for
  ``zeus-suite measure --simulate -- CMD``): read from ``/proc/<pid>/stat`` while it runs (Linux),
  and from ``resource.getrusage(RUSAGE_CHILDREN)`` once it has been reaped. Without ``/proc``,
  its CPU time is known only at its end, so energy is right for the whole command but flat inside it.
"""

from __future__ import annotations

import os
import resource
import time
from abc import ABC, abstractmethod

__all__ = ["Activity", "ProcessActivity", "ChildProcessActivity"]


class Activity(ABC):
    """A source of CPU seconds used so far by the work a simulated GPU follows.

    Attributes:
        description: What is followed, for reports (e.g. ``"this process used the CPU"``).

    Example:
        >>> from zeus_core.device import Activity
        >>> class Fixed(Activity):
        ...     description = "a fixed amount of work"
        ...     def cpu_seconds(self):
        ...         return 1.5
        >>> Fixed().cpu_seconds()
        1.5
    """

    description: str

    @abstractmethod
    def cpu_seconds(self) -> float:
        """CPU time the followed work has used so far, s (never decreases)."""


class ProcessActivity(Activity):
    """This process's CPU time (every thread), from ``time.process_time``.

    Example:
        >>> from zeus_core.device import ProcessActivity
        >>> ProcessActivity().cpu_seconds() > 0
        True
    """

    description = "this process used the CPU"

    def cpu_seconds(self) -> float:
        """CPU time of this process so far, s."""
        return time.process_time()


def _rusage_children_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class ChildProcessActivity(Activity):
    """The CPU time of a child process (and the children it waited for).

    Create it before starting the child (it reads 0 s until :meth:`attach` names the child) or
    right after, and before the child is reaped: the CPU time of other children this process
    reaps in the meantime would be counted too.

    Args:
        pid: The child's process id, or ``None`` to :meth:`attach` it once started.

    Example:
        >>> import subprocess, sys
        >>> from zeus_core.device import ChildProcessActivity
        >>> activity = ChildProcessActivity()
        >>> child = subprocess.Popen([sys.executable, "-c", "sum(range(10**6))"])
        >>> activity.attach(child.pid); _ = child.wait()
        >>> activity.cpu_seconds() >= 0.0
        True
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid: int | None = None
        self.description = "the command (not started yet) used the CPU"
        self._stat = ""
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._reaped_base = _rusage_children_s()
        self._last = 0.0
        if pid is not None:
            self.attach(pid)

    def attach(self, pid: int) -> None:
        """Follow child process ``pid`` from now on."""
        self.pid = pid
        self.description = f"process {pid} (and its children) used the CPU"
        self._stat = f"/proc/{pid}/stat"

    def _from_proc(self) -> float | None:
        try:
            with open(self._stat) as f:
                text = f.read()
        except OSError:
            return None
        # Fields after the parenthesised command name (which may contain spaces):
        # state is field 3; utime, stime, cutime, cstime are fields 14-17.
        fields = text.rsplit(")", 1)[-1].split()
        if len(fields) < 15 or fields[0] == "Z":  # a zombie's counters are final in rusage soon
            return None
        return sum(int(v) for v in fields[11:15]) / self._ticks

    def cpu_seconds(self) -> float:
        """CPU time the child (and its waited-for children) used so far, s (0 before it is attached)."""
        if self.pid is None:
            return 0.0
        now = self._from_proc()
        if now is None:  # exited: once reaped, its total is in RUSAGE_CHILDREN
            now = _rusage_children_s() - self._reaped_base
        self._last = max(self._last, now)
        return self._last
