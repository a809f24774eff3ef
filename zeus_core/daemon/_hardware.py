"""The devices the daemon serves, in zeusd's units (mW, mJ, µJ, MHz), each GPU with its own worker thread.

GPUs are found with :func:`zeus_core.device._discovery.get_gpus` ignoring ``CUDA_VISIBLE_DEVICES`` (the
daemon serves every GPU; ids are NVML's indices, as zeusd's), and CPUs with ``get_cpus``. Every
GPU call runs on that GPU's single worker thread (zeusd has one task per GPU): calls to one GPU are
serialized, calls to different GPUs run in parallel, and the event loop never waits on a driver.

Memory clocks, persistence mode and the PCI address are NVML features the device layer does not
offer; they are reached through the NVIDIA backend's own translated call (``_call``) and are
400 (not supported) on other GPUs.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, TypeVar

from zeus_core.daemon._config import ApiGroup, Knob
from zeus_core.daemon._policy import Value
from zeus_core.device._base import CPU, GPU
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)

__all__ = ["ManagedGpu", "ManagedCpu", "Hardware", "status_of", "show_value"]

T = TypeVar("T")
_VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
_NVML_ENABLED = 1


def status_of(error: BaseException) -> int:
    """Zeusd's HTTP status for a device error: 403 no permission, 400 bad argument or unsupported, 500."""
    if isinstance(error, ZeusPermissionError):
        return 403
    if isinstance(error, (ZeusConfigError, ZeusNotSupportedError)):
        return 400
    return 500


def show_value(knob: Knob, value: Value) -> str:
    """A value in words for logs and messages, e.g. ``"150000 mW"`` or ``"unlocked"``."""
    if knob is Knob.POWER_LIMIT:
        return f"{value} mW"
    if knob is Knob.PERSISTENCE_MODE:
        return "enabled" if value else "disabled"
    return "unlocked" if value is None else f"{value[0]}-{value[1]} MHz"


def _nvml(gpu: GPU, call: str, function: str, *args: Any) -> Any:
    backend_call = getattr(gpu, "_call", None)
    if backend_call is None:
        raise ZeusNotSupportedError(
            f"GPU {gpu.index}: {call} is an NVML feature; this is a {gpu.vendor} GPU."
        )
    return backend_call(call, function, *args)


class ManagedGpu:
    """One GPU the daemon serves: identity, constraints (read once) and every call in its units.

    Args:
        gpu_id: The id clients use (NVML's index).
        gpu: The device-layer GPU.
    """

    def __init__(self, gpu_id: int, gpu: GPU) -> None:
        self.id = gpu_id
        self.gpu = gpu
        self.name = gpu.name
        self.pci_address = self._pci_address()
        try:
            self.cumulative_energy_available = bool(gpu.has_energy_counter)
        except ZeusError:
            self.cumulative_energy_available = False
        self.limits_mw: tuple[int, int] | None = None
        self._limits_error = ""
        try:
            c = gpu.power_limit_constraints()
            self.limits_mw = (int(round(c.min_w * 1000)), int(round(c.max_w * 1000)))
        except ZeusError as e:  # served all the same; its power limit cannot be set (zeusd: 400)
            self._limits_error = str(e)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zeusd-gpu{gpu_id}")

    def _pci_address(self) -> str:
        try:
            info = _nvml(self.gpu, "pci_address", "nvmlDeviceGetPciInfo")
        except ZeusError:
            return ""
        bus = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
        domain, _, rest = bus.partition(":")
        return f"{int(domain, 16):04x}:{rest.lower()}" if rest else bus

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on this GPU's worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args))

    def close(self) -> None:
        """Stop the worker thread (after the calls queued so far)."""
        self._executor.shutdown(wait=True)

    # -- readings (run on the worker) -----------------------------------------------------------
    def constraints_mw(self) -> tuple[int, int]:
        """The settable power-limit range ``(min, max)``, mW.

        Raises:
            ZeusNotSupportedError: The GPU reports no range (its limit cannot be set).
        """
        if self.limits_mw is None:
            raise ZeusNotSupportedError(f"GPU {self.id} has no settable power limit ({self._limits_error}).")
        return self.limits_mw

    def power_limit_mw(self) -> int:
        """Current power limit, mW."""
        return int(round(self.gpu.get_power_limit() * 1000))

    def power_mw(self) -> int:
        """Power draw, mW."""
        return int(round(self.gpu.get_power() * 1000))

    def energy_mj(self) -> int:
        """The energy counter, mJ.

        Raises:
            ZeusNotSupportedError: No counter (zeusd answers 400).
        """
        if not self.cumulative_energy_available:
            raise ZeusNotSupportedError(
                f"GPU {self.id} has no trustworthy cumulative energy counter (pre-Volta)."
            )
        return int(round(self.gpu.get_total_energy() * 1000))

    def persistence_mode(self) -> bool:
        """Whether persistence mode is on (NVML only)."""
        mode = _nvml(self.gpu, "get_persistence_mode()", "nvmlDeviceGetPersistenceMode")
        return bool(mode == _NVML_ENABLED)

    def read(self, knob: Knob) -> tuple[Value, bool]:
        """The current value of ``knob`` and whether the device could report it.

        Locked clocks cannot be read through NVML: ``(None, False)``, i.e. restored by a reset.
        """
        if knob is Knob.POWER_LIMIT:
            return self.power_limit_mw(), True
        if knob is Knob.PERSISTENCE_MODE:
            return self.persistence_mode(), True
        if knob is Knob.GPU_LOCKED_CLOCKS:
            try:
                return self.gpu.get_locked_sm_frequency(), True
            except ZeusNotSupportedError:
                return None, False
        return None, False

    # -- writes (run on the worker) -------------------------------------------------------------
    def check(self, knob: Knob, value: Value) -> None:
        """Refuse a value the GPU cannot take, before anything changes.

        Raises:
            ZeusConfigError: Out of the power-limit range, or min above max.
            ZeusNotSupportedError: The GPU's power limit cannot be set.
        """
        if knob is Knob.POWER_LIMIT:
            low, high = self.constraints_mw()
            if not low <= value <= high:
                raise ZeusConfigError(
                    f"power_limit_mw={value} is outside GPU {self.id}'s range {low}-{high} mW "
                    f"({self.name}). Pick a limit in that range."
                )
        if (
            knob in (Knob.GPU_LOCKED_CLOCKS, Knob.MEM_LOCKED_CLOCKS)
            and value is not None
            and value[0] > value[1]
        ):
            raise ZeusConfigError(
                f"min_clock_mhz={value[0]} is above max_clock_mhz={value[1]}. Give min <= max."
            )

    def write(self, knob: Knob, value: Value) -> None:
        """Set ``knob`` to ``value`` (locked clocks ``None``: reset them)."""
        gpu = self.gpu
        if knob is Knob.POWER_LIMIT:
            gpu.set_power_limit(value / 1000.0)
        elif knob is Knob.GPU_LOCKED_CLOCKS:
            if value is None:
                gpu.reset_locked_sm_frequency()
            else:
                gpu.set_locked_sm_frequency(int(value[0]), int(value[1]))
        elif knob is Knob.MEM_LOCKED_CLOCKS:
            if value is None:
                _nvml(gpu, "reset_mem_locked_clocks()", "nvmlDeviceResetMemoryLockedClocks")
            else:
                _nvml(
                    gpu,
                    "set_mem_locked_clocks()",
                    "nvmlDeviceSetMemoryLockedClocks",
                    int(value[0]),
                    int(value[1]),
                )
        else:
            _nvml(
                gpu, "set_persistence_mode()", "nvmlDeviceSetPersistenceMode", _NVML_ENABLED if value else 0
            )


