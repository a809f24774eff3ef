"""Everything that crosses ranks, in one place: the only importer of ``torch.distributed``.

Every function is a no-op (world size 1, rank 0) when ``torch.distributed`` is not initialised
or torch is not installed. "Rank" here always means the *global* rank.

This module stands at the bottom of the package: it imports nothing from ``zeus_core``.
:func:`reduce_measurement` takes any object shaped like a measurement window (:class:`WindowTotals`,
which :class:`zeus_core.monitor._measurement.Measurement` satisfies).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Protocol, Sequence

__all__ = [
    "is_initialized",
    "rank",
    "world_size",
    "is_rank_zero",
    "all_reduce",
    "broadcast_object",
    "all_gather_object",
    "WindowTotals",
    "JobMeasurement",
    "reduce_measurement",
]


def _dist() -> Any | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def is_initialized() -> bool:
    """Whether a ``torch.distributed`` process group is up."""
    return _dist() is not None


def rank() -> int:
    """Global rank of this process (0 when not distributed)."""
    dist = _dist()
    return dist.get_rank() if dist is not None else 0


def world_size() -> int:
    """Number of processes in the job (1 when not distributed)."""
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


def is_rank_zero() -> bool:
    """Whether this is global rank 0 (the rank that writes files and logs)."""
    return rank() == 0


def _device(dist: Any) -> Any:
    import torch

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce(values: Sequence[float], op: Literal["sum", "max", "min"] = "sum") -> list[float]:
    """Reduce a vector of floats element-wise across all ranks; every rank gets the result."""
    dist = _dist()
    if dist is None:
        return [float(v) for v in values]
    import torch

    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_device(dist))
    dist.all_reduce(tensor, op=ops[op])
    return tensor.tolist()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Send a picklable object from rank ``src`` to every rank; returns it on all ranks."""
    dist = _dist()
    if dist is None:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=_device(dist))
    return box[0]


def all_gather_object(obj: Any) -> list[Any]:
    """Collect one picklable object from every rank, in rank order, on every rank."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class WindowTotals(Protocol):
    """What :func:`reduce_measurement` reads from one rank's measurement window.

    :class:`zeus_core.monitor._measurement.Measurement` has these attributes; the protocol keeps
    this low-level module from importing the monitor package above it.
    """

    @property
    def time(self) -> float:
        """Duration of the window on this rank, s."""
        ...

    @property
    def gpu_energy(self) -> Mapping[int, float]:
        """Energy per GPU of this rank, J."""
        ...

    @property
    def cpu_energy(self) -> Mapping[int, float]:
        """Energy per CPU package of this rank, J."""
        ...

    @property
    def dram_energy(self) -> Mapping[int, float]:
        """Energy per package's DRAM of this rank, J."""
        ...

    @property
    def estimated(self) -> bool:
        """Whether any GPU energy of this rank is an estimate from sampled power."""
        ...

    @property
    def simulated(self) -> bool:
        """Whether any device of this rank is simulated."""
        ...


@dataclass(frozen=True)
class JobMeasurement:
    """A measurement of the whole job: every rank's devices added up.

    Attributes:
        time: Longest window time over ranks, s.
        gpu_energy: GPU energy of all ranks, J.
        cpu_energy: CPU package energy of all ranks, J.
        dram_energy: DRAM energy of all ranks, J.
        num_ranks: Ranks that contributed.
        estimated: Whether any rank's GPU energy is an estimate from sampled power.
        simulated: Whether any rank measured a simulated device.

    Example:
        >>> from zeus_core import JobMeasurement
        >>> job = JobMeasurement(10.0, gpu_energy=5000.0, cpu_energy=800.0, dram_energy=200.0, num_ranks=2)
        >>> job.total_energy, job.average_power
        (6000.0, 600.0)
    """

    time: float
    gpu_energy: float
    cpu_energy: float
    dram_energy: float
    num_ranks: int
    estimated: bool = False
    simulated: bool = False

    @property
    def total_energy(self) -> float:
        """GPU + CPU + DRAM energy of the job, J."""
        return self.gpu_energy + self.cpu_energy + self.dram_energy

    @property
    def average_power(self) -> float:
        """Job-wide average power, W."""
        return self.total_energy / self.time if self.time > 0 else 0.0


def reduce_measurement(m: WindowTotals) -> JobMeasurement:
    """Sum a window's energy over all ranks and take the longest time (every rank calls this).

    Each rank measures only its own devices, so summing never double-counts as long as no two
    ranks monitor the same GPU.

    Args:
        m: This rank's window, e.g. what ``ZeusMonitor.end_window`` returned.

    Example:
        >>> from zeus_core import ZeusMonitor, reduce_measurement
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
        >>> monitor.begin_window("epoch"); clock.advance(2.0)
        >>> job = reduce_measurement(monitor.end_window("epoch"))  # a single process: itself
        >>> job.num_ranks, job.gpu_energy, job.simulated
        (1, 600.0, True)
    """
    sums = all_reduce(
        [
            sum(m.gpu_energy.values()),
            sum((m.cpu_energy or {}).values()),  # None: not measured (Zeus's shape)
            sum((m.dram_energy or {}).values()),
            1.0,
            float(m.estimated),
            float(m.simulated),
        ],
        "sum",
    )
    (time_max,) = all_reduce([m.time], "max")
    return JobMeasurement(
        time=time_max,
        gpu_energy=sums[0],
        cpu_energy=sums[1],
        dram_energy=sums[2],
        num_ranks=int(round(sums[3])),
        estimated=sums[4] > 0,
        simulated=sums[5] > 0,
    )
