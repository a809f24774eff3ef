"""The one hardware interface that everything above ``zeus_core.device`` talks to.

Units everywhere: watts (W), joules (J), seconds (s), megahertz (MHz). Backends convert
from their vendor's units (mW, mJ, µJ) at their boundary and nowhere else.

Device indices are the ones the user sees: GPU ``0`` is the first GPU in
``CUDA_VISIBLE_DEVICES`` (or ``HIP_VISIBLE_DEVICES``), the same device as ``cuda:0`` in PyTorch.

:class:`Device` is what every device reports (index, kind, vendor, name, whether it is simulated,
whether it has an energy counter and a power reading); :class:`GPU` and :class:`CPU` are its two
kinds. This module imports nothing from ``zeus_core``: every other device module stands on it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Literal

from zeus_core.exceptions import ZeusNotSupportedError

__all__ = [
    "Clock",
    "DeviceKind",
    "Device",
    "PowerLimitConstraints",
    "ClockEventReasons",
    "GPU",
    "CpuEnergy",
    "CPU",
    "wall_clock",
]

Clock = Callable[[], float]
"""A function returning the current time in seconds."""

wall_clock: Clock = time.time
"""The default clock: wall-clock seconds since the epoch (comparable across processes)."""


DeviceKind = Literal["gpu", "cpu"]
"""The kinds of device: a GPU, or a CPU package (with its DRAM).

Example:
    >>> from zeus_core.testing import simulated_gpu
    >>> simulated_gpu("a40").kind
    'gpu'
"""


class Device(ABC):
    """What every device can report, whatever its kind and vendor.

    Attributes:
        index: The index the user sees (``cuda:<index>`` for GPUs, the package number for CPUs).
        kind: ``"gpu"`` or ``"cpu"`` (set by :class:`GPU` and :class:`CPU`).
        vendor: Who makes or backs it, e.g. ``"nvidia"``, ``"amd"``, ``"rapl"``, ``"simulated"``.

    Example:
        >>> from zeus_core.device import get_gpus
        >>> for device in get_gpus({"ZEUS_SUITE_SIMULATE": "1"}):
        ...     print(device.kind, device.vendor, device.simulated, device.has_energy_counter)
        gpu simulated True True
    """

    kind: ClassVar[DeviceKind]
    vendor: str = "unknown"

    def __init__(self, index: int) -> None:
        self.index = index

    @property
    def simulated(self) -> bool:
        """Whether this device is simulated rather than real hardware."""
        return False

    @property
    @abstractmethod
    def name(self) -> str:
        """Product or domain name, e.g. ``"NVIDIA A40"`` or ``"package-0"``."""

    @property
    @abstractmethod
    def has_energy_counter(self) -> bool:
        """Whether the device's energy is read from a hardware counter (else integrated from power)."""

    @property
    @abstractmethod
    def has_power_reading(self) -> bool:
        """Whether the device reports its instantaneous power draw, W."""

    @abstractmethod
    def describe(self) -> str:
        """One line naming the device, e.g. ``"GPU 0: NVIDIA A40 (simulated)"``."""


@dataclass(frozen=True)
class PowerLimitConstraints:
    """Power-limit range of a GPU.

    Attributes:
        min_w: Lowest settable power limit, W.
        max_w: Highest settable power limit, W.
        default_w: The limit the GPU boots with, W.

    Example:
        >>> from zeus_core.testing import simulated_gpu
        >>> simulated_gpu("h100").power_limit_constraints()
        PowerLimitConstraints(min_w=200.0, max_w=700.0, default_w=700.0)
    """

    min_w: float
    max_w: float
    default_w: float


