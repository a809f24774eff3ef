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
import os
import sys
import threading
from types import ModuleType
from typing import Any, Mapping

from zeus_core.device._base import PowerLimitConstraints
from zeus_core.device._registry import Unavailable
from zeus_core.device._vendor import (
    VendorGPU,
    VendorLibrary,
    VendorUnavailable,
    found_or_logged,
    select_visible,
)
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusNotSupportedError

__all__ = ["AMDGPU", "amd_gpus", "probe_amd", "AMD_PERMISSION_FIX"]


AMD_PERMISSION_FIX = (
    "Changing power caps or clocks needs admin rights: run as root, or have an administrator set "
    "them (`sudo amd-smi set -g <gpu> -o <watts>`) and only measure from this process."
)
"""How to get the permission amdsmi asks for when setting power caps or clocks."""

_lock = threading.Lock()
_initialized: Any = None  # the amdsmi module object that amdsmi_init() succeeded on
_import_failure: Unavailable | None = None  # why importing the real amdsmi failed (not retried)


def _code_of(err: Exception) -> int | None:
    get_code = getattr(err, "get_error_code", None)
    return get_code() if callable(get_code) else None


AMDSMI = VendorLibrary(
    devices="AMD GPUs",
    health_check="amd-smi list",
    module="amdsmi",
    upgrade="Upgrade ROCm and amdsmi.",
    error_class="AmdSmiException",
    code_of=_code_of,
    permission_fix=AMD_PERMISSION_FIX,
    # amdsmi_status_t codes (amdsmi.h)
    no_permission=(10,),  # NO_PERM
    not_supported=(2, 3),  # NOT_SUPPORTED, NOT_YET_IMPLEMENTED
    bad_argument=(1, 17, 31),  # INVAL, INPUT_OUT_OF_BOUNDS, NOT_FOUND
    failure_hint="Check that `amd-smi list` works.",
    index_label="HIP",
)
"""amdsmi's error codes and their fixes (see :class:`~zeus_core.device._vendor.VendorLibrary`)."""
_translate = AMDSMI.translate


def _import_amdsmi() -> ModuleType:
    global _import_failure
    module = sys.modules.get("amdsmi")
    if module is not None:
        return module
    if _import_failure is not None:
        raise VendorUnavailable(_import_failure)
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
    raise VendorUnavailable(_import_failure)


def _amdsmi() -> ModuleType:
    """``amdsmi``, initialised for GPUs (once per module object).

    Raises:
        VendorUnavailable: amdsmi is missing, cannot load ROCm, or failed to initialise.
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
                raise VendorUnavailable(
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


class AMDGPU(VendorGPU):
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
    library = AMDSMI

    def __init__(self, index: int, hip_index: int | None = None) -> None:
        hip_index = index if hip_index is None else hip_index
        amdsmi = _amdsmi()
        handles = _handles_by_hip_id(amdsmi)
        if hip_index not in handles:
            raise ZeusDeviceNotFoundError(
                f"AMDGPU({index}, hip_index={hip_index}): no such AMD GPU (HIP indices: "
                f"{sorted(handles)}). Use amd_gpus() to get the visible GPUs."
            )
        super().__init__(index, hip_index, amdsmi, handles[hip_index])
        self._read_energy = amdsmi.amdsmi_get_energy_count
        self._name: str | None = None
        self._uuid: str | None = None
        self._has_counter: bool | None = None

    @property
    def hip_index(self) -> int:
        """HIP's index of this GPU (what PyTorch on ROCm calls ``cuda:<hip_index>``)."""
        return self.backend_index

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
        self._require_admin_rights(call)

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
        return self._frequencies_mhz("supported_memory_frequencies()", self._module.AmdSmiClkType.MEM)

    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """Supported graphics (SM) clocks, MHz, highest first (amdsmi: the same at every memory clock)."""
        call = f"supported_sm_frequencies({memory_mhz})"
        return self._frequencies_mhz(call, self._module.AmdSmiClkType.GFX)

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz (``max_mhz`` defaults to ``min_mhz``)."""
        call = f"set_locked_sm_frequency({min_mhz}, {max_mhz})"
        lower, upper = self._clock_range(call, min_mhz, max_mhz)
        self._call(call, "amdsmi_set_gpu_clk_range", lower, upper, self._module.AmdSmiClkType.GFX)

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
            self._module.AmdSmiClkType.GFX,
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
        except self._module.AmdSmiException as e:
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


def probe_amd(environ: Mapping[str, str] | None = None) -> tuple[list[AMDGPU], Unavailable | None]:
    """The visible AMD GPUs, or ``[]`` and why there are none.

    Raises:
        ZeusConfigError: ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` is malformed.
        ZeusDeviceNotFoundError: It names a GPU this machine lacks.
    """
    env = os.environ if environ is None else environ
    try:
        amdsmi = _amdsmi()
    except VendorUnavailable as e:
        return [], e.why
    handles = _handles_by_hip_id(amdsmi)
    variable = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES"

    def uuids() -> list[str]:
        return [AMDGPU(i, i).uuid for i in range(len(handles))]

    return select_visible(AMDSMI, variable, env, sorted(handles), uuids, AMDGPU)


def amd_gpus(environ: Mapping[str, str] | None = None) -> list[AMDGPU]:
    """The AMD GPUs this process sees, indexed like ``cuda:<i>``; ``[]`` without amdsmi/ROCm.

    Raises:
        ZeusConfigError: ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` is malformed.
        ZeusDeviceNotFoundError: It names a GPU this machine lacks.
    """
    return found_or_logged(probe_amd(environ))
