"""Record the GPU settings found at start and put exactly those back, on every way a process ends.

Everything that changes a GPU setting (the power-limit optimizer, Perseus's clock controller)
holds a :class:`SettingsGuard`, which restores what was there (not the defaults) when its owner
ends, at exit and on every signal that would end the process; a forked child never restores its
parent's settings, and a per-GPU record tells other processes whose settings they would change
(docs/gpu-settings.md explains the guarantees).

Example:
    >>> from zeus_core.testing import PhysicalModel, SimulatedGPU
    >>> from zeus_core.settings import Setting, SettingsGuard
    >>> gpu = SimulatedGPU(PhysicalModel.a40())
    >>> gpu.set_power_limit(280)  # an administrator's limit
    >>> with SettingsGuard([gpu], {Setting.POWER_LIMIT}) as guard:
    ...     guard.set_power_limit(gpu, 150)
    ...     gpu.get_power_limit()
    150.0
    >>> gpu.get_power_limit()  # back as it was, also after an exception or a signal
    280.0
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

from zeus_core import _restore_hooks, _settings_record, console
from zeus_core._settings_record import GPUBusyError
from zeus_core.device._base import GPU
from zeus_core.exceptions import ZeusNotSupportedError

__all__ = [
    "Setting",
    "LockedClocks",
    "GPUSettings",
    "SettingsAccess",
    "DirectAccess",
    "SettingsGuard",
    "GPUBusyError",
    "get_access",
    "set_access",
]

logger = logging.getLogger(__name__)

LockedClocks = tuple[int, int]
"""A locked clock range ``(min_mhz, max_mhz)``, MHz.

Example:
    >>> from zeus_core.testing import simulated_gpu
    >>> gpu = simulated_gpu("a40")
    >>> gpu.set_locked_sm_frequency(1200)
    >>> gpu.get_locked_sm_frequency()
    (1200, 1200)
"""


class Setting(str, enum.Enum):
    """A GPU setting a :class:`SettingsGuard` records and restores.

    Example:
        >>> from zeus_core.settings import Setting
        >>> Setting("sm_clocks") is Setting.SM_CLOCKS
        True
    """

    POWER_LIMIT = "power_limit"
    SM_CLOCKS = "sm_clocks"


@dataclass(frozen=True)
class GPUSettings:
    """The settings of one GPU as recorded at start.

    Attributes:
        power_limit_w: Power limit, W (``None``: not recorded).
        sm_clocks: Locked SM clock range, MHz; ``None`` when unlocked (or not known, see below).
        sm_clocks_known: Whether ``sm_clocks`` was read from the device; ``False`` where the device
            cannot report locked clocks (NVIDIA), so the restore unlocks them.

    Example:
        >>> from zeus_core.settings import Setting, SettingsGuard
        >>> from zeus_core.testing import simulated_gpu
        >>> guard = SettingsGuard([simulated_gpu("a40")], {Setting.POWER_LIMIT})
        >>> guard.record()
        >>> guard.recorded[0]
        GPUSettings(power_limit_w=300.0, sm_clocks=None, sm_clocks_known=False)
        >>> _ = guard.restore()
    """

    power_limit_w: float | None = None
    sm_clocks: LockedClocks | None = None
    sm_clocks_known: bool = False


class SettingsAccess:
    """The one seam through which settings are read and written (later: a privileged helper).

    Every method takes the :class:`~zeus_core.device.GPU` concerned; units are W and MHz.

    Example:
        >>> from zeus_core.settings import SettingsAccess
        >>> sorted(m for m in vars(SettingsAccess) if not m.startswith("_"))[:3]
        ['lock_sm_clocks', 'read_power_limit', 'read_sm_clocks']
    """

    def read_power_limit(self, gpu: GPU) -> float:
        """The current power limit, W."""
        raise NotImplementedError

    def read_sm_clocks(self, gpu: GPU) -> LockedClocks | None:
        """The locked SM clock range, MHz, or ``None`` when unlocked.

        Raises:
            ZeusNotSupportedError: The device cannot report its locked clocks.
        """
        raise NotImplementedError

    def set_power_limit(self, gpu: GPU, watts: float) -> None:
        """Set the power limit, W."""
        raise NotImplementedError

    def lock_sm_clocks(self, gpu: GPU, min_mhz: int, max_mhz: int) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz."""
        raise NotImplementedError

    def unlock_sm_clocks(self, gpu: GPU) -> None:
        """Let the driver choose the SM clock again."""
        raise NotImplementedError


