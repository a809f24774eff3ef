"""Simulated hardware and fakes, for trying Zeus Suite without a GPU and for testing code that uses it.

Everything a simulated device reports is marked simulated (its name ends in ``(simulated)``).

* :class:`VirtualClock`: time that moves only when simulated work advances it;
* :data:`GPU_CATALOGUE`: the product facts (names, power-limit ranges, clocks) every simulator
  and fake below takes its GPUs from;
* :class:`SimulatedGPU` on a :class:`PhysicalModel` (a DVFS model) or a :class:`MeasuredProfile`,
  and :func:`simulated_gpu` (the one ``simulate="a40"`` shortcut);
* :class:`FakeNVML`: a faithful fake of ``pynvml`` (put it in ``sys.modules["pynvml"]``), and
  :class:`QuirkyNVML`, which adds the reporting quirks of real GPU generations;
* :func:`generate`: random power-limit workloads (a physical model with noise) for benchmarks;
* :class:`SimulatedPipelineGPU` and :func:`physical_instruction_profile`: pipeline-parallel work
  whose time and energy follow the GPU's clock, for Perseus without a GPU.

docs/simulating.md describes the models.

Example:
    >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
    >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    >>> gpu.simulated
    True
"""

from zeus_core.testing._catalogue import GPU_CATALOGUE, GpuProduct, gpu_product
from zeus_core.testing._clock import VirtualClock
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML
from zeus_core.testing._gpu_models import GpuBehavior, MeasuredProfile, PhysicalModel
from zeus_core.testing._pipeline_gpu import InstructionWork, SimulatedPipelineGPU
from zeus_core.testing._pipeline_profiles import PHYSICAL_GPUS, physical_instruction_profile
from zeus_core.testing._power_limit_generator import (
    GPUS,
    GpuModel,
    NoisyRun,
    PowerLimitWorkload,
    StepNoise,
    generate,
)
from zeus_core.testing._quirky_nvml import Quirks, QuirkyNVML, StepProfile, square_wave
from zeus_core.testing._simulated_gpu import SimulatedGPU, simulate_steps
from zeus_core.testing._stand_in import simulated_gpu

__all__ = [
    "VirtualClock",
    "GPU_CATALOGUE",
    "GpuProduct",
    "gpu_product",
    "GpuBehavior",
    "MeasuredProfile",
    "PhysicalModel",
    "SimulatedGPU",
    "simulate_steps",
    "simulated_gpu",
    "FakeGPUSpec",
    "FakeNVML",
    "Quirks",
    "QuirkyNVML",
    "StepProfile",
    "square_wave",
    "GPUS",
    "GpuModel",
    "NoisyRun",
    "StepNoise",
    "PowerLimitWorkload",
    "generate",
    "InstructionWork",
    "SimulatedPipelineGPU",
    "PHYSICAL_GPUS",
    "physical_instruction_profile",
]
