"""A CPU package whose RAPL-like counters advance by fixed powers on a clock (J = W x s)."""

from __future__ import annotations

from typing import Callable

from zeus_core.device._base import CPU, CpuEnergy
from zeus_core.exceptions import ZeusDeviceError

CPU_ORIGIN_J = 1000.0  # package counter at clock time 0
DRAM_ORIGIN_J = 50.0  # DRAM counter at clock time 0


class ClockCPU(CPU):
    """Package counter ``1000 + cpu_w·t`` and DRAM counter ``50 + dram_w·t`` J at clock time ``t``.

    ``dram_w=None`` gives a package without a DRAM zone; ``broken = True`` makes reads raise;
    ``reads`` counts the reads.
    """

    vendor = "fake"

    def __init__(
        self, index: int, clock: Callable[[], float], cpu_w: float = 50.0, dram_w: float | None = 5.0
    ) -> None:
        super().__init__(index)
        self._clock, self.cpu_w, self.dram_w = clock, cpu_w, dram_w
        self.reads = 0
        self.broken = False

    @property
    def name(self) -> str:
        return f"package-{self.index}"

    @property
    def has_dram(self) -> bool:
        return self.dram_w is not None

    def get_energy(self) -> CpuEnergy:
        """Both counters now, J."""
        if self.broken:
            raise ZeusDeviceError(f"RAPL of package {self.index} is unreadable")
        self.reads += 1
        t = self._clock()
        dram = None if self.dram_w is None else DRAM_ORIGIN_J + self.dram_w * t
        return CpuEnergy(CPU_ORIGIN_J + self.cpu_w * t, dram)
