"""Perseus's planner: from a schedule and an instruction profile to the time–energy frontier and its plans.

Pure functions of their inputs (no devices, no ranks). How it plans: docs/optimizers/perseus.md.
Importing this package imports numpy and networkx, never scipy or matplotlib (loaded when used).

Example:
    >>> from zeus_core.optimizer.pipeline_frequency import synchronous_1f1b
    >>> from zeus_core.optimizer.pipeline_frequency.planner import plan_frontier
    >>> from zeus_core.testing import physical_instruction_profile
    >>> frontier = plan_frontier(synchronous_1f1b(2, 4), physical_instruction_profile("a100", 2))
    >>> frontier.zero_slowdown_plan().label
    'zero-slowdown'
"""

from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.planner._cost_model import (
    ConvexHullCostModel,
    CostModel,
    ExecutionOption,
    ExponentialCostModel,
    InstructionOptions,
    TimeRounding,
)
from zeus_core.optimizer.pipeline_frequency.planner._dag import PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner._frontier import Frontier, Replay, plan_frontier
from zeus_core.optimizer.pipeline_frequency.planner._plan_at_time import PlanTiming, plan_at_time
from zeus_core.optimizer.pipeline_frequency.planner._plots import plot_frontier, plot_timeline

__all__ = [
    "plan_frontier",
    "Frontier",
    "Replay",
    "plan_at_time",
    "PlanTiming",
    "PipelineDAG",
    "InstructionOptions",
    "ExecutionOption",
    "CostModel",
    "ConvexHullCostModel",
    "ExponentialCostModel",
    "TimeRounding",
    "resolve_blocking_power",
    "plot_frontier",
    "plot_timeline",
]
