"""Hardware: NVIDIA (NVML), AMD (amdsmi), CPU/DRAM (Linux RAPL) and simulated GPUs behind one interface.

:class:`Device` is what every device reports; :class:`GPU` and :class:`CPU` are its kinds. GPU
vendors register in :mod:`zeus_core.device.registry`; :mod:`zeus_core.device.discovery` finds them.
"""

from zeus_core.device.base import (
    CPU,
    GPU,
    ClockEventReasons,
    CpuEnergy,
    Device,
    DeviceKind,
    PowerLimitConstraints,
)
from zeus_core.device.registry import Unavailable, register_gpu_vendor, unregister_gpu_vendor

__all__ = [
    "Device",
    "DeviceKind",
    "GPU",
    "CPU",
    "CpuEnergy",
    "PowerLimitConstraints",
    "ClockEventReasons",
    "Unavailable",
    "register_gpu_vendor",
    "unregister_gpu_vendor",
]
