# The public names of `zeus_core.optimizer.pipeline_frequency`, listed once. Type checkers read this
# stub; at run time __init__.py loads each name's module on first use (zeus_core/_lazy.py).
from zeus_core.optimizer.pipeline_frequency.blocking_power import (
    resolve_blocking_power as resolve_blocking_power,
)
from zeus_core.optimizer.pipeline_frequency.controller import ControlMode as ControlMode
from zeus_core.optimizer.pipeline_frequency.controller import FrequencyController as FrequencyController
from zeus_core.optimizer.pipeline_frequency.cost_model import ConvexHullCostModel as ConvexHullCostModel
from zeus_core.optimizer.pipeline_frequency.cost_model import CostModel as CostModel
from zeus_core.optimizer.pipeline_frequency.cost_model import ExponentialCostModel as ExponentialCostModel
from zeus_core.optimizer.pipeline_frequency.cost_model import InstructionOptions as InstructionOptions
from zeus_core.optimizer.pipeline_frequency.cost_model import TimeRounding as TimeRounding
from zeus_core.optimizer.pipeline_frequency.dag import PipelineDAG as PipelineDAG
from zeus_core.optimizer.pipeline_frequency.frontier import Frontier as Frontier
from zeus_core.optimizer.pipeline_frequency.frontier import Replay as Replay
from zeus_core.optimizer.pipeline_frequency.frontier import plan_frontier as plan_frontier
from zeus_core.optimizer.pipeline_frequency.plan import FrequencyPlan as FrequencyPlan
from zeus_core.optimizer.pipeline_frequency.plan_settings import PlanSettings as PlanSettings
from zeus_core.optimizer.pipeline_frequency.plan_settings import PlanTarget as PlanTarget
from zeus_core.optimizer.pipeline_frequency.plots import plot_frontier as plot_frontier
from zeus_core.optimizer.pipeline_frequency.plots import plot_timeline as plot_timeline
from zeus_core.optimizer.pipeline_frequency.point_plan import plan_at_time as plan_at_time
from zeus_core.optimizer.pipeline_frequency.profile import InstructionProfile as InstructionProfile
from zeus_core.optimizer.pipeline_frequency.profile import ProfileMeasurement as ProfileMeasurement
from zeus_core.optimizer.pipeline_frequency.profiler import FrequencySweep as FrequencySweep
from zeus_core.optimizer.pipeline_frequency.profiler import InstructionProfiler as InstructionProfiler
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime as PerseusRuntime
from zeus_core.optimizer.pipeline_frequency.schedule import SCHEDULES as SCHEDULES
from zeus_core.optimizer.pipeline_frequency.schedule import Instruction as Instruction
from zeus_core.optimizer.pipeline_frequency.schedule import InstructionKind as InstructionKind
from zeus_core.optimizer.pipeline_frequency.schedule import PipelineSchedule as PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.schedule import gpipe as gpipe
from zeus_core.optimizer.pipeline_frequency.schedule import interleaved_1f1b as interleaved_1f1b
from zeus_core.optimizer.pipeline_frequency.schedule import make_schedule as make_schedule
from zeus_core.optimizer.pipeline_frequency.schedule import synchronous_1f1b as synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency.schedule import zero_bubble_1f1b as zero_bubble_1f1b
