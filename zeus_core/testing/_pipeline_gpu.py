"""A simulated GPU for pipelines: work that slows down as the SM clock drops, power that follows it.

On a GPU that only meters CPU time, slowing the clock would cost nothing and every Perseus plan
would look free; :class:`SimulatedPipelineGPU` runs :class:`InstructionWork` for as long as it takes
at the current clock. docs/simulating.md gives the model.

Example:
    >>> from zeus_core.testing import VirtualClock
    >>> gpu = SimulatedPipelineGPU("a40", clock=VirtualClock())
    >>> work = InstructionWork(compute_s=0.010, memory_s=0.002)
    >>> round(gpu.run(work), 4)                      # at the highest clock, s
    0.012
    >>> gpu.set_locked_sm_frequency(870)
    >>> round(gpu.run(work), 4)                      # half the clock: the compute share doubles
    0.022
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from zeus_core.device._base import Clock
from zeus_core.exceptions import ZeusConfigError
from zeus_core.testing._clock import VirtualClock
from zeus_core.testing._gpu_models import GpuBehavior, PhysicalModel
from zeus_core.testing._simulated_gpu import SimulatedGPU

__all__ = ["InstructionWork", "PipelineGpuModel", "SimulatedPipelineGPU"]


@dataclass(frozen=True)
class InstructionWork:
    """The work of one instruction, as the DVFS model sees it.

    Attributes:
        compute_s: Compute-bound time at the highest clock, s (scales with ``f_max / f``).
        memory_s: Memory-bound time, s (independent of the SM clock).
        compute_activity: SM utilization while compute-bound (0–1].
        memory_activity: SM utilization while memory-bound (0–1].

    Raises:
        ZeusConfigError: A negative time, no work at all, or an activity outside (0, 1].

    Example:
        >>> from zeus_core.testing import InstructionWork, PhysicalModel
        >>> work = InstructionWork(compute_s=0.010, memory_s=0.002)
        >>> round(work.time_at(PhysicalModel.a40(), 870), 4), work.scaled(2.0).compute_s
        (0.022, 0.02)
    """

    compute_s: float
    memory_s: float = 0.0
    compute_activity: float = 1.0
    memory_activity: float = 0.3

    def __post_init__(self) -> None:
        if self.compute_s < 0 or self.memory_s < 0 or self.compute_s + self.memory_s <= 0:
            raise ZeusConfigError(
                f"InstructionWork(compute_s={self.compute_s}, memory_s={self.memory_s}): times are s, "
                ">= 0, and not both 0."
            )
        for name in ("compute_activity", "memory_activity"):
            if not 0 < getattr(self, name) <= 1:
                raise ZeusConfigError(f"InstructionWork({name}={getattr(self, name)}): must be in (0, 1].")

    def scaled(self, factor: float) -> "InstructionWork":
        """The same mix of work, ``factor`` times as much (e.g. a backward pass ≈ 2× its forward)."""
        return InstructionWork(
            self.compute_s * factor, self.memory_s * factor, self.compute_activity, self.memory_activity
        )

    def time_at(self, model: PhysicalModel, sm_mhz: float) -> float:
        """Duration at SM clock ``sm_mhz``, s."""
        f = min(max(sm_mhz, model.f_min_mhz), model.f_max_mhz)
        return self.memory_s + self.compute_s * model.f_max_mhz / f

    def energy_at(self, model: PhysicalModel, sm_mhz: float) -> float:
        """GPU energy at SM clock ``sm_mhz``, J."""
        f = min(max(sm_mhz, model.f_min_mhz), model.f_max_mhz)
        compute_t = self.compute_s * model.f_max_mhz / f
        return compute_t * model.power_at(f, self.compute_activity) + self.memory_s * model.power_at(
            f, self.memory_activity
        )


@dataclass
class PipelineGpuModel(GpuBehavior):
    """A :class:`PhysicalModel` whose busy power also follows the SM utilization of the running work.

    Attributes:
        model: Clock range, voltage curve, static/dynamic/idle power.
        activity: SM utilization of the work running now (set by :meth:`SimulatedPipelineGPU.run`).
    """

    model: PhysicalModel
    activity: float = 1.0
    gpu_name: str = field(init=False)
    idle_power_w: float = field(init=False)

    def __post_init__(self) -> None:
        self.gpu_name = self.model.gpu_name
        self.constraints = self.model.constraints
        self.idle_power_w = self.model.idle_power_w
        self.sm_frequencies_mhz = list(self.model.sm_frequencies_mhz)

    def step(self, power_limit_w: float, sm_mhz: int | None) -> tuple[float, float]:
        """Time of one unit of the model's work (s) and the power at the current utilization (W)."""
        f = self.model.effective_frequency(power_limit_w, sm_mhz)
        return self.model.time_at(f), self.model.power_at(f, self.activity)


