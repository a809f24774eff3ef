"""Perseus: per-instruction GPU frequency planning for pipeline-parallel training.

Planner (this package's data and algorithms):

* :mod:`.schedule`: pipeline schedules as data (:func:`synchronous_1f1b`, :func:`gpipe`,
  :func:`interleaved_1f1b`, :func:`zero_bubble_1f1b`);
* :mod:`.profile`: :class:`InstructionProfile`, time/energy per (stage, instruction, clock), CSV I/O;
* :mod:`.cost_model`: Pareto options, effective energy, convex cost models;
* :mod:`.dag`: the iteration's DAG; :mod:`.solver`: Phillips–Dessouky min-cut frontier;
* :mod:`.frontier`: :func:`plan_frontier` and :class:`Frontier` (zero-slowdown, deadline and
  least-energy plans); :mod:`.point_plan`: :func:`plan_at_time` (one target time, no frontier);
  :mod:`.plan`: :class:`FrequencyPlan` (JSON round trip); :mod:`.blocking_power`: idle power per GPU;
* :mod:`.plots`: frontier and timeline plots; :mod:`.physical_profiles`: synthetic A100/A40 profiles.

In training:

* :mod:`.profiler`: :class:`InstructionProfiler` (time and energy per instruction at a sweep of clocks);
* :mod:`.controller`: :class:`FrequencyController` (sets locked SM clocks off the training thread);
* :mod:`.runtime`: :class:`PerseusRuntime` (profile, plan on rank 0, broadcast, apply; reuse on restart),
  with :mod:`.plan_settings`, :mod:`.observed_pipeline`, :mod:`.plan_store` and :mod:`.decisions`;
* :mod:`.simulated_gpu`: :class:`SimulatedPipelineGPU`, whose work slows as its clock drops.

Names load lazily, so importing this package does not import scipy or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "InstructionKind": "schedule",
    "Instruction": "schedule",
    "PipelineSchedule": "schedule",
    "synchronous_1f1b": "schedule",
    "gpipe": "schedule",
    "interleaved_1f1b": "schedule",
    "zero_bubble_1f1b": "schedule",
    "make_schedule": "schedule",
    "SCHEDULES": "schedule",
    "ProfileMeasurement": "profile",
    "InstructionProfile": "profile",
    "InstructionOptions": "cost_model",
    "CostModel": "cost_model",
    "ConvexHullCostModel": "cost_model",
    "ExponentialCostModel": "cost_model",
    "TimeRounding": "cost_model",
    "PipelineDAG": "dag",
    "Frontier": "frontier",
    "Replay": "frontier",
    "plan_frontier": "frontier",
    "plan_at_time": "point_plan",
    "PlanSettings": "plan_settings",
    "PlanTarget": "plan_settings",
    "SimulatedPipelineGPU": "simulated_gpu",
    "InstructionWork": "simulated_gpu",
    "resolve_blocking_power": "blocking_power",
    "FrequencyPlan": "plan",
    "physical_instruction_profile": "physical_profiles",
    "PHYSICAL_GPUS": "physical_profiles",
    "plot_frontier": "plots",
    "plot_timeline": "plots",
    "InstructionProfiler": "profiler",
    "FrequencySweep": "profiler",
    "FrequencyController": "controller",
    "ControlMode": "controller",
    "PerseusRuntime": "runtime",
}

if TYPE_CHECKING:  # real types for editors and type checkers; run time stays lazy
    from zeus_core.optimizer.pipeline_frequency.blocking_power import resolve_blocking_power
    from zeus_core.optimizer.pipeline_frequency.controller import ControlMode, FrequencyController
    from zeus_core.optimizer.pipeline_frequency.cost_model import (
        ConvexHullCostModel,
        CostModel,
        ExponentialCostModel,
        InstructionOptions,
        TimeRounding,
    )
    from zeus_core.optimizer.pipeline_frequency.dag import PipelineDAG
    from zeus_core.optimizer.pipeline_frequency.frontier import Frontier, Replay, plan_frontier
    from zeus_core.optimizer.pipeline_frequency.physical_profiles import (
        PHYSICAL_GPUS,
        physical_instruction_profile,
    )
    from zeus_core.optimizer.pipeline_frequency.plan import FrequencyPlan
    from zeus_core.optimizer.pipeline_frequency.plan_settings import PlanSettings, PlanTarget
    from zeus_core.optimizer.pipeline_frequency.plots import plot_frontier, plot_timeline
    from zeus_core.optimizer.pipeline_frequency.point_plan import plan_at_time
    from zeus_core.optimizer.pipeline_frequency.profile import InstructionProfile, ProfileMeasurement
    from zeus_core.optimizer.pipeline_frequency.profiler import FrequencySweep, InstructionProfiler
    from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime
    from zeus_core.optimizer.pipeline_frequency.schedule import (
        SCHEDULES,
        Instruction,
        InstructionKind,
        PipelineSchedule,
        gpipe,
        interleaved_1f1b,
        make_schedule,
        synchronous_1f1b,
        zero_bubble_1f1b,
    )
    from zeus_core.optimizer.pipeline_frequency.simulated_gpu import InstructionWork, SimulatedPipelineGPU

# Written out (not computed from _EXPORTS) so that type checkers and editors read it: a name in
# __all__ is re-exported for them. tests/core/test_typed_api.py keeps it equal to _EXPORTS.
__all__ = [
    "ControlMode",
    "ConvexHullCostModel",
    "CostModel",
    "ExponentialCostModel",
    "FrequencyController",
    "FrequencyPlan",
    "FrequencySweep",
    "Frontier",
    "Instruction",
    "InstructionKind",
    "InstructionOptions",
    "InstructionProfile",
    "InstructionProfiler",
    "InstructionWork",
    "PHYSICAL_GPUS",
    "PerseusRuntime",
    "PipelineDAG",
    "PipelineSchedule",
    "PlanSettings",
    "PlanTarget",
    "ProfileMeasurement",
    "Replay",
    "SCHEDULES",
    "SimulatedPipelineGPU",
    "TimeRounding",
    "gpipe",
    "interleaved_1f1b",
    "make_schedule",
    "physical_instruction_profile",
    "plan_at_time",
    "plan_frontier",
    "plot_frontier",
    "plot_timeline",
    "resolve_blocking_power",
    "synchronous_1f1b",
    "zero_bubble_1f1b",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