class DirectAccess(SettingsAccess):
    """Reads and writes through the device object itself (needs admin rights for writes).

    Example:
        >>> from zeus_core.settings import DirectAccess
        >>> from zeus_core.testing import simulated_gpu
        >>> gpu = simulated_gpu("a40")
        >>> DirectAccess().set_power_limit(gpu, 200.0)
        >>> DirectAccess().read_power_limit(gpu)
        200.0
    """

    def read_power_limit(self, gpu: GPU) -> float:
        """The current power limit, W."""
        return gpu.get_power_limit()

    def read_sm_clocks(self, gpu: GPU) -> LockedClocks | None:
        """The locked SM clock range, MHz, or ``None`` (raises where the device cannot tell)."""
        return gpu.get_locked_sm_frequency()

    def set_power_limit(self, gpu: GPU, watts: float) -> None:
        """Set the power limit, W (no write when it is already ``watts``)."""
        if gpu.get_power_limit() != watts:
            gpu.set_power_limit(watts)

    def lock_sm_clocks(self, gpu: GPU, min_mhz: int, max_mhz: int) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz."""
        gpu.set_locked_sm_frequency(min_mhz, max_mhz)

    def unlock_sm_clocks(self, gpu: GPU) -> None:
        """Let the driver choose the SM clock again."""
        gpu.reset_locked_sm_frequency()


_access: SettingsAccess = DirectAccess()


def get_access() -> SettingsAccess:
    """The seam new guards read and write settings through.

    Example:
        >>> from zeus_core.settings import DirectAccess, get_access
        >>> isinstance(get_access(), DirectAccess)  # unless set_access() installed another
        True
    """
    return _access


def set_access(access: SettingsAccess) -> SettingsAccess:
    """Route the settings of guards created from now on through ``access``; returns the previous one.

    Example:
        >>> from zeus_core.settings import DirectAccess, set_access
        >>> class Audited(DirectAccess):
        ...     def set_power_limit(self, gpu, watts):
        ...         print(f"GPU {gpu.index}: {watts} W")
        ...         super().set_power_limit(gpu, watts)
        >>> previous = set_access(Audited())
        >>> _ = set_access(previous)  # put the old seam back
    """
    global _access
    previous, _access = _access, access
    return previous


_guards: weakref.WeakSet[SettingsGuard] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child's copies of the guards are not armed: the settings are the parent's to restore."""
    for guard in list(_guards):
        guard._lock = threading.RLock()
        guard._armed = False
        guard._claimed = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class SettingsGuard:
    """Records some settings of some GPUs, and restores exactly them on every exit path.

    Args:
        gpus: The GPUs whose settings the owner will change.
        settings: Which settings to record and restore (default: the power limit).
        what: Text for messages, e.g. ``"GPU power limits"`` (default: made from ``settings``).
        before_restore: Called at the start of every restore, before any setting is written,
            inside the uninterruptible section: the owner stops changing settings there (e.g.
            stops its clock worker, marks itself inactive).
        access: The seam to read and write through (default: :func:`get_access`).
        share: Change settings of a GPU that another live process holds, instead of refusing
            (default: ``ZEUS_SUITE_SHARE_GPUS=1`` in the environment); the last process to end
            then restores the original.

    A guard is *armed* from :meth:`record` until its restore. While armed it restores at
    interpreter exit and on every signal that would end the process (from the main thread's
    handlers; a guard recorded in another thread while no guard is armed in the main thread is
    restored at exit and on exceptions only, and says so). Guards restore newest first.
    :meth:`restore` is idempotent and may be called from any thread. A guard can be recorded again
    after a restore (e.g. a second ``fit``). Only the process that recorded restores: in a forked
    child the guard is not armed.

    For a real GPU, :meth:`record` also claims the settings in the per-GPU record
    (docs/gpu-settings.md, "One GPU, several processes"): it logs the original, finds the true
    original when a process that held the GPU was killed, and raises :class:`GPUBusyError` when
    another live process holds the setting and ``share`` is off.

    Example:
        >>> from zeus_core.settings import Setting, SettingsGuard
        >>> from zeus_core.testing import simulated_gpu
        >>> gpu = simulated_gpu("a100")
        >>> with SettingsGuard([gpu], {Setting.POWER_LIMIT, Setting.SM_CLOCKS}) as guard:
        ...     guard.set_power_limit(gpu, 250)
        >>> gpu.get_power_limit()
        400.0
    """

    def __init__(
        self,
        gpus: Sequence[GPU],
        settings: Collection[Setting] = (Setting.POWER_LIMIT,),
        *,
        what: str | None = None,
        before_restore: Callable[[], None] | None = None,
        access: SettingsAccess | None = None,
        share: bool | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.settings = frozenset(Setting(s) for s in settings)
        self.what = what or " and ".join(_WHAT[s] for s in Setting if s in self.settings)
        self._before_restore = before_restore
        self._access = access if access is not None else get_access()
        self._lock = threading.RLock()
        self._recorded: dict[int, GPUSettings] = {}
        self._armed = False
        self._pid = os.getpid()
        self._share = share
        self._claimed: dict[int, list[str]] = {}  # GPU index -> settings claimed in the per-GPU record
        _guards.add(self)

    # -- public ---------------------------------------------------------------------------------
    @property
    def armed(self) -> bool:
        """Whether settings are recorded (by this process) and not yet restored."""
        return self._armed and self._pid == os.getpid()

    @property
    def recorded(self) -> dict[int, GPUSettings]:
        """The settings found at :meth:`record`, by GPU index (empty before)."""
        return dict(self._recorded)

    def record(self) -> None:
        """Read the current settings of every GPU and arm the exit hooks (no-op while armed).

        Raises:
            GPUBusyError: Another live process holds one of these settings and sharing is off.
            ZeusError: A setting could not be read (nothing is armed then).
        """
        with _restore_hooks.critical(), self._lock:  # a signal waits until the guard is armed
            if self.armed:
                return
            self._pid = os.getpid()
            self._claimed = {}
            try:
                self._recorded = {gpu.index: self._claim(gpu) for gpu in self.gpus}
            except BaseException:
                self._release_claims()
                raise
            self._armed = True
            _restore_hooks.register(self)

    def restore(self) -> bool:
        """Put back the recorded settings of every GPU; signals wait until it is done.

        Idempotent: does nothing unless armed. Every GPU is tried; the first failure is raised
        after the others were restored.

        Returns:
            Whether this call restored (``False``: nothing was armed, e.g. restored already).

        Raises:
            ZeusError: A setting could not be written back (the message says which and why).
        """
        if self._pid != os.getpid():  # a forked child's copy: the parent restores
            self._armed = False
            return False
        errors: list[Exception] = []
        interrupted: BaseException | None = None
        with _restore_hooks.critical():
            with self._lock:
                if not self._armed:
                    return False
                try:
                    self._stop_owner()
                    for gpu in self.gpus:
                        error, stopped_by = self._restore_gpu(gpu)
                        errors += [error] if error is not None else []
                        interrupted = interrupted or stopped_by
                finally:
                    self._armed = False
                    _restore_hooks.unregister(self)
        if interrupted is not None:  # the restore is complete: now the interruption may go on
            raise interrupted
        if errors:
            raise errors[0]
        return True

    def set_power_limit(self, gpu: GPU, watts: float) -> None:
        """Set ``gpu``'s power limit, W, through the seam (record first, so that it comes back)."""
        self._access.set_power_limit(gpu, watts)

    def lock_sm_clocks(self, gpu: GPU, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock ``gpu``'s SM clock into ``[min_mhz, max_mhz]`` (default ``max_mhz = min_mhz``), MHz."""
        self._access.lock_sm_clocks(gpu, int(min_mhz), int(min_mhz if max_mhz is None else max_mhz))

    def __enter__(self) -> "SettingsGuard":
        self.record()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.restore()
            return
        try:  # the block's error matters more than a failed restore, which is logged
            self.restore()
        except Exception as e:
            logger.error("Restoring %s failed while handling another error: %s", self.what, e)

    def __getstate__(self) -> dict[str, object]:
        """The state to pickle (e.g. for ``ddp_spawn``): no lock, and not armed.

        The restore belongs to the process that recorded; a copy records again in its own process.
        """
        state = self.__dict__.copy()
        del state["_lock"]
        state["_armed"] = False
        state["_claimed"] = {}
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        """Rebuild the lock of an unpickled guard."""
        self.__dict__.update(state)
        self._lock = threading.RLock()
        _guards.add(self)

    # -- internals ------------------------------------------------------------------------------
    def _recorded_in_file(self, gpu: GPU) -> bool:
        """Whether ``gpu``'s settings go in the per-GPU record (real GPUs; a simulated one is per process)."""
        return not gpu.simulated

    def _claim(self, gpu: GPU) -> GPUSettings:
        """Read ``gpu``'s settings, claiming them in the per-GPU record (see the class docstring)."""
        if not self._recorded_in_file(gpu):
            return self._read(gpu)
        share = _settings_record.share_from_env() if self._share is None else bool(self._share)
        power: float | None = None
        clocks: tuple[LockedClocks | None, bool] = (None, False)
        describe, uuid = gpu.describe(), gpu.uuid
        if Setting.POWER_LIMIT in self.settings:
            power = _settings_record.claim(
                uuid,
                describe,
                Setting.POWER_LIMIT.value,
                lambda: self._access.read_power_limit(gpu),
                share=share,
                show=lambda w: f"{w:g} W",
                restore_hint=lambda w: f"nvidia-smi -i {gpu.index} -pl {w:g}",
            )
            self._claimed.setdefault(gpu.index, []).append(Setting.POWER_LIMIT.value)
        if Setting.SM_CLOCKS in self.settings:
            found = _settings_record.claim(
                uuid,
                describe,
                Setting.SM_CLOCKS.value,
                lambda: _clocks_json(self._read_clocks(gpu)),
                share=share,
                show=_show_clocks,
                restore_hint=lambda c: _clocks_hint(gpu.index, c),
            )
            self._claimed.setdefault(gpu.index, []).append(Setting.SM_CLOCKS.value)
            clocks = _clocks_of(found)
        if Setting.SM_CLOCKS not in self.settings:
            return GPUSettings(power_limit_w=None if power is None else float(power))
        return GPUSettings(None if power is None else float(power), clocks[0], sm_clocks_known=clocks[1])

    def _release_claims(self) -> None:
        """Give up the claims of a record that failed half-way (nothing was changed yet)."""
        for gpu in self.gpus:
            for setting in self._claimed.pop(gpu.index, []):
                try:
                    _settings_record.release(gpu.uuid, setting, lambda: None)
                except Exception as e:  # the error that made record() fail matters more
                    logger.debug("Releasing %s of %s failed: %s", setting, gpu.describe(), e)

    def _read_clocks(self, gpu: GPU) -> tuple[LockedClocks | None, bool]:
        try:
            return self._access.read_sm_clocks(gpu), True
        except ZeusNotSupportedError:
            self._warn_unknown_clocks(gpu)
            return None, False

    def _warn_unknown_clocks(self, gpu: GPU) -> None:
        console.warn_once(
            f"settings-unknown-clocks-{gpu.index}",
            f"{gpu.describe()} cannot report its locked SM clocks (NVML has no such query): they will "
            "be unlocked when this run ends, not put back. If an administrator had locked them, lock "
            "them again afterwards (`nvidia-smi -i <gpu> -lgc <min>,<max>`).",
        )

    def _read(self, gpu: GPU) -> GPUSettings:
        power = self._access.read_power_limit(gpu) if Setting.POWER_LIMIT in self.settings else None
        if Setting.SM_CLOCKS not in self.settings:
            return GPUSettings(power_limit_w=power)
        clocks, known = self._read_clocks(gpu)
        return GPUSettings(power, clocks, sm_clocks_known=known)

    def _stop_owner(self) -> None:
        if self._before_restore is None:
            return
        try:
            self._before_restore()
        except Exception as e:  # the settings must come back all the same
            logger.error("Stopping the owner of %s before the restore failed: %s", self.what, e)

    def _restore_gpu(self, gpu: GPU) -> tuple[Exception | None, BaseException | None]:
        """Write back one GPU's recorded settings: (the error, if any; an interruption to re-raise).

        A ``KeyboardInterrupt``/``SystemExit`` raised in between (by a signal handler that is not
        ours) does not stop the restore: the write is retried, and the interruption returned.
        """
        interrupted: BaseException | None = None
        while True:
            try:
                self._release_gpu(gpu)
                return None, interrupted
            except (KeyboardInterrupt, SystemExit) as e:
                interrupted = interrupted or e
            except Exception as e:  # try every GPU, then report
                logger.error("Could not restore %s of %s: %s", self.what, gpu.describe(), e)
                return e, interrupted

    def _release_gpu(self, gpu: GPU) -> None:
        """Write back one GPU's settings, unless another live process still holds them (the record)."""
        saved = self._recorded[gpu.index]
        claimed = self._claimed.get(gpu.index)
        if claimed is None:
            self._write_power(gpu, saved)
            self._write_clocks(gpu, saved)
            return
        writers = {Setting.POWER_LIMIT.value: self._write_power, Setting.SM_CLOCKS.value: self._write_clocks}
        while claimed:  # one at a time: a retry after an interruption does not release twice
            setting = claimed[0]
            holder = _settings_record.release(gpu.uuid, setting, lambda: writers[setting](gpu, saved))
            claimed.pop(0)
            if holder is not None:
                logger.info(
                    "%s: %s left as it is: %s still holds it (the last to end restores).",
                    gpu.describe(),
                    setting.replace("_", " "),
                    holder,
                )

    def _write_power(self, gpu: GPU, saved: GPUSettings) -> None:
        if saved.power_limit_w is not None and self._access.read_power_limit(gpu) != saved.power_limit_w:
            self._access.set_power_limit(gpu, saved.power_limit_w)

    def _write_clocks(self, gpu: GPU, saved: GPUSettings) -> None:
        if Setting.SM_CLOCKS not in self.settings:
            return
        if saved.sm_clocks_known and self._access.read_sm_clocks(gpu) == saved.sm_clocks:
            return
        if saved.sm_clocks is None:
            self._access.unlock_sm_clocks(gpu)
        else:
            self._access.lock_sm_clocks(gpu, *saved.sm_clocks)


def _clocks_json(found: tuple[LockedClocks | None, bool]) -> dict[str, Any]:
    clocks, known = found
    return {"clocks": None if clocks is None else [int(clocks[0]), int(clocks[1])], "known": known}


def _clocks_of(value: Any) -> tuple[LockedClocks | None, bool]:
    try:
        clocks = value["clocks"]
        pair = None if clocks is None else (int(clocks[0]), int(clocks[1]))
        return pair, bool(value["known"])
    except (TypeError, KeyError, IndexError, ValueError):
        return None, False  # a record we cannot read: unlock, as for a GPU that cannot report


def _show_clocks(value: Any) -> str:
    clocks, known = _clocks_of(value)
    if not known:
        return "unknown locked SM clocks (NVML cannot report them; restored by unlocking)"
    return "unlocked SM clocks" if clocks is None else f"SM clocks locked at {clocks[0]}-{clocks[1]} MHz"


def _clocks_hint(index: int, value: Any) -> str:
    clocks, _ = _clocks_of(value)
    return (
        f"nvidia-smi -i {index} -rgc"
        if clocks is None
        else f"nvidia-smi -i {index} -lgc {clocks[0]},{clocks[1]}"
    )


_WHAT = {Setting.POWER_LIMIT: "GPU power limits", Setting.SM_CLOCKS: "locked SM clocks"}