class SimulatedPipelineGPU(SimulatedGPU):
    """A :class:`SimulatedGPU` that runs :class:`InstructionWork` at the speed of its current clock.

    Args:
        preset: ``"a40"``, ``"a100"``, ``"h100"`` (see :meth:`PhysicalModel.preset`) or a
            :class:`PhysicalModel`.
        index: Device index it reports.
        clock: Time source (wall clock by default: :meth:`run` sleeps; a :class:`VirtualClock`
            is advanced instead).
        seed: Seed of the simulated GPU's noise generator.
        slice_s: How often a running instruction re-reads the clock, s.

    Raises:
        ZeusConfigError: Unknown preset or a non-positive ``slice_s``.

    Example:
        >>> from zeus_core.testing import InstructionWork, SimulatedPipelineGPU, VirtualClock
        >>> gpu = SimulatedPipelineGPU("a100", clock=VirtualClock())
        >>> gpu.set_locked_sm_frequency(705)  # half the A100's top clock
        >>> round(gpu.run(InstructionWork(compute_s=0.010)), 4)
        0.02
    """

    def __init__(
        self,
        preset: str | PhysicalModel = "a40",
        index: int = 0,
        *,
        clock: Clock | None = None,
        seed: int | None = None,
        slice_s: float = 0.002,
    ) -> None:
        model = PhysicalModel.preset(preset) if isinstance(preset, str) else preset
        if slice_s <= 0:
            raise ZeusConfigError(f"SimulatedPipelineGPU(slice_s={slice_s}): must be > 0 s.")
        # busy only while InstructionWork runs (not while the rank's CPU waits or computes elsewhere)
        super().__init__(PipelineGpuModel(model), index, clock=clock, seed=seed, busy=False, activity=None)
        self.model = model
        self.slice_s = slice_s

    def current_frequency(self) -> int:
        """The SM clock the GPU runs at now (locked clock under the power limit), MHz."""
        return self.model.effective_frequency(self.get_power_limit(), self.locked_sm_frequency)

    def _set_activity(self, busy: bool, activity: float) -> None:
        self.set_busy(self.busy)  # integrate the energy so far at the old power
        assert isinstance(self.behavior, PipelineGpuModel)
        self.behavior.activity = activity
        self.set_busy(busy)

    def _wait(self, seconds: float) -> None:
        if isinstance(self.clock, VirtualClock):
            self.clock.advance(seconds)
        elif seconds > 0:
            time.sleep(seconds)

    def run(self, work: InstructionWork) -> float:
        """Keep the GPU busy for ``work`` at the clock(s) it runs at; returns the elapsed time, s.

        The compute-bound share advances at ``f / f_max`` of its speed at the highest clock, with
        ``f`` re-read every :attr:`slice_s`; the memory-bound share takes its fixed time.
        """
        start = self.clock()
        f_max = self.model.f_max_mhz
        remaining = work.compute_s  # compute work left, in seconds at f_max
        self._set_activity(True, work.compute_activity)
        try:
            while remaining > 1e-9:
                f = self.current_frequency()
                need = remaining * f_max / f
                t0 = self.clock()
                self._wait(min(need, self.slice_s))
                remaining -= (self.clock() - t0) * f / f_max
            self._set_activity(True, work.memory_activity)
            end = self.clock() + work.memory_s
            while self.clock() < end:  # sleep to a deadline: oversleeping does not accumulate
                self._wait(end - self.clock())
        finally:
            self._set_activity(False, 1.0)
        return self.clock() - start
