"""NVIDIA GPUs through NVML (``pynvml`` from the ``nvidia-ml-py`` package).

``pynvml`` is imported, and NVML initialised, on first use; that initialisation is the only
state cached here (per ``pynvml`` module object, so a test that swaps in a fake gets its own).
NVML's units (mW, mJ) are converted to W and J in this module and nowhere else, and every NVML
error is translated into a Zeus Suite exception by :func:`_translate`, chained with ``from``.

Indices follow ``CUDA_VISIBLE_DEVICES``: with ``CUDA_VISIBLE_DEVICES=2,0``, GPU ``0`` is NVML
device 2. Entries may be indices or ``GPU-<uuid>`` prefixes; ``MIG-`` entries are refused
because NVML cannot meter MIG slices.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Mapping

from zeus_core.device._base import ClockEventReasons, PowerLimitConstraints
from zeus_core.device._registry import Unavailable
from zeus_core.device._vendor import (
    VendorGPU,
    VendorLibrary,
    VendorUnavailable,
    found_or_logged,
    select_visible,
)
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusNotSupportedError

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["NVIDIAGPU", "nvidia_gpus", "probe_nvidia", "PERMISSION_FIX"]


# NVML return codes (nvml.h; stable ABI, identical to pynvml.NVML_ERROR_*).
_INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_RESET_REQUIRED = 16
_LIB_RM_VERSION_MISMATCH = 18
_ARCH_VOLTA = 5
_ARCH_AMPERE = 7
_GA100_NAMES = ("A100", "A30")  # GA100 products: nvmlDeviceGetPowerUsage is instantaneous
_ARCH_UNKNOWN = 0xFFFFFFFF

PERMISSION_FIX = (
    "Changing power limits or clocks needs admin rights: run as root, or grant this Python the "
    "capability with `sudo setcap cap_sys_admin+ep $(readlink -f $(which python))`, or have an "
    "administrator set the limit for you (`sudo nvidia-smi -i <gpu> -pl <watts>`, "
    "`sudo nvidia-smi -i <gpu> -lgc <mhz>`) and only measure from this process."
)
"""How to get the permission NVML asks for when setting power limits or clocks."""

_init_lock = threading.Lock()
_initialized: Any = None  # the pynvml module object that nvmlInit() succeeded on


NVML = VendorLibrary(
    devices="NVIDIA GPUs",
    health_check="nvidia-smi",
    module="pynvml",
    label="NVML",
    package="nvidia-ml-py",
    upgrade="Upgrade it: pip install -U nvidia-ml-py.",
    error_class="NVMLError",
    code_of=lambda err: getattr(err, "value", None),
    permission_fix=PERMISSION_FIX,
    no_permission=(_NO_PERMISSION,),
    not_supported=(_NOT_SUPPORTED, _FUNCTION_NOT_FOUND),
    bad_argument=(_INVALID_ARGUMENT, _NOT_FOUND),
    not_supported_hint="Use a GPU/driver that does, or avoid this feature (e.g. energy is then estimated "
    "from sampled power).",
    index_label="NVML",
    other=(
        (
            (_GPU_IS_LOST, _RESET_REQUIRED),
            "the GPU stopped responding ({err}). Reset it (`nvidia-smi -r`) or reboot; check `dmesg` for "
            "Xid errors.",
        ),
        (
            (_DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND, _LIB_RM_VERSION_MISMATCH),
            "the NVIDIA driver is unusable ({err}). Install or reload the driver until `nvidia-smi` works "
            "(after a driver update, reboot).",
        ),
    ),
)
"""NVML's error codes and their fixes (see :class:`~zeus_core.device._vendor.VendorLibrary`)."""
_translate = NVML.translate


def _init_failure(err: Exception) -> Unavailable:
    code = getattr(err, "value", None)
    if code == _LIBRARY_NOT_FOUND:
        return Unavailable(
            "NVIDIA GPUs",
            "the NVML library libnvidia-ml.so.1 was not found, so no NVIDIA driver is installed.",
            "on a machine with NVIDIA GPUs, install the NVIDIA driver (`nvidia-smi` must work); "
            "in a container, run it with the NVIDIA container toolkit (`--gpus all`).",
        )
    if code == _DRIVER_NOT_LOADED:
        return Unavailable(
            "NVIDIA GPUs",
            "the NVIDIA kernel driver is not loaded.",
            "load it (`sudo modprobe nvidia`) or reboot after installing the driver.",
        )
    if code == _LIB_RM_VERSION_MISMATCH:
        return Unavailable(
            "NVIDIA GPUs",
            "the NVML library and the loaded kernel driver have different versions.",
            "reboot (or reload the nvidia kernel modules) after the driver update.",
        )
    return Unavailable("NVIDIA GPUs", f"NVML failed to initialise ({err}).", "check that `nvidia-smi` works.")


