"""AMD GPUs through ``amdsmi`` (ROCm), imported only where it is installed and loads.

The ``amdsmi`` Python package needs ROCm's ``libamd_smi.so``; without it the import prints a
message and raises. That is caught here (the print is swallowed) and reported as the reason no AMD
GPU is found. amdsmi's units (µW, µJ, Hz) become W, J and MHz in this module only, and every
amdsmi error is translated by :func:`_translate`, chained with ``from``.

Indices follow ``HIP_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES`` when it is unset, as ROCm
builds of PyTorch do), over HIP's device numbering (``amdsmi_get_gpu_enumeration_info``'s
``hip_id``), so GPU ``0`` here is ``cuda:0`` in PyTorch on ROCm.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Mapping

from zeus_core.device import _privileges as privileges
from zeus_core.device._base import GPU, PowerLimitConstraints
from zeus_core.device._registry import Unavailable
from zeus_core.device._visibility import parse_visible_devices
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["AMDGPU", "amd_gpus", "probe_amd", "AMD_PERMISSION_FIX"]

logger = logging.getLogger(__name__)

# amdsmi_status_t codes (amdsmi.h).
_INVAL = 1
_NOT_SUPPORTED = 2
_NOT_YET_IMPLEMENTED = 3
_NO_PERM = 10
_INPUT_OUT_OF_BOUNDS = 17
_NOT_FOUND = 31

AMD_PERMISSION_FIX = (
    "Changing power caps or clocks needs admin rights: run as root, or have an administrator set "
    "them (`sudo amd-smi set -g <gpu> -o <watts>`) and only measure from this process."
)
"""How to get the permission amdsmi asks for when setting power caps or clocks."""

_lock = threading.Lock()
_initialized: Any = None  # the amdsmi module object that amdsmi_init() succeeded on
_import_failure: Unavailable | None = None  # why importing the real amdsmi failed (not retried)


def _translate(err: Exception, call: str) -> ZeusError:
    """The Zeus Suite exception for an amdsmi error raised by ``call`` (the one place this happens)."""
    get_code = getattr(err, "get_error_code", None)
    code = get_code() if callable(get_code) else None
    if code == _NO_PERM:
        return ZeusPermissionError(f"{call}: amdsmi refused ({err}). {AMD_PERMISSION_FIX}")
    if code in (_NOT_SUPPORTED, _NOT_YET_IMPLEMENTED):
        return ZeusNotSupportedError(f"{call}: this GPU or driver does not support it ({err}).")
    if code in (_INVAL, _INPUT_OUT_OF_BOUNDS, _NOT_FOUND):
        return ZeusConfigError(
            f"{call}: amdsmi rejected the argument ({err}). Check the value against the "
            "GPU's supported range (`zeus-suite env` shows it)."
        )
    return ZeusDeviceError(f"{call}: amdsmi failed ({err}). Check that `amd-smi list` works.")


class _AmdUnavailable(ZeusDeviceError):
    def __init__(self, why: Unavailable) -> None:
        super().__init__(why.describe())
        self.why = why


def _import_amdsmi() -> ModuleType:
    global _import_failure
    module = sys.modules.get("amdsmi")
    if module is not None:
        return module
    if _import_failure is not None:
        raise _AmdUnavailable(_import_failure)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            import amdsmi
    except ModuleNotFoundError:
        _import_failure = Unavailable(
            "AMD GPUs",
            "the amdsmi Python package is not installed.",
            "only needed for AMD GPUs: install ROCm, then `pip install amdsmi` matching its version.",
        )
    except Exception as e:  # amdsmi raises KeyError/OSError/AttributeError when ROCm is missing
        said = " ".join(printed.getvalue().split())
        _import_failure = Unavailable(
            "AMD GPUs",
            f"amdsmi is installed but cannot load ROCm's libamd_smi.so ({type(e).__name__}: {e}"
            + (f"; it said: {said}" if said else "")
            + "), so there is no ROCm stack on this machine.",
            "only needed for AMD GPUs: install ROCm (amd-smi-lib) and set ROCM_PATH.",
        )
    else:
        return amdsmi
    raise _AmdUnavailable(_import_failure)


def _amdsmi() -> ModuleType:
    """``amdsmi``, initialised for GPUs (once per module object).

    Raises:
        _AmdUnavailable: amdsmi is missing, cannot load ROCm, or failed to initialise.
    """
    global _initialized
    amdsmi = _import_amdsmi()
    if amdsmi is _initialized:
        return amdsmi
    with _lock:
        if amdsmi is not _initialized:
            try:
                amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
            except amdsmi.AmdSmiException as e:
                raise _AmdUnavailable(
                    Unavailable(
                        "AMD GPUs",
                        f"amdsmi could not initialise ({e}).",
                        "check that the amdgpu driver is loaded and `amd-smi list` works.",
                    )
                ) from e
            _initialized = amdsmi
    return amdsmi


def _handles_by_hip_id(amdsmi: ModuleType) -> dict[int, Any]:
    """The amdsmi processor handles keyed by HIP device index (what PyTorch calls ``cuda:<i>``)."""
    try:
        handles = list(amdsmi.amdsmi_get_processor_handles())
        if not hasattr(amdsmi, "amdsmi_get_gpu_enumeration_info"):  # older amdsmi: BDF order
            return dict(enumerate(handles))
        return {int(amdsmi.amdsmi_get_gpu_enumeration_info(h)["hip_id"]): h for h in handles}
    except amdsmi.AmdSmiException as e:
        raise _translate(e, "amd_gpus()") from e


class AMDGPU(GPU):
    """One AMD GPU, read and controlled through amdsmi.

    Args:
        index: The index the user sees (``cuda:<index>`` on ROCm PyTorch).
        hip_index: HIP's index of the device (default: ``index``).

    Raises:
        ZeusDeviceNotFoundError: There is no device ``hip_index``.
        ZeusDeviceError: amdsmi is not available.

    Example:
        >>> from zeus_core.device._amd import amd_gpus
        >>> gpu = amd_gpus()[0]  # doctest: +SKIP
        >>> gpu.name, gpu.get_power()  # doctest: +SKIP
        ('AMD Instinct MI300X', 512.0)
    """

    vendor = "amd"

    def __init__(self, index: int, hip_index: int | None = None) -> None:
        super().__init__(index)
        self.hip_index = index if hip_index is None else hip_index
        amdsmi = _amdsmi()
        self._amdsmi = amdsmi
        handles = _handles_by_hip_id(amdsmi)
        if self.hip_index not in handles:
            raise ZeusDeviceNotFoundError(
                f"AMDGPU({index}, hip_index={self.hip_index}): no such AMD GPU (HIP indices: "
                f"{sorted(handles)}). Use amd_gpus() to get the visible GPUs."
            )
        self._handle = handles[self.hip_index]
        self._read_energy = amdsmi.amdsmi_get_energy_count
        self._name: str | None = None
        self._uuid: str | None = None
        self._has_counter: bool | None = None

    def _call(self, call: str, function: str, *args: Any) -> Any:
        """Call ``amdsmi.<function>(handle, *args)``, translating amdsmi errors."""
        amdsmi = self._amdsmi
        fn = getattr(amdsmi, function, None)
        if fn is None:
            raise ZeusNotSupportedError(
                f"GPU {self.index}: {call} needs amdsmi.{function}, which this amdsmi lacks. "
                "Upgrade ROCm and amdsmi."
            )
        try:
            return fn(self._handle, *args)
        except amdsmi.AmdSmiException as e:
            raise _translate(e, f"GPU {self.index}: {call}") from e

    # -- identity -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Product name as the driver reports it, e.g. ``"AMD Instinct MI300X"``."""
        if self._name is None:
            self._name = str(self._call("name", "amdsmi_get_gpu_asic_info")["market_name"])
        return self._name

    @property
    def uuid(self) -> str:
        """Unique identifier as the driver reports it."""
        if self._uuid is None:
            raw = str(self._call("uuid", "amdsmi_get_gpu_device_uuid"))
            self._uuid = raw if raw.upper().startswith("GPU-") else f"GPU-{raw}"
        return self._uuid

    # -- power cap ------------------------------------------------------------------------------
    def _cap_info(self, call: str) -> dict[str, Any]:
        return self._call(call, "amdsmi_get_power_cap_info")

    def power_limit_constraints(self) -> PowerLimitConstraints:
        """Min, max and default power cap, W."""
        info = self._cap_info("power_limit_constraints()")
        return PowerLimitConstraints(
            info["min_power_cap"] / 1e6, info["max_power_cap"] / 1e6, info["default_power_cap"] / 1e6
        )

    def get_power_limit(self) -> float:
        """Current power cap, W."""
        return self._cap_info("get_power_limit()")["power_cap"] / 1e6

    def set_power_limit(self, watts: float) -> None:
        """Set the power cap, W; does nothing when it is already ``watts``.

        Raises:
            ZeusConfigError: ``watts`` is outside :meth:`power_limit_constraints`.
            ZeusPermissionError: The process may not change the cap (message says how to).
        """
        call = f"set_power_limit({watts})"
        info = self._cap_info(call)
        target_uw = int(round(watts * 1e6))
        if int(info["power_cap"]) == target_uw:
            return
        if not info["min_power_cap"] <= target_uw <= info["max_power_cap"]:
            raise ZeusConfigError(
                f"{call} on GPU {self.index} ({self.name}): outside the allowed range "
                f"{info['min_power_cap'] / 1e6:g}-{info['max_power_cap'] / 1e6:g} W. "
                "Pick a limit in that range."
            )
        self._call(call, "amdsmi_set_power_cap", 0, target_uw)

    def check_control_permission(self) -> None:
        """Verify, without writing anything, that this process may set caps and clocks.

        The cap must be readable, and the process must hold ``CAP_SYS_ADMIN`` (root):
        :func:`~zeus_core.device._privileges.has_admin_rights`.

        Raises:
            ZeusPermissionError: No permission; the message says how to get it.
        """
        call = "check_control_permission()"
        self._cap_info(call)
        if not privileges.has_admin_rights():
            raise ZeusPermissionError(
                f"GPU {self.index}: {call}: this process lacks admin rights. {AMD_PERMISSION_FIX}"
            )

    def check_control_by_writing(self) -> None:
        """Verify that this process may set caps by re-writing the current cap through amdsmi (a write).

        Raises:
            ZeusPermissionError: No permission; the message says how to get it.
        """
        current = int(self._cap_info("check_control_by_writing()")["power_cap"])
        self._call("check_control_by_writing()", "amdsmi_set_power_cap", 0, current)

    # -- clocks ---------------------------------------------------------------------------------
    def _frequencies_mhz(self, call: str, clk_type: Any) -> list[int]:
        freq = self._call(call, "amdsmi_get_clk_freq", clk_type)
        hz = list(freq["frequency"])[: int(freq["num_supported"])]
        return sorted({int(round(f / 1e6)) for f in hz}, reverse=True)

    def supported_memory_frequencies(self) -> list[int]:
        """Supported memory clocks, MHz, highest first."""
        return self._frequencies_mhz("supported_memory_frequencies()", self._amdsmi.AmdSmiClkType.MEM)

    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """Supported graphics (SM) clocks, MHz, highest first (amdsmi: the same at every memory clock)."""
        call = f"supported_sm_frequencies({memory_mhz})"
        return self._frequencies_mhz(call, self._amdsmi.AmdSmiClkType.GFX)

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz (``max_mhz`` defaults to ``min_mhz``)."""
        upper = min_mhz if max_mhz is None else max_mhz
        call = f"set_locked_sm_frequency({min_mhz}, {max_mhz})"
        if upper < min_mhz:
            raise ZeusConfigError(f"{call} on GPU {self.index}: max_mhz must be >= min_mhz.")
        self._call(call, "amdsmi_set_gpu_clk_range", int(min_mhz), int(upper), self._amdsmi.AmdSmiClkType.GFX)

    def reset_locked_sm_frequency(self) -> None:
        """Unlock the graphics clock: its range goes back to every supported clock, lowest to highest."""
        clocks = self.supported_sm_frequencies()
        if not clocks:
            raise ZeusNotSupportedError(f"GPU {self.index}: amdsmi lists no graphics clocks to reset to.")
        self._call(
            "reset_locked_sm_frequency()",
            "amdsmi_set_gpu_clk_range",
            clocks[-1],
            clocks[0],
            self._amdsmi.AmdSmiClkType.GFX,
        )

    # -- energy and power -----------------------------------------------------------------------
    @property
    def has_energy_counter(self) -> bool:
        """Whether amdsmi's energy accumulator answers on this GPU."""
        if self._has_counter is None:
            try:
                self.get_total_energy()
                self._has_counter = True
            except ZeusNotSupportedError:
                self._has_counter = False
        return self._has_counter

    def get_total_energy(self) -> float:
        """Energy since the driver loaded, J (accumulator x resolution, µJ).

        Raises:
            ZeusNotSupportedError: The GPU has no energy accumulator.
        """
        try:
            reading = self._read_energy(self._handle)
        except self._amdsmi.AmdSmiException as e:
            raise _translate(e, f"GPU {self.index}: get_total_energy()") from e
        ticks = reading.get("energy_accumulator")
        if ticks is None:  # amdsmi before 6.2.1 called it "power"
            ticks = reading["power"]
        return ticks * reading["counter_resolution"] / 1e6

    def get_power(self) -> float:
        """Current socket power, W (the average where the GPU reports no current value)."""
        info = self._call("get_power()", "amdsmi_get_power_info")
        for key in ("current_socket_power", "average_socket_power"):
            value = info.get(key)
            if isinstance(value, (int, float)) and value not in (0, 0xFFFF):
                return float(value)
        raise ZeusNotSupportedError(
            f"GPU {self.index}: get_power(): amdsmi reports no socket power ({info})."
        )

    def describe(self) -> str:
        """One line, e.g. ``"GPU 0: AMD Instinct MI300X (HIP 2)"`` when visibility remaps it."""
        remap = f" (HIP {self.hip_index})" if self.hip_index != self.index else ""
        return f"GPU {self.index}: {self.name}{remap}"


