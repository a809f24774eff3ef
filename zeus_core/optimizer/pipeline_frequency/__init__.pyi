# The public names of `zeus_core.optimizer.pipeline_frequency`, listed once. Type checkers read this
# stub; at run time __init__.py loads each name's module on first use (zeus_core/_lazy.py).
# The shared data: schedules, profiles, plans.
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan as FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile as InstructionProfile
from zeus_core.optimizer.pipeline_frequency._profile import ProfileMeasurement as ProfileMeasurement
from zeus_core.optimizer.pipeline_frequency._schedule import SCHEDULES as SCHEDULES
from zeus_core.optimizer.pipeline_frequency._schedule import Instruction as Instruction
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind as InstructionKind
from zeus_core.optimizer.pipeline_frequency._schedule import PipelineSchedule as PipelineSchedule
from zeus_core.optimizer.pipeline_frequency._schedule import gpipe as gpipe
from zeus_core.optimizer.pipeline_frequency._schedule import interleaved_1f1b as interleaved_1f1b
from zeus_core.optimizer.pipeline_frequency._schedule import make_schedule as make_schedule
from zeus_core.optimizer.pipeline_frequency._schedule import synchronous_1f1b as synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency._schedule import zero_bubble_1f1b as zero_bubble_1f1b

# The planner's and the runtime's most used names (their faces list the rest).
from zeus_core.optimizer.pipeline_frequency.planner import ConvexHullCostModel as ConvexHullCostModel
from zeus_core.optimizer.pipeline_frequency.planner import CostModel as CostModel
from zeus_core.optimizer.pipeline_frequency.planner import ExponentialCostModel as ExponentialCostModel
from zeus_core.optimizer.pipeline_frequency.planner import Frontier as Frontier
from zeus_core.optimizer.pipeline_frequency.planner import InstructionOptions as InstructionOptions
from zeus_core.optimizer.pipeline_frequency.planner import PipelineDAG as PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner import Replay as Replay
from zeus_core.optimizer.pipeline_frequency.planner import TimeRounding as TimeRounding
from zeus_core.optimizer.pipeline_frequency.planner import plan_at_time as plan_at_time
from zeus_core.optimizer.pipeline_frequency.planner import plan_frontier as plan_frontier
from zeus_core.optimizer.pipeline_frequency.planner import plot_frontier as plot_frontier
from zeus_core.optimizer.pipeline_frequency.planner import plot_timeline as plot_timeline
from zeus_core.optimizer.pipeline_frequency.planner import resolve_blocking_power as resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.runtime import ControlMode as ControlMode
from zeus_core.optimizer.pipeline_frequency.runtime import FrequencyController as FrequencyController
from zeus_core.optimizer.pipeline_frequency.runtime import FrequencySweep as FrequencySweep
from zeus_core.optimizer.pipeline_frequency.runtime import InstructionProfiler as InstructionProfiler
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime as PerseusRuntime
from zeus_core.optimizer.pipeline_frequency.runtime import PlanSettings as PlanSettings
from zeus_core.optimizer.pipeline_frequency.runtime import PlanTarget as PlanTarget
