"""The process at the other end of a Unix socket, and watching it end without polling or pid reuse.

:func:`peer_credentials` reads ``SO_PEERCRED`` (pid, uid, gid, fixed when the client connected).
:func:`peer_process` also takes a *pidfd* for that process: ``SO_PEERPIDFD`` (Linux 6.5+) hands
over the very process that connected; older kernels fall back to ``os.pidfd_open(pid)``. The pidfd
is then checked to be alive *after* the process's start time was read, so the pair ``(pid,
start time)`` names one process for the whole boot: a reused pid has another start time.

:class:`ProcessWatch` registers a pidfd with the event loop: it becomes readable when the process
ends, however it ends (exit, exception, SIGKILL, the OOM killer), and the callback runs then.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import struct
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "Credentials",
    "PeerProcess",
    "ProcessWatch",
    "peer_credentials",
    "peer_process",
    "process_starttime",
    "process_groups",
    "process_command",
    "pidfd_alive",
    "open_pidfd",
]

SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
"""``SO_PEERPIDFD`` (``asm-generic/socket.h``): a pidfd of the peer process, Linux 6.5+."""

_CRED = struct.Struct("3i")


@dataclass(frozen=True)
class Credentials:
    """``SO_PEERCRED``: the connecting process's pid, uid and gid."""

    pid: int
    uid: int
    gid: int


@dataclass(frozen=True)
class PeerProcess:
    """A live peer process: its credentials, start time, and an open pidfd (the caller owns it)."""

    creds: Credentials
    starttime: int
    pidfd: int

    @property
    def key(self) -> str:
        """Names the process for the whole boot: ``"pid:<pid>:<start time>"``."""
        return f"pid:{self.creds.pid}:{self.starttime}"


def peer_credentials(sock: Any) -> Credentials:
    """``SO_PEERCRED`` of a connected Unix socket."""
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return Credentials(pid, uid, gid)


def process_starttime(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
    return int(fields[19])


def process_groups(pid: int, gid: int) -> frozenset[int]:
    """Every group of process ``pid``: its primary ``gid`` and the supplementary groups it runs with."""
    groups = {gid}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    groups.update(int(g) for g in line.split()[1:])
                    break
    except OSError:
        pass
    return frozenset(groups)


def process_command(pid: int, limit: int = 80) -> str:
    """The command line of ``pid`` for messages (shortened to ``limit`` characters), or ``""``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pidfd_alive(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` is still running (a pidfd turns readable when it ends)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


def open_pidfd(pid: int) -> int | None:
    """``os.pidfd_open(pid)``, or None when the process is gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def _peer_pidfd(sock: Any, pid: int) -> int | None:
    try:
        return int(sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except OSError:  # an older kernel: the pid (the process may have been replaced, checked below)
        return open_pidfd(pid)


def peer_process(sock: Any) -> PeerProcess | None:
    """The process that connected ``sock``, with an open pidfd; None when it has already ended.

    The start time is read after the pidfd was taken and before it is checked alive, so it belongs to
    the pidfd's process.
    """
    creds = peer_credentials(sock)
    pidfd = _peer_pidfd(sock, creds.pid)
    if pidfd is None:
        return None
    starttime = process_starttime(creds.pid)
    if starttime is None or not pidfd_alive(pidfd):
        os.close(pidfd)
        return None
    return PeerProcess(creds, starttime, pidfd)


class ProcessWatch:
    """Calls ``on_exit()`` in the event loop when the process of ``pidfd`` ends; owns the pidfd.

    Args:
        loop: The running event loop.
        pidfd: An open pidfd (closed by :meth:`close`).
        on_exit: Called once, from the loop, when the process has ended.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, pidfd: int, on_exit: Callable[[], None]) -> None:
        self._loop = loop
        self.pidfd = pidfd
        self._on_exit = on_exit
        self._closed = False
        loop.add_reader(pidfd, self._fire)

    def _fire(self) -> None:
        if self._closed:
            return
        self._loop.remove_reader(self.pidfd)
        self._on_exit()

    def exited(self) -> bool:
        """Whether the process has ended (even if the loop has not yet called ``on_exit``)."""
        return not self._closed and not pidfd_alive(self.pidfd)

    def close(self) -> None:
        """Stop watching and close the pidfd (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self.pidfd)
        os.close(self.pidfd)
