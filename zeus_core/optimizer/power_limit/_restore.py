"""One restore path for GPU settings, run on every way a process can leave training.

:class:`RestoreGuard` calls a restore function from ``atexit`` and from SIGTERM/SIGINT
handlers, besides the explicit calls its owner makes (``on_train_end``, exceptions,
``close()``). After restoring, a signal is passed on to the handler that was installed before
(so SIGINT still raises ``KeyboardInterrupt`` and SIGTERM still ends the process with the
usual status). Handlers can only be installed from the main thread; elsewhere only ``atexit``
is used, and a debug line says so.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from types import FrameType
from typing import Any, Callable

__all__ = ["RestoreGuard"]

logger = logging.getLogger(__name__)

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RestoreGuard:
    """Runs ``restore`` at interpreter exit and on SIGTERM/SIGINT while armed.

    Args:
        restore: Idempotent function that undoes the owner's changes; it should call
            :meth:`disarm` (directly or not) so that it runs once.
        what: Text for log lines, e.g. ``"GPU power limits"``.
    """

    def __init__(self, restore: Callable[[], None], what: str) -> None:
        self._restore = restore
        self._what = what
        self._previous: dict[int, Any] = {}
        self._armed = False

    @property
    def armed(self) -> bool:
        """Whether the exit and signal hooks are installed."""
        return self._armed

    def arm(self) -> None:
        """Install the ``atexit`` hook and, from the main thread, the signal handlers."""
        if self._armed:
            return
        self._armed = True
        atexit.register(self._at_exit)
        if threading.current_thread() is not threading.main_thread():
            logger.debug("Not in the main thread: %s are restored at exit, not on signals.", self._what)
            return
        for sig in _SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError) as e:  # e.g. embedded interpreters
                logger.debug("Cannot handle signal %s (%s); %s restored at exit only.", sig, e, self._what)

    def disarm(self) -> None:
        """Remove the hooks; a previous signal handler is put back if ours is still installed."""
        if not self._armed:
            return
        self._armed = False
        atexit.unregister(self._at_exit)
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            try:
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            except (ValueError, OSError):  # not the main thread any more
                logger.debug("Could not put back the handler of signal %s.", sig)

    def _at_exit(self) -> None:
        logger.warning("Interpreter exit before the end of training: restoring %s.", self._what)
        self._restore()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        logger.warning("Received %s: restoring %s.", signal.Signals(signum).name, self._what)
        try:
            self._restore()
        finally:
            self.disarm()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL or previous is None:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
