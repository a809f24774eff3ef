"""A fake of the ``amdsmi`` Python API (ROCm 6.2+) for tests without an AMD GPU or ROCm.

:class:`FakeAMDSMI` is a module object for ``sys.modules["amdsmi"]`` with the names Zeus Suite
calls, in amdsmi's units and shapes: power caps in µW (``amdsmi_get_power_cap_info``), socket
power in W (``amdsmi_get_power_info``, ``"N/A"`` where not reported), energy as an accumulator
times a resolution in µJ (``amdsmi_get_energy_count``), clock tables in Hz
(``amdsmi_get_clk_freq``), clock ranges set in MHz. Errors are ``AmdSmiLibraryException`` with
the real ``amdsmi_status_t`` codes: ``NO_PERM`` (10) on setters without root, ``INVAL`` (1) for
out-of-range values, ``NOT_SUPPORTED`` (2) for a GPU without an energy accumulator.

Example:
    >>> fake = FakeAMDSMI([FakeAMDSpec.mi300x()])
    >>> with fake.install():
    ...     from zeus_core.device._amd import amd_gpus
    ...     [g.name for g in amd_gpus(environ={})]
    ['AMD Instinct MI300X']
"""

from __future__ import annotations

import sys
import time
import types
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterator, Sequence

__all__ = ["FakeAMDSpec", "FakeAMDSMI", "AmdSmiException", "AmdSmiLibraryException"]

STATUS_INVAL = 1
STATUS_NOT_SUPPORTED = 2
STATUS_NO_PERM = 10
STATUS_NOT_INIT = 32
STATUS_DRIVER_NOT_LOADED = 34
_INFO = {
    STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
    STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
    STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
}


class AmdSmiException(Exception):
    """Base of amdsmi's exceptions."""


class AmdSmiLibraryException(AmdSmiException):
    """An error status from libamd_smi, as amdsmi raises it."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _INFO.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_code(self) -> int:
        """The ``amdsmi_status_t`` code."""
        return self.err_code

    def get_error_info(self, detailed: bool = True) -> str:
        """The code's description."""
        return self.err_info if detailed else self.err_info.split(" - ")[0]


class AmdSmiInitFlags(IntEnum):
    """``amdsmi_init`` flags."""

    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1


class AmdSmiClkType(IntEnum):
    """Clock domains (``SYS`` and ``GFX`` are the same domain)."""

    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4


@dataclass
class FakeAMDSpec:
    """One fake AMD GPU.

    Attributes:
        name: ASIC market name.
        min_cap_w / max_cap_w / default_cap_w: Power-cap range, W.
        power_w: Draw before the cap, W.
        resolution_uj: Energy accumulator resolution, µJ per tick.
        has_energy: Whether the accumulator is supported.
        reports_current_power: Whether ``current_socket_power`` is reported (else ``"N/A"``).
        gfx_clocks_mhz / mem_clocks_mhz: Clock tables, MHz.
        uuid: Device UUID (without ``GPU-``).
    """

    name: str = "AMD Instinct MI300X"
    min_cap_w: float = 200.0
    max_cap_w: float = 750.0
    default_cap_w: float = 750.0
    power_w: float = 600.0
    resolution_uj: float = 15.259
    has_energy: bool = True
    reports_current_power: bool = True
    gfx_clocks_mhz: list[int] = field(default_factory=lambda: [2100, 1700, 1300, 900, 500])
    mem_clocks_mhz: list[int] = field(default_factory=lambda: [1300, 900])
    uuid: str | None = None

    @classmethod
    def mi300x(cls, **kw: Any) -> "FakeAMDSpec":
        """AMD Instinct MI300X."""
        return cls(**kw)

    @classmethod
    def mi250x(cls, **kw: Any) -> "FakeAMDSpec":
        """AMD Instinct MI250X (reports average socket power only)."""
        base = dict(
            name="AMD Instinct MI250X",
            min_cap_w=100.0,
            max_cap_w=560.0,
            default_cap_w=560.0,
            power_w=400.0,
            reports_current_power=False,
            gfx_clocks_mhz=[1700, 1400, 1000, 500],
        )
        return cls(**{**base, **kw})


