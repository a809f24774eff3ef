"""Hardware: NVIDIA (NVML), AMD (amdsmi), CPU/DRAM (Linux RAPL) and simulated GPUs behind one interface."""

from zeus_core.device.base import CPU, GPU, CpuEnergy, PowerLimitConstraints

__all__ = ["GPU", "CPU", "CpuEnergy", "PowerLimitConstraints"]
