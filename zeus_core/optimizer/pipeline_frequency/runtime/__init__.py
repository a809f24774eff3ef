"""Perseus in training: profile each instruction, plan on rank 0, apply the plan on every rank.

One :class:`PerseusRuntime` per pipeline stage, driven by a hook of
:mod:`zeus_integrations.pipeline`. How its phases work: docs/optimizers/perseus.md.

Example:
    >>> from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime, PlanSettings
    >>> runtime = PerseusRuntime(planning=PlanSettings(deadline_s=0.8), save_dir="perseus")
    >>> runtime.planning.label
    'deadline-0.8s'
"""

from zeus_core.optimizer.pipeline_frequency.runtime._controller import (
    ControlMode,
    FrequencyChange,
    FrequencyController,
    FrequencyRequest,
)
from zeus_core.optimizer.pipeline_frequency.runtime._perseus_runtime import PerseusRuntime
from zeus_core.optimizer.pipeline_frequency.runtime._phases import (
    ApplyingPhase,
    DiscoveryPhase,
    ProfilingPhase,
    RuntimePhase,
)
from zeus_core.optimizer.pipeline_frequency.runtime._plan_target import PlanSettings, PlanTarget
from zeus_core.optimizer.pipeline_frequency.runtime._profiler import (
    FrequencySweep,
    InstructionMeasurement,
    InstructionProfiler,
)
from zeus_core.optimizer.pipeline_frequency.runtime._records import (
    InstructionListener,
    InstructionRecord,
    IterationRecord,
)

__all__ = [
    "PerseusRuntime",
    "PlanSettings",
    "PlanTarget",
    "FrequencySweep",
    "InstructionProfiler",
    "InstructionMeasurement",
    "FrequencyController",
    "ControlMode",
    "FrequencyRequest",
    "FrequencyChange",
    "InstructionListener",
    "InstructionRecord",
    "IterationRecord",
    "DiscoveryPhase",
    "ProfilingPhase",
    "ApplyingPhase",
    "RuntimePhase",
]