class FakeAMDDevice:
    """State of one fake AMD GPU; also the processor handle."""

    def __init__(self, spec: FakeAMDSpec, hip_id: int, now: float) -> None:
        self.spec = spec
        self.hip_id = hip_id
        self.uuid = spec.uuid or f"{hip_id:08x}-0000-1000-80e3-b2a0fa8e5a2f"
        self.cap_uw = int(spec.default_cap_w * 1e6)
        self.energy_uj = 5e9
        self.gfx_range: tuple[int, int] | None = None
        self._last = now

    def draw_w(self) -> float:
        """Draw, W: ``power_w`` capped by the power cap."""
        return min(self.spec.power_w, self.cap_uw / 1e6)

    def accumulate(self, now: float) -> None:
        """Advance the energy counter to ``now``."""
        self.energy_uj += self.draw_w() * (now - self._last) * 1e6
        self._last = now


class FakeAMDSMI(types.ModuleType):
    """A fake ``amdsmi`` module.

    Args:
        gpus: Fake GPUs, in amd-smi (PCI) order.
        hip_order: HIP index of each GPU (default: the same order).
        clock: Time source for energy counters, s.
        root: Whether setters are permitted.
        driver_loaded: ``False``: ``amdsmi_init`` fails with ``DRIVER_NOT_LOADED``.

    Attributes:
        devices: Device states (also the handles), in amd-smi order.
        calls: Calls per function name.
    """

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiClkType = AmdSmiClkType

    def __init__(
        self,
        gpus: Sequence[FakeAMDSpec] = (),
        *,
        hip_order: Sequence[int] | None = None,
        clock: Callable[[], float] = time.time,
        root: bool = True,
        driver_loaded: bool = True,
    ) -> None:
        super().__init__("amdsmi", "Fake amdsmi (tests/fakes/fake_amdsmi.py)")
        self.clock = clock
        self.root = root
        self.driver_loaded = driver_loaded
        order = list(range(len(gpus))) if hip_order is None else list(hip_order)
        now = clock()
        self.devices = [FakeAMDDevice(spec, order[i], now) for i, spec in enumerate(gpus)]
        self.calls: defaultdict[str, int] = defaultdict(int)
        self.initialized = False

    @contextmanager
    def install(self) -> Iterator["FakeAMDSMI"]:
        """Make ``import amdsmi`` return this fake inside the ``with`` block."""
        saved = sys.modules.get("amdsmi")
        sys.modules["amdsmi"] = self
        try:
            yield self
        finally:
            if saved is None:
                sys.modules.pop("amdsmi", None)
            else:
                sys.modules["amdsmi"] = saved

    def patch(self, monkeypatch: Any) -> "FakeAMDSMI":
        """Install with pytest's ``monkeypatch``."""
        monkeypatch.setitem(sys.modules, "amdsmi", self)
        return self

    def _dev(self, handle: Any) -> FakeAMDDevice:
        if not self.initialized:
            raise AmdSmiLibraryException(STATUS_NOT_INIT)
        if handle not in self.devices:
            raise AmdSmiLibraryException(STATUS_INVAL)
        return handle

    def _require_root(self) -> None:
        if not self.root:
            raise AmdSmiLibraryException(STATUS_NO_PERM)

    def amdsmi_init(self, flag: int = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        self.calls["amdsmi_init"] += 1
        if not self.driver_loaded:
            raise AmdSmiLibraryException(STATUS_DRIVER_NOT_LOADED)
        self.initialized = True

    def amdsmi_shut_down(self) -> None:
        self.calls["amdsmi_shut_down"] += 1
        self.initialized = False

    def amdsmi_get_processor_handles(self) -> list[FakeAMDDevice]:
        self.calls["amdsmi_get_processor_handles"] += 1
        if not self.initialized:
            raise AmdSmiLibraryException(STATUS_NOT_INIT)
        return list(self.devices)

    def amdsmi_get_gpu_enumeration_info(self, handle: Any) -> dict[str, Any]:
        self.calls["amdsmi_get_gpu_enumeration_info"] += 1
        dev = self._dev(handle)
        return {
            "drm_render": 128 + dev.hip_id,
            "drm_card": dev.hip_id,
            "hsa_id": dev.hip_id + 1,
            "hip_id": dev.hip_id,
            "hip_uuid": f"GPU-{dev.uuid[:16]}",
        }

    def amdsmi_get_gpu_device_uuid(self, handle: Any) -> str:
        self.calls["amdsmi_get_gpu_device_uuid"] += 1
        return self._dev(handle).uuid

    def amdsmi_get_gpu_asic_info(self, handle: Any) -> dict[str, Any]:
        self.calls["amdsmi_get_gpu_asic_info"] += 1
        return {"market_name": self._dev(handle).spec.name, "vendor_id": "0x1002", "vendor_name": "AMD"}

    def amdsmi_get_power_cap_info(self, handle: Any) -> dict[str, int]:
        self.calls["amdsmi_get_power_cap_info"] += 1
        dev = self._dev(handle)
        s = dev.spec
        return {
            "power_cap": dev.cap_uw,
            "default_power_cap": int(s.default_cap_w * 1e6),
            "dpm_cap": 0,
            "min_power_cap": int(s.min_cap_w * 1e6),
            "max_power_cap": int(s.max_cap_w * 1e6),
        }

    def amdsmi_set_power_cap(self, handle: Any, sensor_ind: int, cap: int) -> None:
        self.calls["amdsmi_set_power_cap"] += 1
        dev = self._dev(handle)
        self._require_root()
        if not isinstance(cap, int) or not dev.spec.min_cap_w * 1e6 <= cap <= dev.spec.max_cap_w * 1e6:
            raise AmdSmiLibraryException(STATUS_INVAL)
        dev.accumulate(self.clock())
        dev.cap_uw = cap

    def amdsmi_get_power_info(self, handle: Any) -> dict[str, Any]:
        self.calls["amdsmi_get_power_info"] += 1
        dev = self._dev(handle)
        w = int(round(dev.draw_w()))
        return {
            "socket_power": w,
            "current_socket_power": w if dev.spec.reports_current_power else "N/A",
            "average_socket_power": w,
            "gfx_voltage": 800,
            "soc_voltage": 900,
            "mem_voltage": 1100,
            "power_limit": dev.cap_uw // 1_000_000,
        }

    def amdsmi_get_energy_count(self, handle: Any) -> dict[str, Any]:
        self.calls["amdsmi_get_energy_count"] += 1
        dev = self._dev(handle)
        if not dev.spec.has_energy:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)
        dev.accumulate(self.clock())
        return {
            "energy_accumulator": int(dev.energy_uj / dev.spec.resolution_uj),
            "counter_resolution": dev.spec.resolution_uj,
            "timestamp": int(self.clock() * 1e9),
        }

    def amdsmi_get_clk_freq(self, handle: Any, clk_type: AmdSmiClkType) -> dict[str, Any]:
        self.calls["amdsmi_get_clk_freq"] += 1
        dev = self._dev(handle)
        if not isinstance(clk_type, AmdSmiClkType):
            raise AmdSmiException(f"bad clk_type {clk_type!r}")
        mhz = dev.spec.mem_clocks_mhz if clk_type == AmdSmiClkType.MEM else dev.spec.gfx_clocks_mhz
        ascending = sorted(mhz)
        return {
            "num_supported": len(ascending),
            "current": len(ascending) - 1,
            "frequency": [f * 1_000_000 for f in ascending] + [0] * (33 - len(ascending)),
        }

    def amdsmi_set_gpu_clk_range(
        self, handle: Any, min_clk_value: int, max_clk_value: int, clk_type: AmdSmiClkType
    ) -> None:
        self.calls["amdsmi_set_gpu_clk_range"] += 1
        dev = self._dev(handle)
        self._require_root()
        clocks = dev.spec.gfx_clocks_mhz
        if clk_type != AmdSmiClkType.GFX or not min(clocks) <= min_clk_value <= max_clk_value <= max(clocks):
            raise AmdSmiLibraryException(STATUS_INVAL)
        dev.gfx_range = (min_clk_value, max_clk_value)