@dataclass(frozen=True)
class ClockEventReasons:
    """Why a GPU's clocks are below their maximum right now (NVML's clock-event, formerly throttle, reasons).

    Held as NVML's bit mask (the ``nvmlClocksEventReason*`` values, the same on every driver).
    A power cap (``sw_power_cap``) is what a power limit is meant to do; thermal and hardware
    slowdowns are not, and make energy measurements of that moment unrepresentative.

    Attributes:
        mask: NVML's bit mask (``0``: running at full clocks, or idle without a reason).

    Example:
        >>> ClockEventReasons(0x20 | 0x4).names
        ('sw_power_cap', 'sw_thermal_slowdown')
        >>> ClockEventReasons(0x20).slowdown
        True
    """

    mask: int = 0

    BITS: ClassVar[dict[int, str]] = {
        0x1: "gpu_idle",
        0x2: "applications_clocks_setting",
        0x4: "sw_power_cap",
        0x8: "hw_slowdown",
        0x10: "sync_boost",
        0x20: "sw_thermal_slowdown",
        0x40: "hw_thermal_slowdown",
        0x80: "hw_power_brake_slowdown",
        0x100: "display_clock_setting",
    }
    """NVML's reason bits and their names."""
    SLOWDOWN_MASK: ClassVar[int] = 0x8 | 0x20 | 0x40 | 0x80
    """Thermal and hardware slowdowns: the reasons that make a measured window unrepresentative."""

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the set reasons, lowest bit first (unknown bits as ``bit<n>``)."""
        return tuple(
            self.BITS.get(1 << n, f"bit{n}") for n in range(self.mask.bit_length()) if self.mask >> n & 1
        )

    @property
    def slowdown(self) -> bool:
        """Whether a thermal or hardware slowdown is active (a power cap is not one)."""
        return bool(self.mask & self.SLOWDOWN_MASK)


class GPU(Device):
    """One GPU: energy and power readings, power limit and SM clocks, in W, J and MHz.

    Attributes:
        index: The index the user sees (``cuda:<index>``).
        vendor: ``"nvidia"``, ``"amd"`` or ``"simulated"``.

    Example:
        >>> from zeus_core.testing import simulated_gpu
        >>> gpu = simulated_gpu("a40")
        >>> gpu.set_power_limit(250.0)
        >>> gpu.get_power_limit(), gpu.supported_sm_frequencies()[0]
        (250.0, 1740)
    """

    kind: ClassVar[DeviceKind] = "gpu"

    @property
    def has_power_reading(self) -> bool:
        """Every GPU backend reports its power draw (:meth:`get_power`)."""
        return True

    @property
    def clock(self) -> Clock:
        """The clock this device's readings refer to (wall-clock seconds for real hardware)."""
        return wall_clock

    @property
    @abstractmethod
    def uuid(self) -> str:
        """Unique identifier, e.g. ``"GPU-5f0b…"``."""

    @abstractmethod
    def power_limit_constraints(self) -> PowerLimitConstraints:
        """Min, max and default power limit, W."""

    @abstractmethod
    def get_power_limit(self) -> float:
        """Current power limit, W."""

    @abstractmethod
    def set_power_limit(self, watts: float) -> None:
        """Set the power limit, W. Needs admin rights on real GPUs.

        Raises:
            ZeusConfigError: ``watts`` is outside :meth:`power_limit_constraints`.
            ZeusPermissionError: The process may not change the limit.
        """

    def reset_power_limit(self) -> None:
        """Restore the default power limit."""
        self.set_power_limit(self.power_limit_constraints().default_w)

    @abstractmethod
    def check_control_permission(self) -> None:
        """Verify, without changing anything, that this process may set limits and clocks.

        Raises:
            ZeusPermissionError: With the message that says how to grant the permission.
        """

    def check_control_by_writing(self) -> None:
        """Verify that this process may set limits by *writing* the current power limit again.

        The only certain test, and a write: use it only when asked to (``zeus-suite env
        --check-control``). :meth:`check_control_permission` answers without writing.

        Raises:
            ZeusPermissionError: With the message that says how to grant the permission.
            ZeusNotSupportedError: This GPU's power limit cannot be changed at all.
        """
        self.set_power_limit(self.get_power_limit())

    @abstractmethod
    def supported_memory_frequencies(self) -> list[int]:
        """Supported memory clocks, MHz, highest first."""

    @abstractmethod
    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """Supported SM (graphics) clocks, MHz, highest first, at ``memory_mhz`` (default: highest)."""

    @abstractmethod
    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]`` (``max_mhz`` defaults to ``min_mhz``), MHz."""

    @abstractmethod
    def reset_locked_sm_frequency(self) -> None:
        """Let the driver choose the SM clock again."""

    def get_locked_sm_frequency(self) -> tuple[int, int] | None:
        """The locked SM clock range ``(min_mhz, max_mhz)``, MHz, or ``None`` when unlocked.

        Raises:
            ZeusNotSupportedError: The device cannot report it (NVML has no such query).
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot report its locked SM clocks.")

    @property
    @abstractmethod
    def has_energy_counter(self) -> bool:
        """Whether :meth:`get_total_energy` reads a hardware counter (NVIDIA Volta and newer)."""

    @abstractmethod
    def get_total_energy(self) -> float:
        """Energy consumed since an arbitrary origin (e.g. driver load), J.

        Raises:
            ZeusNotSupportedError: The GPU has no energy counter; sample :meth:`get_power` instead.
        """

    @abstractmethod
    def get_power(self) -> float:
        """Instantaneous power draw, W."""

    @property
    def has_instant_power(self) -> bool:
        """Whether :meth:`get_power` is instantaneous rather than an average over a window (e.g. 1 s)."""
        return True

    def get_average_power(self) -> float:
        """Power draw averaged by the device over its own window (about 1 s on NVIDIA), W.

        Raises:
            ZeusNotSupportedError: The device or driver has no such reading.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot report its average power.")

    def get_memory_power(self) -> float:
        """Power draw of the GPU's memory, averaged by the device, W (NVIDIA Hopper and newer).

        Raises:
            ZeusNotSupportedError: The device or driver has no such reading.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot report its memory power.")

    def get_persistence_mode(self) -> bool:
        """Whether the driver stays loaded with no process using the GPU (NVIDIA persistence mode).

        Raises:
            ZeusNotSupportedError: The device has no persistence mode.
        """
        raise ZeusNotSupportedError(f"{self.describe()} has no persistence mode.")

    def set_persistence_mode(self, enabled: bool) -> None:
        """Turn persistence mode on or off (needs admin rights on real GPUs).

        Raises:
            ZeusNotSupportedError: The device has no persistence mode.
            ZeusPermissionError: The process may not change it.
        """
        raise ZeusNotSupportedError(f"{self.describe()} has no persistence mode.")

    def set_locked_memory_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the memory clock into ``[min_mhz, max_mhz]``, MHz (needs admin rights on real GPUs).

        Raises:
            ZeusNotSupportedError: The device cannot lock its memory clock.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot lock its memory clock.")

    def reset_locked_memory_frequency(self) -> None:
        """Let the driver choose the memory clock again.

        Raises:
            ZeusNotSupportedError: The device cannot lock its memory clock.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot lock its memory clock.")

    def get_temperature(self) -> float:
        """The GPU die temperature, °C.

        Raises:
            ZeusNotSupportedError: The device has no temperature sensor this backend can read.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot report its temperature.")

    def get_clock_event_reasons(self) -> ClockEventReasons:
        """Why the clocks are below their maximum now (NVML's clock-event or throttle reasons).

        Raises:
            ZeusNotSupportedError: The device or driver cannot report them.
        """
        raise ZeusNotSupportedError(f"{self.describe()} cannot report clock-event (throttle) reasons.")

    def describe(self) -> str:
        """One line naming the device, e.g. ``"GPU 0: NVIDIA A40 (simulated)"``."""
        suffix = " (simulated)" if self.simulated and "simulated" not in self.name else ""
        return f"GPU {self.index}: {self.name}{suffix}"


