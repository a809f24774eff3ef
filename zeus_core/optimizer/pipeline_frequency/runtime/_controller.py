"""FrequencyController: lock a GPU's SM clock per instruction without stalling the training thread.

A worker thread applies only the latest request; the clocks found at start are restored on every
exit path (docs/optimizers/perseus.md, "The frequency controller").
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from dataclasses import dataclass
from typing import Deque

from zeus_core.device._base import GPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError
from zeus_core.settings import Setting, SettingsGuard

__all__ = ["ControlMode", "FrequencyRequest", "FrequencyChange", "FrequencyController"]

logger = logging.getLogger(__name__)

_JOIN_TIMEOUT_S = 0.5  # the worker stops at once: no clock is set after a stop began


class ControlMode(str, enum.Enum):
    """What the controller does with a request.

    Attributes:
        CONTROL: Lock the GPU's SM clock (needs admin rights on real GPUs).
        MEASURE: Only record the request; the GPU is never touched.

    Example:
        >>> ControlMode.parse("measure")
        <ControlMode.MEASURE: 'measure'>
    """

    CONTROL = "control"
    MEASURE = "measure"

    @classmethod
    def parse(cls, value: "str | ControlMode") -> "ControlMode":
        """Accept ``"control"``/``"measure"`` or a :class:`ControlMode`.

        Raises:
            ZeusConfigError: ``value`` is neither.
        """
        try:
            return cls(value)
        except ValueError:
            raise ZeusConfigError(f"Unknown control mode {value!r}; use 'control' or 'measure'.") from None


@dataclass(frozen=True)
class FrequencyRequest:
    """A clock asked for by the training thread.

    Attributes:
        time_s: Wall-clock time of the request, s.
        frequency_mhz: Requested SM clock, MHz.
        tag: What the clock is for (e.g. ``"stage1:B3"``), for traces.

    Example:
        >>> FrequencyRequest(time_s=0.0, frequency_mhz=1410, tag="stage0:F0").frequency_mhz
        1410
    """

    time_s: float
    frequency_mhz: int
    tag: str = ""


@dataclass(frozen=True)
class FrequencyChange:
    """A clock actually set on the GPU by the worker thread.

    Attributes:
        time_s: Wall-clock time the change completed, s.
        frequency_mhz: The locked SM clock, MHz; ``None`` for the final restore of the clocks found at start.
        latency_s: Time from the request to the completed change, s.

    Example:
        >>> FrequencyChange(time_s=1.0, frequency_mhz=None, latency_s=0.002).frequency_mhz is None  # restored
        True
    """

    time_s: float
    frequency_mhz: int | None
    latency_s: float


class FrequencyController:
    """Sets a GPU's locked SM clock from a worker thread, coalescing requests to the latest one.

    Args:
        gpu: The GPU this process computes on.
        mode: ``"control"`` locks clocks; ``"measure"`` only records requests.
        history: How many requests and changes to keep for inspection (oldest dropped).

    Raises:
        ZeusConfigError: ``mode`` is unknown or ``history`` is not positive.

    Attributes:
        requests: Recent :class:`FrequencyRequest` s, oldest first.
        changes: Recent :class:`FrequencyChange` s, oldest first (empty in measure mode).

    Example:
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
        >>> with FrequencyController(gpu) as ctl:
        ...     ctl.request(1200)
        ...     ctl.request(900)            # coalesces with 1200 if the worker has not run yet
        ...     applied = ctl.wait()
        ...     gpu.locked_sm_frequency
        900
        >>> gpu.locked_sm_frequency is None  # restored on close
        True
        >>> dry = FrequencyController(gpu, mode="measure")
        >>> dry.start(); dry.request(1410, tag="stage0:F0"); dry.close()
        >>> [(r.frequency_mhz, r.tag) for r in dry.requests], list(dry.changes)
        ([(1410, 'stage0:F0')], [])
    """

    def __init__(
        self, gpu: GPU, mode: ControlMode | str = ControlMode.CONTROL, *, history: int = 10_000
    ) -> None:
        if history < 1:
            raise ZeusConfigError(f"FrequencyController(history={history}): keep at least 1 record.")
        self.gpu = gpu
        self.mode = ControlMode.parse(mode)
        self.requests: Deque[FrequencyRequest] = collections.deque(maxlen=history)
        self.changes: Deque[FrequencyChange] = collections.deque(maxlen=history)
        self._cond = threading.Condition()
        self._pending: tuple[int, float] | None = None
        self._in_flight = False
        self._stopping = False
        self._applied: int | None = None
        self._latest: int | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._started = False
        self._restored = False
        self._closing = False  # set by _stop_worker: the worker sets no clock any more
        self._write_lock = threading.Lock()  # held by the worker while it sets a clock
        self._settings = SettingsGuard(
            [gpu],
            {Setting.SM_CLOCKS},
            what=f"the locked SM clock of GPU {gpu.index}",
            before_restore=self._stop_worker,
        )

    # -- lifetime -------------------------------------------------------------------------------
    def start(self) -> None:
        """Check permissions, arm the restore hooks and start the worker thread (idempotent).

        Raises:
            ZeusPermissionError: In control mode, the process may not lock clocks.
        """
        if self._started:
            return
        if self.mode is ControlMode.CONTROL:
            self.gpu.check_control_permission()
            self._settings.record()
            self._closing = False
            self._thread = threading.Thread(
                target=self._work, name=f"zeus-frequency-gpu{self.gpu.index}", daemon=True
            )
            self._thread.start()
        self._started = True
        self._restored = False
        logger.debug("FrequencyController started on %s (%s mode).", self.gpu.describe(), self.mode.value)

    def close(self) -> None:
        """Stop the worker and restore the driver's clock control (idempotent).

        Raises:
            ZeusDeviceError: The worker failed earlier and its error was not reported yet.
        """
        self._restore()
        self._raise_worker_error()

    def __enter__(self) -> "FrequencyController":
        self.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # the training error matters more than a failed restore, which is logged
            self._restore()
        except Exception:
            logger.exception("Restoring the SM clock of GPU %d failed.", self.gpu.index)

    @property
    def active(self) -> bool:
        """Whether the controller is started and not yet restored (also not by a signal or at exit)."""
        restored = self._restored or (self.mode is ControlMode.CONTROL and not self._settings.armed)
        return self._started and not restored

    # -- requests -------------------------------------------------------------------------------
    def request(self, frequency_mhz: int, tag: str = "") -> None:
        """Ask for an SM clock, MHz; returns at once (the worker applies it).

        A request equal to the latest one is recorded but not queued again.

        Raises:
            ZeusConfigError: The controller is not started (or already closed).
            ZeusDeviceError: The worker failed to set an earlier clock (chained to the cause).
        """
        if not self.active:
            raise ZeusConfigError(
                f"FrequencyController.request({frequency_mhz}): the controller is not running; call "
                "start() first (and do not use it after close())."
            )
        now = time.time()
        self.requests.append(FrequencyRequest(now, int(frequency_mhz), tag))
        if self.mode is ControlMode.MEASURE:
            self._latest = int(frequency_mhz)
            return
        if self._error is not None:
            self._raise_worker_error()
        if frequency_mhz == self._latest:
            return
        with self._cond:
            self._latest = int(frequency_mhz)
            self._pending = (self._latest, now)
            self._cond.notify_all()

    def wait(self, timeout_s: float = 10.0) -> bool:
        """Block until the latest request is applied (or nothing is pending). For profiling.

        Args:
            timeout_s: Longest wait, s.

        Returns:
            Whether the GPU now runs at the latest requested clock (always ``True`` in measure mode).

        Raises:
            ZeusDeviceError: The worker failed to set the clock.
        """
        if self.mode is ControlMode.MEASURE:
            return True
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (self._pending is not None or self._in_flight) and self._error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        self._raise_worker_error()
        return self._applied == self._latest

    @property
    def latest_request_mhz(self) -> int | None:
        """The clock most recently requested, MHz."""
        return self._latest

    @property
    def applied_mhz(self) -> int | None:
        """The clock the worker last set on the GPU, MHz (``None``: not locked by this controller)."""
        return self._applied

    # -- worker ---------------------------------------------------------------------------------
    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while self._pending is None and not self._stopping:
                    cond.wait()
                if self._pending is None:  # stopping, nothing left
                    return
                target, asked_at = self._pending
                self._pending = None
                self._in_flight = True
            try:
                with self._write_lock:
                    if self._closing:  # a restore began: set nothing more
                        return
                    if target != self._applied:
                        self._settings.lock_sm_clocks(self.gpu, target)  # through the one settings seam
                        self._applied = target
                        done = time.time()
                        self.changes.append(FrequencyChange(done, target, done - asked_at))
            except Exception as exc:  # reported to the training thread on its next call
                logger.error(
                    "Setting the SM clock of GPU %d to %d MHz failed: %s", self.gpu.index, target, exc
                )
                self._error = exc
            finally:
                with cond:
                    self._in_flight = False
                    cond.notify_all()

    def _raise_worker_error(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise ZeusDeviceError(
                f"FrequencyController on GPU {self.gpu.index}: setting the locked SM clock failed ({err}). "
                "Check the GPU's supported clocks and the process's permissions."
            ) from err

    # -- the one restore path ------------------------------------------------------------------
    def _restore(self) -> None:
        if not self._started or self._restored:
            return
        self._restored = True
        try:
            if self.mode is ControlMode.CONTROL and self._settings.restore():  # stops the worker first
                self.changes.append(FrequencyChange(time.time(), None, 0.0))
                logger.info("Restored the SM clocks found at start on %s.", self.gpu.describe())
        finally:
            self._stop_worker()  # already stopped by the restore, unless it found nothing armed
            self._applied = None
            self._latest = None
            self._started = False
            with self._cond:
                self._stopping = False

    def _stop_worker(self) -> None:
        """Stop the clock worker: once this returns, it sets no clock (a change in flight finished).

        Runs before every restore, also from a signal handler that interrupted the training thread
        while it held ``_cond``: the wait for the worker to exit is therefore bounded (it sets
        nothing more either way).
        """
        self._closing = True
        with self._write_lock:  # the change in flight, if any, completes before the restore
            pass
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            self._stopping = True
            self._pending = None
            self._cond.notify_all()
        if thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT_S)
            if thread.is_alive():
                logger.debug("The clock worker of GPU %d exits later; it sets no clock.", self.gpu.index)
        self._thread = None
