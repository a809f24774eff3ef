"""Deprecated: ``from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock``."""

from zeus_core._deprecation import moved
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

__all__ = ["PhysicalModel", "SimulatedGPU", "VirtualClock"]

moved(__name__, "from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock")