@dataclass
class ManagedCpu:
    """One CPU package the daemon serves (RAPL), in µJ."""

    id: int
    cpu: CPU

    @property
    def dram_available(self) -> bool:
        """Whether the package's DRAM is metered."""
        return self.cpu.has_dram

    def energy_uj(self, cpu: bool = True, dram: bool = True) -> dict[str, int | None]:
        """``{"cpu_energy_uj", "dram_energy_uj"}`` (``None`` where not asked or not metered)."""
        energy = self.cpu.get_energy()
        return {
            "cpu_energy_uj": int(energy.cpu_j * 1e6) if cpu else None,
            "dram_energy_uj": int(energy.dram_j * 1e6) if dram and energy.dram_j is not None else None,
        }


class Hardware:
    """Every device the daemon serves.

    Args:
        gpus: GPUs by id (NVML index).
        cpus: CPU packages by id.
    """

    def __init__(self, gpus: list[ManagedGpu], cpus: list[ManagedCpu]) -> None:
        self.gpus = gpus
        self.cpus = cpus
        self._cpu_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zeusd-cpu")

    @classmethod
    def discover(
        cls, enabled: frozenset[ApiGroup], rapl_root: str, environ: Mapping[str, str] | None = None
    ) -> "Hardware":
        """Find the GPUs (when a GPU group is enabled) and CPUs (when ``cpu-read`` is).

        Raises:
            ZeusError: A device could not be opened.
        """
        from zeus_core.device._discovery import get_cpus, get_gpus

        env = {k: v for k, v in (os.environ if environ is None else environ).items()}
        for name in (*_VISIBILITY, "ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT"):  # all GPUs; never via a daemon
            env.pop(name, None)
        gpus: list[ManagedGpu] = []
        if enabled & {ApiGroup.GPU_CONTROL, ApiGroup.GPU_READ}:
            gpus = [ManagedGpu(getattr(g, "nvml_index", g.index), g) for g in get_gpus(env)]
        cpus = [ManagedCpu(c.index, c) for c in get_cpus(rapl_root)] if ApiGroup.CPU_READ in enabled else []
        return cls(gpus, cpus)

    async def cpu_call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the CPU worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._cpu_executor, partial(fn, *args))

    def close(self) -> None:
        """Stop every worker thread."""
        for gpu in self.gpus:
            gpu.close()
        self._cpu_executor.shutdown(wait=True)
        for cpu in self.cpus:
            close = getattr(cpu.cpu, "close", None)
            if callable(close):
                close()