def _nvml() -> ModuleType:
    """``pynvml``, initialised (once per module object).

    Raises:
        VendorUnavailable: NVML is missing or failed to initialise (carries the reason and fix).
    """
    global _initialized
    try:
        import pynvml
    except ImportError as e:
        raise VendorUnavailable(
            Unavailable(
                "NVIDIA GPUs", f"the NVML bindings are not installed ({e}).", "pip install nvidia-ml-py"
            )
        ) from e
    if pynvml is _initialized:
        return pynvml
    with _init_lock:
        if pynvml is not _initialized:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as e:
                raise VendorUnavailable(_init_failure(e)) from e
            _initialized = pynvml
    return pynvml


class NVIDIAGPU(VendorGPU):
    """One NVIDIA GPU, read and controlled through NVML.

    Energy comes from NVML's hardware counter (Volta and newer); :attr:`has_energy_counter` says
    whether it exists. Setting power limits or clocks needs admin rights (see
    :data:`PERMISSION_FIX`); reading never does.

    Args:
        index: The index the user sees (``cuda:<index>``).
        nvml_index: NVML's index of the device (default: ``index``). :func:`nvidia_gpus`
            passes the one ``CUDA_VISIBLE_DEVICES`` maps ``index`` to.

    Raises:
        ZeusDeviceNotFoundError: NVML has no device ``nvml_index``.
        ZeusDeviceError: NVML is not available (no driver).

    Example:
        >>> from zeus_core.device._nvidia import nvidia_gpus
        >>> gpu = nvidia_gpus()[0]  # doctest: +SKIP
        >>> gpu.name, gpu.power_limit_constraints()  # doctest: +SKIP
        ('NVIDIA A40', PowerLimitConstraints(min_w=100.0, max_w=300.0, default_w=300.0))
        >>> e0 = gpu.get_total_energy()  # doctest: +SKIP
        >>> train_one_epoch()  # doctest: +SKIP
        >>> joules = gpu.get_total_energy() - e0  # doctest: +SKIP
    """

    vendor = "nvidia"
    library = NVML

    def __init__(self, index: int, nvml_index: int | None = None) -> None:
        nvml_index = index if nvml_index is None else nvml_index
        nvml = _nvml()
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(nvml_index)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) in (_INVALID_ARGUMENT, _NOT_FOUND):
                raise ZeusDeviceNotFoundError(
                    f"NVIDIAGPU({index}, nvml_index={nvml_index}): NVML has no such device "
                    f"({nvml.nvmlDeviceGetCount()} GPU(s) present). "
                    "Use nvidia_gpus() to get the visible GPUs."
                ) from e
            raise _translate(e, f"NVIDIAGPU({index}, nvml_index={nvml_index})") from e
        super().__init__(index, nvml_index, nvml, handle)
        # Bound once: on the measurement hot path, get_total_energy is one call away from pynvml.
        self._read_energy_mj = nvml.nvmlDeviceGetTotalEnergyConsumption
        self._name: str | None = None
        self._uuid: str | None = None
        self._constraints: PowerLimitConstraints | None = None
        self._has_counter: bool | None = None
        self._instant_power_field: bool | None = None

    # -- identity -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Product name as the driver reports it, e.g. ``"NVIDIA A40"``."""
        if self._name is None:
            name = self._call("name", "nvmlDeviceGetName")
            self._name = name.decode() if isinstance(name, bytes) else str(name)
        return self._name

    @property
    def uuid(self) -> str:
        """Unique identifier as the driver reports it."""
        if self._uuid is None:
            uuid = self._call("uuid", "nvmlDeviceGetUUID")
            self._uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        return self._uuid

    # -- power limit ----------------------------------------------------------------------------
    def power_limit_constraints(self) -> PowerLimitConstraints:
        """Min, max and default power limit, W (read once, then cached)."""
        if self._constraints is None:
            lo_mw, hi_mw = self._call(
                "power_limit_constraints()", "nvmlDeviceGetPowerManagementLimitConstraints"
            )
            default_mw = self._call("power_limit_constraints()", "nvmlDeviceGetPowerManagementDefaultLimit")
            self._constraints = PowerLimitConstraints(lo_mw / 1000.0, hi_mw / 1000.0, default_mw / 1000.0)
        return self._constraints

    def get_power_limit(self) -> float:
        """Current power limit, W."""
        return self._call("get_power_limit()", "nvmlDeviceGetPowerManagementLimit") / 1000.0

    def set_power_limit(self, watts: float) -> None:
        """Set the power limit, W; does nothing (no NVML write) when it is already ``watts``.

        Raises:
            ZeusConfigError: ``watts`` is outside :meth:`power_limit_constraints`.
            ZeusPermissionError: The process may not change the limit (message says how to).
        """
        call = f"set_power_limit({watts})"
        target_mw = int(round(watts * 1000))
        if self._call(call, "nvmlDeviceGetPowerManagementLimit") == target_mw:
            return
        c = self.power_limit_constraints()
        if not c.min_w * 1000 <= target_mw <= c.max_w * 1000:
            raise ZeusConfigError(
                f"{call} on GPU {self.index} ({self.name}): outside the allowed range "
                f"{c.min_w:g}-{c.max_w:g} W. Pick a limit in that range."
            )
        self._call(call, "nvmlDeviceSetPowerManagementLimit", target_mw)

    def check_control_permission(self) -> None:
        """Verify, without writing anything, that this process may set limits and clocks.

        NVML must report power management as enabled (where it answers) and a limit range wider
        than one value, and the process must hold
        ``CAP_SYS_ADMIN`` (root): :func:`~zeus_core.device._privileges.has_admin_rights`.

        Raises:
            ZeusPermissionError: No permission; the message says how to get it.
            ZeusNotSupportedError: This GPU's power limit cannot be changed at all.
        """
        call = "check_control_permission()"
        try:
            mode = self._call(call, "nvmlDeviceGetPowerManagementMode")
        except ZeusNotSupportedError:  # a driver without the query: the limit range decides below
            mode = None
        c = self.power_limit_constraints()
        if (
            mode is not None and mode != getattr(self._module, "NVML_FEATURE_ENABLED", 1)
        ) or c.max_w <= c.min_w:
            raise ZeusNotSupportedError(
                f"GPU {self.index}: {call}: power management is disabled on this GPU, so its power limit "
                "cannot be changed. Measure only, or use a GPU that supports power limits."
            )
        self._require_admin_rights(call)

    def check_control_by_writing(self) -> None:
        """Verify that this process may set limits by re-writing the current limit through NVML (a write).

        Raises:
            ZeusPermissionError: No permission; the message says how to get it.
            ZeusNotSupportedError: This GPU's power limit cannot be changed at all.
        """
        current_mw = self._call("check_control_by_writing()", "nvmlDeviceGetPowerManagementLimit")
        self._call("check_control_by_writing()", "nvmlDeviceSetPowerManagementLimit", current_mw)

    # -- clocks ---------------------------------------------------------------------------------
    def supported_memory_frequencies(self) -> list[int]:
        """Supported memory clocks, MHz, highest first."""
        clocks = self._call("supported_memory_frequencies()", "nvmlDeviceGetSupportedMemoryClocks")
        return sorted((int(c) for c in clocks), reverse=True)

    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """Supported SM clocks, MHz, highest first, at ``memory_mhz`` (default: highest)."""
        if memory_mhz is None:
            memory = self.supported_memory_frequencies()
            if not memory:
                return []
            memory_mhz = memory[0]
        clocks = self._call(
            f"supported_sm_frequencies({memory_mhz})", "nvmlDeviceGetSupportedGraphicsClocks", int(memory_mhz)
        )
        return sorted((int(c) for c in clocks), reverse=True)

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz (``max_mhz`` defaults to ``min_mhz``)."""
        call = f"set_locked_sm_frequency({min_mhz}, {max_mhz})"
        lower, upper = self._clock_range(call, min_mhz, max_mhz)
        self._call(call, "nvmlDeviceSetGpuLockedClocks", lower, upper)

    def reset_locked_sm_frequency(self) -> None:
        """Let the driver choose the SM clock again."""
        self._call("reset_locked_sm_frequency()", "nvmlDeviceResetGpuLockedClocks")

    # -- energy and power -----------------------------------------------------------------------
    @property
    def has_energy_counter(self) -> bool:
        """Whether NVML's energy counter exists: Volta or newer, and the counter answers."""
        if self._has_counter is None:
            try:
                arch = self._call("has_energy_counter", "nvmlDeviceGetArchitecture")
            except ZeusNotSupportedError:
                arch = _ARCH_UNKNOWN
            if arch != _ARCH_UNKNOWN and arch < _ARCH_VOLTA:
                self._has_counter = False
            else:
                try:
                    self._call("has_energy_counter", "nvmlDeviceGetTotalEnergyConsumption")
                    self._has_counter = True
                except ZeusNotSupportedError:
                    self._has_counter = False
        return self._has_counter

    def get_total_energy(self) -> float:
        """Energy since the driver loaded, J (NVML's counter, in mJ).

        The driver refreshes the counter periodically (every 100 ms on the H100 we measured, where
        one read took about 4 ms), so windows much shorter than that see coarse energy values.

        Raises:
            ZeusNotSupportedError: Pre-Volta GPU without the counter.
        """
        try:
            return self._read_energy_mj(self._handle) / 1000.0
        except self._module.NVMLError as e:
            raise _translate(e, f"GPU {self.index}: get_total_energy()") from e

    @property
    def has_instant_power(self) -> bool:
        """Whether :meth:`get_power` is instantaneous.

        True where NVML's instant-power field answers, or where ``nvmlDeviceGetPowerUsage`` is
        itself instantaneous (NVML docs: GA100 and older, i.e. before Ampere, plus A100/A30).
        Elsewhere (Ampere except GA100, and newer, on drivers without the field) it is a 1 s average.
        """
        if self._instant_power_field is None:
            self._instant_power_field = self._read_instant_power_mw() is not None
        if self._instant_power_field:
            return True
        try:
            arch = self._call("has_instant_power", "nvmlDeviceGetArchitecture")
        except ZeusNotSupportedError:
            return False
        return arch < _ARCH_AMPERE or (arch == _ARCH_AMPERE and any(n in self.name for n in _GA100_NAMES))

    def get_power(self) -> float:
        """Instant power draw, W.

        NVML's instant-power field where the driver has it (newer drivers; ``nvmlDeviceGetPowerUsage``
        is a one-second average on Ampere and newer), else ``nvmlDeviceGetPowerUsage``
        (:attr:`has_instant_power` says whether that is instantaneous).
        """
        if self._instant_power_field is not False:
            mw = self._read_instant_power_mw()
            if mw is not None:
                self._instant_power_field = True
                return mw / 1000.0
            if self._instant_power_field is None:  # never worked: stop asking
                self._instant_power_field = False
        return self._call("get_power()", "nvmlDeviceGetPowerUsage") / 1000.0

    def _read_instant_power_mw(self) -> int | None:
        return self._read_power_field_mw("NVML_FI_DEV_POWER_INSTANT", None)

    def _read_power_field_mw(self, field: str, scope: str | None) -> int | None:
        """An NVML power field (``NVML_FI_DEV_POWER_*``) in ``scope``, mW; ``None`` where it has none."""
        nvml = self._module
        field_id = getattr(nvml, field, None)
        scope_id = None if scope is None else getattr(nvml, scope, None)
        if field_id is None or (scope is not None and scope_id is None):
            return None
        try:
            value = nvml.nvmlDeviceGetFieldValues(
                self._handle, [field_id if scope_id is None else (field_id, scope_id)]
            )[0]
        except nvml.NVMLError:
            return None
        return int(value.value.uiVal) if value.nvmlReturn == 0 else None

    def get_average_power(self) -> float:
        """Power averaged by the driver over about one second, W (NVML's average-power field).

        Raises:
            ZeusNotSupportedError: The driver lacks the field (older drivers).
        """
        mw = self._read_power_field_mw("NVML_FI_DEV_POWER_AVERAGE", "NVML_POWER_SCOPE_GPU")
        if mw is None:
            mw = self._read_power_field_mw("NVML_FI_DEV_POWER_AVERAGE", None)
        if mw is None:
            raise ZeusNotSupportedError(
                f"GPU {self.index}: get_average_power(): this GPU or driver has no average-power field. "
                "Use get_power() (instant power) instead."
            )
        return mw / 1000.0

    def get_memory_power(self) -> float:
        """Power of the GPU's memory, averaged by the driver, W (NVML's memory power scope; Hopper and newer).

        Raises:
            ZeusNotSupportedError: The GPU or driver does not meter its memory.
        """
        mw = self._read_power_field_mw("NVML_FI_DEV_POWER_AVERAGE", "NVML_POWER_SCOPE_MEMORY")
        if mw is None:
            raise ZeusNotSupportedError(
                f"GPU {self.index} ({self.name}): get_memory_power(): this GPU or driver does not meter "
                "its memory (NVIDIA Hopper and newer do)."
            )
        return mw / 1000.0

    # -- persistence mode and memory clocks ----------------------------------------------------------
    def get_persistence_mode(self) -> bool:
        """Whether NVIDIA persistence mode is on."""
        enabled = getattr(self._module, "NVML_FEATURE_ENABLED", 1)
        return self._call("get_persistence_mode()", "nvmlDeviceGetPersistenceMode") == enabled

    def set_persistence_mode(self, enabled: bool) -> None:
        """Turn persistence mode on or off; no NVML write when it is already so.

        Raises:
            ZeusPermissionError: The process may not change it (message says how to).
        """
        if self.get_persistence_mode() == bool(enabled):
            return
        value = getattr(
            self._module, "NVML_FEATURE_ENABLED" if enabled else "NVML_FEATURE_DISABLED", int(enabled)
        )
        self._call(f"set_persistence_mode({enabled})", "nvmlDeviceSetPersistenceMode", value)

    def set_locked_memory_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the memory clock into ``[min_mhz, max_mhz]``, MHz (``max_mhz`` defaults to ``min_mhz``)."""
        call = f"set_locked_memory_frequency({min_mhz}, {max_mhz})"
        lower, upper = self._clock_range(call, min_mhz, max_mhz)
        self._call(call, "nvmlDeviceSetMemoryLockedClocks", lower, upper)

    def reset_locked_memory_frequency(self) -> None:
        """Let the driver choose the memory clock again."""
        self._call("reset_locked_memory_frequency()", "nvmlDeviceResetMemoryLockedClocks")

    @property
    def nvml_index(self) -> int:
        """NVML's index of this GPU (differs from :attr:`index` when ``CUDA_VISIBLE_DEVICES`` remaps it)."""
        return self.backend_index

    # -- temperature and clock events -------------------------------------------------------------
    def get_temperature(self) -> float:
        """GPU die temperature, °C (``nvmlDeviceGetTemperatureV``, or the older call on old bindings)."""
        sensor = getattr(self._module, "NVML_TEMPERATURE_GPU", 0)
        if hasattr(self._module, "nvmlDeviceGetTemperatureV"):
            return float(self._call("get_temperature()", "nvmlDeviceGetTemperatureV", sensor))
        return float(self._call("get_temperature()", "nvmlDeviceGetTemperature", sensor))

    def get_clock_event_reasons(self) -> ClockEventReasons:
        """Why the clocks are below their maximum now (NVML's clock-event, formerly throttle, reasons)."""
        if hasattr(self._module, "nvmlDeviceGetCurrentClocksEventReasons"):
            mask = self._call("get_clock_event_reasons()", "nvmlDeviceGetCurrentClocksEventReasons")
        else:
            mask = self._call("get_clock_event_reasons()", "nvmlDeviceGetCurrentClocksThrottleReasons")
        return ClockEventReasons(int(mask))


