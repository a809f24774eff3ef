"""Process-wide exit hooks for :mod:`zeus_core.settings`: ``atexit``, signals, deferral, forks.

One set of hooks restores every armed restorer (a :class:`~zeus_core.settings.SettingsGuard`) at
exit and on every signal that would end the process (SIGINT, SIGTERM, and SIGHUP, SIGQUIT, SIGUSR1,
... where no handler of the program's is installed), newest first, then passes the signal on;
signals arriving during a restore wait until it is done. A forked child starts with nothing armed
and the signal handlers that were there before ours: the settings belong to the parent.
docs/gpu-settings.md describes the rules.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Iterator, Protocol

from zeus_core import console

__all__ = [
    "Restorer",
    "register",
    "unregister",
    "critical",
    "redeliver_signals",
    "in_critical_section",
    "SIGNALS",
    "ALWAYS_HANDLED",
    "handled_signals",
]

logger = logging.getLogger(__name__)


def _terminating_signals() -> tuple[int, ...]:
    names = (
        "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE",
        "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGXFSZ", "SIGIO", "SIGPWR", "SIGSTKFLT",
    )  # fmt: skip
    found = [int(getattr(signal, n)) for n in names if hasattr(signal, n)]
    if hasattr(signal, "SIGRTMIN") and hasattr(signal, "SIGRTMAX"):
        found += range(int(signal.SIGRTMIN), int(signal.SIGRTMAX) + 1)
    return tuple(dict.fromkeys(found))


SIGNALS: tuple[int, ...] = _terminating_signals()
"""Every signal whose default action ends the process and that Python code can handle.

