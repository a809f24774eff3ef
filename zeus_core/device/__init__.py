"""Hardware: NVIDIA (NVML), AMD (amdsmi), CPU/DRAM (Linux RAPL) and simulated GPUs behind one interface.

:class:`Device` is what every device reports; :class:`GPU` and :class:`CPU` are its kinds.
:func:`get_gpus` and :func:`get_cpus` find this machine's devices (indices as ``cuda:<i>``), and
:func:`discover` also says what is missing and how to fix it. A new GPU vendor registers with
:func:`register_gpu_vendor`; the vendors' classes (``NVIDIAGPU``, ``AMDGPU``, ``RaplCPU``) load
only when used, from ``zeus_core``. Units everywhere: W, J, s, MHz.

Example:
    >>> from zeus_core.device import get_gpus
    >>> [gpu.describe() for gpu in get_gpus({"ZEUS_SUITE_SIMULATE": "a100"})]
    ['GPU 0: NVIDIA A100-SXM4-40GB (simulated)']
"""

from zeus_core.device._activity import Activity, ChildProcessActivity, ProcessActivity
from zeus_core.device._base import (
    CPU,
    GPU,
    ClockEventReasons,
    CpuEnergy,
    Device,
    DeviceKind,
    PowerLimitConstraints,
)
from zeus_core.device._discovery import DeviceReport, discover, get_cpus, get_gpus
from zeus_core.device._registry import Unavailable, register_gpu_vendor, unregister_gpu_vendor

__all__ = [
    "Device",
    "DeviceKind",
    "GPU",
    "CPU",
    "CpuEnergy",
    "PowerLimitConstraints",
    "ClockEventReasons",
    "get_gpus",
    "get_cpus",
    "discover",
    "DeviceReport",
    "Unavailable",
    "register_gpu_vendor",
    "unregister_gpu_vendor",
    "Activity",
    "ProcessActivity",
    "ChildProcessActivity",
]
