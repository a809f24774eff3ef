"""Deprecated: the simulated pipeline GPU moved to :mod:`zeus_core.testing`.

Use ``from zeus_core.testing import InstructionWork, SimulatedPipelineGPU``. This alias stays for
code written against the old path (a README example used it) and will be removed.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from zeus_core.optimizer.pipeline_frequency.simulated_gpu import SimulatedPipelineGPU
    >>> import zeus_core.testing
    >>> SimulatedPipelineGPU is zeus_core.testing.SimulatedPipelineGPU
    True
"""

from __future__ import annotations

import warnings

from zeus_core.testing import InstructionWork, SimulatedPipelineGPU
from zeus_core.testing._pipeline_gpu import PIPELINE_GPU_PRESETS, PipelineGpuModel

__all__ = ["InstructionWork", "PipelineGpuModel", "SimulatedPipelineGPU", "PIPELINE_GPU_PRESETS"]

warnings.warn(
    "zeus_core.optimizer.pipeline_frequency.simulated_gpu is deprecated and will be removed; use "
    "`from zeus_core.testing import InstructionWork, SimulatedPipelineGPU` instead.",
    DeprecationWarning,
    stacklevel=2,
)