Left out: the synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS), whose
Python handler could only run after the fault (faulthandler reports those), and SIGKILL/SIGSTOP,
which no process can handle.
"""

ALWAYS_HANDLED: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)
"""Handled whatever handler was there: the restore runs first, then that handler (Ctrl-C still
raises ``KeyboardInterrupt``, a program's SIGTERM handler still runs). Every other signal of
:data:`SIGNALS` is handled only while its handler is the default action: a program's own handler
(e.g. for Slurm's ``--signal=USR1@...``) is left alone, and an ignored signal stays ignored."""


def handled_signals() -> list[int]:
    """The signals the hooks handle right now (empty while nothing is armed)."""
    with _state.lock:
        return sorted(_state.previous) if _state.installed else []


class Restorer(Protocol):
    """What the hooks restore: an idempotent ``restore()`` and a text for messages."""

    what: str

    def restore(self) -> object:
        """Put back what was changed (idempotent; safe to call from any thread); the result is unused."""


class _State:
    """The hooks' process-wide state (one instance, :data:`_state`)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # reentrant: a signal handler may run inside a locked block
        self.armed: list[Restorer] = []
        self.previous: dict[int, Any] = {}  # handlers found when ours were installed
        self.installed = False
        self.atexit_registered = False
        self.depth = 0  # critical sections in progress, all threads together
        self.deferred: list[int] = []  # signals received during a critical section, in order
        self.merged: set[int] = set()  # signals already being handled (a restore they started)


_state = _State()


def _after_fork_in_child() -> None:
    """In a forked child: nothing is armed, and the handlers found before ours come back.

    The child's copies of the guards belong to the parent's settings (``multiprocessing`` workers,
    DataLoader workers, ``os.fork``): restoring them from the child would undo the parent's limit
    while the parent trains on. The locks are new, as another thread may have held them at the fork.
    """
    global _state
    old = _state
    _state = _State()
    _state.atexit_registered = old.atexit_registered  # the hook is inherited; it finds nothing armed
    if not old.installed:
        return
    try:
        for signum, handler in old.previous.items():
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    except (ValueError, OSError):  # pragma: no cover - a child forked from a thread without signals
        logger.debug("Could not put back the signal handlers in a forked child.")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def in_critical_section() -> bool:
    """Whether a restore is running somewhere in this process (signals are deferred meanwhile)."""
    return _state.depth > 0


@contextmanager
def critical(merged: int | None = None, redeliver: bool = True) -> Iterator[list[int]]:
    """A block during which handled signals are deferred; re-delivered when the last such block ends.

    Args:
        merged: A signal being handled by the caller; further signals of this kind merge into it.
        redeliver: Whether to re-deliver the deferred signals at the end; with ``False`` the caller
            does it with :func:`redeliver_signals` (after handling its own signal first).

    Yields:
        A list that holds, after the block, the deferred signals still to be re-delivered.
    """
    pending: list[int] = []
    with _state.lock:
        _state.depth += 1
        if merged is not None:
            _state.merged.add(merged)
    try:
        yield pending
    finally:
        with _state.lock:
            _state.depth -= 1
            if _state.depth == 0:
                pending += [s for s in dict.fromkeys(_state.deferred) if s not in _state.merged]
                _state.deferred.clear()
                _state.merged.clear()
        if redeliver:
            redeliver_signals(pending)


def redeliver_signals(signums: list[int]) -> None:
    """Send ``signums`` to this process again, in order: handled as they would have been without a restore."""
    for signum in signums:
        logger.debug("Re-delivering %s deferred during a restore.", signal.Signals(signum).name)
        os.kill(os.getpid(), signum)


def register(restorer: Restorer) -> None:
    """Arm ``restorer``: restored at exit and, where handlers can be installed, on signals."""
    with _state.lock:
        if restorer not in _state.armed:
            _state.armed.append(restorer)
        if not _state.atexit_registered:
            atexit.register(_at_exit)
            _state.atexit_registered = True
        if not _state.installed:
            _install(restorer)


def unregister(restorer: Restorer) -> None:
    """Disarm ``restorer``; the previous signal handlers come back once nothing is armed."""
    with _state.lock:
        if restorer in _state.armed:
            _state.armed.remove(restorer)
        if not _state.armed and _state.installed:
            _uninstall()


def _install(restorer: Restorer) -> None:
    if threading.current_thread() is not threading.main_thread():
        console.warn_once(
            "settings-off-main-thread",
            f"Not in the main thread: {restorer.what} will be restored on exit and exceptions, but not on "
            "SIGTERM (only the main thread can handle signals). Start training from the main thread, or "
            "arm one restorer there first.",
        )
        return
    previous: dict[int, Any] = {}
    try:
        for sig in SIGNALS:
            if sig in ALWAYS_HANDLED or signal.getsignal(sig) is signal.SIG_DFL:
                previous[sig] = signal.signal(sig, _on_signal)
    except (ValueError, OSError) as e:  # e.g. an embedded interpreter
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        logger.debug("Cannot handle signals (%s); %s restored at exit only.", e, restorer.what)
        return
    _state.previous = previous
    _state.installed = True


def _uninstall() -> None:
    try:
        for sig, handler in _state.previous.items():
            if signal.getsignal(sig) is _on_signal:  # someone else's handler stays
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    except ValueError:  # not the main thread: ours stays installed and just chains (see _on_signal)
        logger.debug("Signal handlers left installed: disarmed outside the main thread.")
        return
    _state.previous = {}
    _state.installed = False


def _restore_all() -> None:
    """Restore every armed restorer, the newest first (nested guards unwind as ``with`` blocks do)."""
    with _state.lock:
        restorers = list(reversed(_state.armed))
    for r in restorers:
        try:
            r.restore()
        except Exception as e:  # every restorer gets its turn; each logs its own failure
            logger.error("Restoring %s failed: %s", r.what, e)


def _at_exit() -> None:
    with _state.lock:
        whats = [r.what for r in _state.armed]
    if whats:
        console.warn(f"Interpreter exit before the end of training: restoring {', '.join(whats)}.")
        with critical():
            _restore_all()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.depth > 0:  # a restore is running (here or in another thread): finish it first
        _state.deferred.append(signum)
        return
    previous = _state.previous.get(signum, signal.SIG_DFL)
    with _state.lock:
        whats = [r.what for r in _state.armed]
    if whats:
        console.warn(f"Received {signal.Signals(signum).name}: restoring {', '.join(whats)}.")
    with critical(merged=signum, redeliver=False) as pending:
        _restore_all()
        with _state.lock:
            if not _state.armed and _state.installed:
                _uninstall()
    try:  # this signal first, as it came first; then those that came during the restore
        _chain(signum, previous, frame)
    finally:
        redeliver_signals(pending)


def _chain(signum: int, previous: Any, frame: FrameType | None) -> None:
    """Hand the signal to the handler that was installed before ours."""
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown, e.g. installed from C): the default action, e.g. terminate
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