def probe_nvidia(environ: Mapping[str, str] | None = None) -> tuple[list[NVIDIAGPU], Unavailable | None]:
    """The visible NVIDIA GPUs, or ``[]`` and why there are none.

    Args:
        environ: Environment to read ``CUDA_VISIBLE_DEVICES`` from (default: ``os.environ``).

    Raises:
        ZeusConfigError: ``CUDA_VISIBLE_DEVICES`` is malformed or names a MIG slice.
        ZeusDeviceNotFoundError: ``CUDA_VISIBLE_DEVICES`` names a GPU this machine lacks.
    """
    env = os.environ if environ is None else environ
    try:
        nvml = _nvml()
    except VendorUnavailable as e:
        return [], e.why
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as e:
        raise _translate(e, "nvidia_gpus()") from e

    def uuids() -> list[str]:
        out = []
        for i in range(count):
            u = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))
            out.append(u.decode() if isinstance(u, bytes) else str(u))
        return out

    return select_visible(NVML, "CUDA_VISIBLE_DEVICES", env, range(count), uuids, NVIDIAGPU)


def nvidia_gpus(environ: Mapping[str, str] | None = None) -> list[NVIDIAGPU]:
    """The NVIDIA GPUs this process sees, indexed like ``cuda:<i>``; ``[]`` without NVML.

    Where NVML is missing (no driver, driver not loaded), returns ``[]`` and logs the reason.

    Raises:
        ZeusConfigError: ``CUDA_VISIBLE_DEVICES`` is malformed or names a MIG slice.
        ZeusDeviceNotFoundError: ``CUDA_VISIBLE_DEVICES`` names a GPU this machine lacks.
    """
    return found_or_logged(probe_nvidia(environ))
