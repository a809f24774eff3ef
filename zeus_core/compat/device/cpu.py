"""Zeus's ``zeus.device.cpu``: :func:`get_cpus`, index-based :class:`CPUs`, :class:`CpuDramMeasurement` (mJ).

Example:
    >>> from zeus_core.compat.device.cpu import CPUs
    >>> from zeus_core.device import CPU, CpuEnergy
    >>> class Package(CPU):  # stands for a RAPL package
    ...     name, has_dram = "package-0", True
    ...     def get_energy(self):
    ...         return CpuEnergy(cpu_j=81.5, dram_j=9.25)
    >>> CPUs([Package(0)]).get_total_energy_consumption(0)
    CpuDramMeasurement(cpu_mj=81500.0, dram_mj=9250.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from zeus_core.compat.device.exception import ZeusCPUInitError
from zeus_core.device import _base

__all__ = ["CpuDramMeasurement", "CPU", "CPUs", "get_cpus"]

_MILLI = 1000  # Zeus's units: mJ


@dataclass
class CpuDramMeasurement:
    """One reading of a CPU package's counters, mJ (``dram_mj`` is ``None`` without a DRAM domain).

    Example:
        >>> from zeus_core.compat.device.cpu import CpuDramMeasurement
        >>> (CpuDramMeasurement(3000.0, 500.0) - CpuDramMeasurement(1000.0, 100.0)) / 2
        CpuDramMeasurement(cpu_mj=1000.0, dram_mj=200.0)
    """

    cpu_mj: float
    dram_mj: float | None = None

    def __sub__(self, other: CpuDramMeasurement) -> CpuDramMeasurement:
        dram = None if self.dram_mj is None or other.dram_mj is None else self.dram_mj - other.dram_mj
        return CpuDramMeasurement(self.cpu_mj - other.cpu_mj, dram)

    def __truediv__(self, other: float) -> CpuDramMeasurement:
        return CpuDramMeasurement(self.cpu_mj / other, None if self.dram_mj is None else self.dram_mj / other)


class CPU:
    """One CPU package with Zeus's method names, over a suite device (RAPL).

    Example:
        >>> from zeus_core.compat.device.cpu import CPU
        >>> from zeus_core.device import CPU as SuiteCPU, CpuEnergy
        >>> class Package(SuiteCPU):
        ...     name, has_dram = "package-0", False
        ...     def get_energy(self):
        ...         return CpuEnergy(cpu_j=2.0, dram_j=None)
        >>> CPU(Package(0)).supports_get_dram_energy_consumption()
        False
    """

    def __init__(self, cpu: _base.CPU) -> None:
        self.device = cpu
        self.cpu_index = cpu.index

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """The package's (and its DRAM's) energy counters, mJ."""
        e = self.device.get_energy()
        return CpuDramMeasurement(e.cpu_j * _MILLI, None if e.dram_j is None else e.dram_j * _MILLI)

    def supports_get_dram_energy_consumption(self) -> bool:
        """Whether the package meters its DRAM."""
        return self.device.has_dram


class CPUs:
    """Zeus's ``CPUs``: the metered CPU packages, each method taking the package index first.

    Example:
        >>> from zeus_core.compat.device.cpu import CPUs
        >>> len(CPUs([]))
        0
    """

    def __init__(self, cpus: Sequence[_base.CPU]) -> None:
        self._cpus = [CPU(c) for c in cpus]

    @property
    def cpus(self) -> list[CPU]:
        """The per-package objects (Zeus's ``CPU``)."""
        return list(self._cpus)

    def __len__(self) -> int:
        return len(self._cpus)

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        """Package ``index``'s energy counters, mJ."""
        return self._cpus[index].get_total_energy_consumption()

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        """Whether package ``index`` meters its DRAM."""
        return self._cpus[index].supports_get_dram_energy_consumption()


def get_cpus() -> CPUs:
    """The CPU packages Linux RAPL meters, as Zeus's ``CPUs``.

    Raises:
        ZeusCPUInitError: RAPL is absent (not x86 Linux, a VM, a container without powercap).
        ZeusPermissionError: RAPL exists but needs root (Zeus's ``ZeusCPUNoPermissionError``).

    Example:
        >>> from zeus_core.compat.device import get_cpus
        >>> try:
        ...     cpus = get_cpus()
        ... except Exception as e:  # no RAPL on this machine
        ...     cpus = type(e).__name__
    """
    from zeus_core.device._discovery import get_cpus as discover_cpus

    cpus = discover_cpus()
    if not cpus:
        raise ZeusCPUInitError(
            "No CPU package is metered: Linux RAPL (/sys/class/powercap) is not available here."
        )
    return CPUs(cpus)
