"""Deprecated: ``from zeus_core.testing import InstructionWork, SimulatedPipelineGPU``."""

from zeus_core._deprecation import moved
from zeus_core.testing import InstructionWork, SimulatedPipelineGPU

__all__ = ["InstructionWork", "SimulatedPipelineGPU"]

moved(__name__, "from zeus_core.testing import InstructionWork, SimulatedPipelineGPU")
