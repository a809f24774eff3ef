"""The result of one measurement window."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """Time and energy of one measurement window.

    Attributes:
        time: Wall-clock duration of the window, s.
        gpu_energy: Energy per GPU, J, keyed by the GPU index the user sees (``cuda:<i>``).
        cpu_energy: Energy per CPU package, J, keyed by package index (empty if not measured).
        dram_energy: Energy of each package's DRAM, J, keyed by package index (empty if not measured).
        estimated_gpus: GPU indices whose energy was integrated from sampled power because the GPU
            has no energy counter (an estimate, not a counter reading).
        simulated: Whether any measured device is simulated.
    """

    time: float
    gpu_energy: dict[int, float]
    cpu_energy: dict[int, float] = field(default_factory=dict)
    dram_energy: dict[int, float] = field(default_factory=dict)
    estimated_gpus: frozenset[int] = frozenset()
    simulated: bool = False

    @property
    def gpu_total_energy(self) -> float:
        """Energy of all measured GPUs, J."""
        return sum(self.gpu_energy.values())

    @property
    def total_energy(self) -> float:
        """Energy of every measured device (GPUs, CPU packages and DRAM), J."""
        return sum(self.gpu_energy.values()) + sum(self.cpu_energy.values()) + sum(self.dram_energy.values())

    @property
    def average_power(self) -> float:
        """Average power of every measured device over the window, W (0 for an empty window)."""
        return self.total_energy / self.time if self.time > 0 else 0.0

    @property
    def estimated(self) -> bool:
        """Whether any GPU's energy is an estimate from sampled power."""
        return bool(self.estimated_gpus)

    def describe(self) -> str:
        """A one-line summary, e.g. ``"12.30 s, 3456.0 J (GPU 0: 3000.0 J, ...) [simulated]"``."""
        parts = [
            f"GPU {i}: {e:.1f} J" + (" (estimated)" if i in self.estimated_gpus else "")
            for i, e in self.gpu_energy.items()
        ]
        parts += [f"CPU {i}: {e:.1f} J" for i, e in self.cpu_energy.items()]
        parts += [f"DRAM {i}: {e:.1f} J" for i, e in self.dram_energy.items()]
        tag = " [simulated]" if self.simulated else ""
        return f"{self.time:.2f} s, {self.total_energy:.1f} J ({', '.join(parts)}){tag}"
