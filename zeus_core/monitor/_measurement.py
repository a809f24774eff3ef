"""The result of one measurement window."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Measurement", "new_measurement"]


class _PendingEnergy(Protocol):
    def done(self) -> bool: ...

    def resolve(self) -> dict[int, float]: ...


@dataclass(frozen=True)
class Measurement:
    """Time and energy of one measurement window.

    A window on real GPUs is finalized by the monitor's background reader up to about one energy
    counter period (~0.1 s) after it ends: ``end_window`` returns at once, and reading
    ``gpu_energy`` (or anything derived from it) waits until it is final. :attr:`finalized`
    says whether that would wait.

    Attributes:
        time: Wall-clock duration of the window, s.
        gpu_energy: Energy per GPU, J, keyed by the GPU index the user sees (``cuda:<i>``).
        cpu_energy: Energy per CPU package, J, keyed by package index (empty if not measured).
        dram_energy: Energy of each package's DRAM, J, keyed by package index (empty if not measured).
        estimated_gpus: GPU indices whose energy was integrated from sampled power because the GPU
            has no energy counter (an estimate, not a counter reading).
        simulated: Whether any measured device is simulated.
        interpolated_gpus: GPU indices without instant power: their energy is exact over whole
            counter periods, and the share of the periods at the window's edges is interpolated
            linearly in time.

    Raises:
        ZeusDeviceError: On reading ``gpu_energy``, where a GPU failed during the window.

    Example:
        >>> from zeus_core import Measurement
        >>> m = Measurement(time=2.0, gpu_energy={0: 500.0, 1: 520.0}, cpu_energy={0: 80.0})
        >>> m.total_energy, m.finalized
        (1100.0, True)
    """

    time: float
    gpu_energy: dict[int, float]
    cpu_energy: dict[int, float] = field(default_factory=dict)
    dram_energy: dict[int, float] = field(default_factory=dict)
    estimated_gpus: frozenset[int] = frozenset()
    simulated: bool = False
    interpolated_gpus: frozenset[int] = frozenset()

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes missing from __dict__: a lazy gpu_energy resolves here.
        if name == "gpu_energy":
            pending: _PendingEnergy | None = self.__dict__.get("_pending")
            if pending is not None:
                energy = pending.resolve()
                self.__dict__["gpu_energy"] = energy
                self.__dict__.pop("_pending", None)
                return energy
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    def __getstate__(self) -> dict[str, Any]:
        self.gpu_energy  # noqa: B018 (resolve before pickling: the pending part holds threads' state)
        return {k: v for k, v in self.__dict__.items() if k != "_pending"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def finalized(self) -> bool:
        """Whether the energy is final (reading it does not wait)."""
        pending: _PendingEnergy | None = self.__dict__.get("_pending")
        return pending is None or pending.done()

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
        parts += [f"CPU {i}: {e:.1f} J" for i, e in (self.cpu_energy or {}).items()]
        parts += [f"DRAM {i}: {e:.1f} J" for i, e in (self.dram_energy or {}).items()]
        tag = " [simulated]" if self.simulated else ""
        return f"{self.time:.2f} s, {self.total_energy:.1f} J ({', '.join(parts)}){tag}"


def new_measurement(
    time_s: float,
    gpu: dict[int, float] | None,
    cpu: dict[int, float],
    dram: dict[int, float],
    estimated: frozenset[int],
    simulated: bool,
    interpolated: frozenset[int],
    pending: _PendingEnergy | None = None,
) -> Measurement:
    """A :class:`Measurement` built fast, for the hot path of ``ZeusMonitor.end_window``.

    The frozen dataclass's ``__init__`` assigns each field through ``object.__setattr__`` (about
    1 µs per window); filling the instance ``__dict__`` gives the identical object in a third of
    the time. ``gpu=None`` with ``pending``: ``gpu_energy`` resolves on first access.
    """
    m = object.__new__(Measurement)
    d = m.__dict__
    d["time"] = time_s
    if pending is None:
        d["gpu_energy"] = gpu
    else:
        d["_pending"] = pending
    d["cpu_energy"] = cpu
    d["dram_energy"] = dram
    d["estimated_gpus"] = estimated
    d["simulated"] = simulated
    d["interpolated_gpus"] = interpolated
    return m