def probe_amd(environ: Mapping[str, str] | None = None) -> tuple[list[AMDGPU], Unavailable | None]:
    """The visible AMD GPUs, or ``[]`` and why there are none.

    Raises:
        ZeusConfigError: ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` is malformed.
        ZeusDeviceNotFoundError: It names a GPU this machine lacks.
    """
    env = os.environ if environ is None else environ
    try:
        amdsmi = _amdsmi()
    except _AmdUnavailable as e:
        return [], e.why
    handles = _handles_by_hip_id(amdsmi)
    variable = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES"
    spec = env.get(variable)
    count = len(handles)
    if spec is None:
        hip_indices = sorted(handles)
    else:

        def uuids() -> list[str]:
            return [AMDGPU(i, i).uuid for i in range(count)]

        hip_indices = parse_visible_devices(spec, count, uuids, variable)
        if not hip_indices:
            return [], Unavailable(
                "AMD GPUs",
                f"{variable}={spec!r} hides all {count} AMD GPU(s).",
                f"unset {variable}, or list the GPUs to use (e.g. {variable}=0,1).",
            )
    if not hip_indices:
        return [], Unavailable("AMD GPUs", "amdsmi is working but reports no GPUs.", "check `amd-smi list`.")
    return [AMDGPU(i, h) for i, h in enumerate(hip_indices)], None


def amd_gpus(environ: Mapping[str, str] | None = None) -> list[AMDGPU]:
    """The AMD GPUs this process sees, indexed like ``cuda:<i>``; ``[]`` without amdsmi/ROCm.

    Raises:
        ZeusConfigError: ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` is malformed.
        ZeusDeviceNotFoundError: It names a GPU this machine lacks.
    """
    gpus, why = probe_amd(environ)
    if why is not None:
        logger.info("No AMD GPUs: %s", why.describe())
    return gpus