@dataclass(frozen=True)
class CpuEnergy:
    """A reading of a CPU package's energy counters, J since an arbitrary origin.

    Attributes:
        cpu_j: Package energy, J.
        dram_j: DRAM energy, J, or ``None`` where the package has no DRAM domain.

    Example:
        >>> from zeus_core.device import CpuEnergy
        >>> start, end = CpuEnergy(100.0, 20.0), CpuEnergy(160.0, 25.0)
        >>> end.cpu_j - start.cpu_j, end.dram_j - start.dram_j
        (60.0, 5.0)
    """

    cpu_j: float
    dram_j: float | None


class CPU(Device):
    """One CPU package (socket), with its DRAM where the platform meters it.

    CPU energy comes from cumulative counters (RAPL); there is no instantaneous power reading.

    Example:
        >>> from zeus_core.device import CPU, CpuEnergy
        >>> class Package(CPU):  # what a backend such as RAPL implements
        ...     name, has_dram = "package-0", True
        ...     def get_energy(self):
        ...         return CpuEnergy(cpu_j=81234.5, dram_j=9012.3)
        >>> Package(0).describe(), Package(0).get_energy().cpu_j
        ('CPU 0: package-0 + DRAM', 81234.5)
    """

    kind: ClassVar[DeviceKind] = "cpu"

    @property
    def has_energy_counter(self) -> bool:
        """CPU packages are metered by energy counters (:meth:`get_energy`)."""
        return True

    @property
    def has_power_reading(self) -> bool:
        """CPU packages have no instantaneous power reading; power is energy over time."""
        return False

    @property
    @abstractmethod
    def has_dram(self) -> bool:
        """Whether the DRAM of this package is metered."""

    @abstractmethod
    def get_energy(self) -> CpuEnergy:
        """Read the package (and DRAM) energy counters, J. Counter wraparound is handled."""

    def describe(self) -> str:
        """One line naming the device."""
        dram = " + DRAM" if self.has_dram else ""
        return f"CPU {self.index}: {self.name}{dram}"
