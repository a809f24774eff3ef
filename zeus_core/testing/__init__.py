"""Simulated hardware and fakes, for trying Zeus Suite without a GPU and for testing code that uses it.

Everything a simulated device reports is marked simulated (its name ends in ``(simulated)``).

* :class:`SimulatedGPU` on a :class:`PhysicalModel` (a documented DVFS model) or a
  :class:`MeasuredProfile`, driven by a :class:`VirtualClock` or the wall clock;
* :class:`FakeNVML`: a faithful fake of ``pynvml`` (put it in ``sys.modules["pynvml"]``), and
  :class:`QuirkyNVML`, which adds the reporting quirks of real GPU generations;
* :func:`generate`: random power-limit workloads (a physical model with noise) for benchmarks;
* :class:`SimulatedPipelineGPU` and :func:`physical_instruction_profile`: pipeline-parallel work
  whose time and energy follow the GPU's clock, for Perseus without a GPU.

Example:
    >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
    >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    >>> gpu.simulated
    True
"""

from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML
from zeus_core.testing._pipeline_gpu import InstructionWork, SimulatedPipelineGPU
from zeus_core.testing._pipeline_profiles import PHYSICAL_GPUS, physical_instruction_profile
from zeus_core.testing._power_limit_generator import GPUS, GpuModel, NoisyRun, StepNoise, Workload, generate
from zeus_core.testing._quirky_nvml import Quirks, QuirkyNVML, StepProfile, square_wave
from zeus_core.testing._simulated_gpu import (
    GpuBehavior,
    MeasuredProfile,
    PhysicalModel,
    SimulatedGPU,
    VirtualClock,
    simulate_steps,
)

__all__ = [
    "FakeGPUSpec",
    "FakeNVML",
    "GPUS",
    "InstructionWork",
    "PHYSICAL_GPUS",
    "SimulatedPipelineGPU",
    "physical_instruction_profile",
    "GpuBehavior",
    "GpuModel",
    "MeasuredProfile",
    "NoisyRun",
    "PhysicalModel",
    "Quirks",
    "QuirkyNVML",
    "SimulatedGPU",
    "StepNoise",
    "StepProfile",
    "VirtualClock",
    "Workload",
    "generate",
    "simulate_steps",
    "square_wave",
]
