# The public names of `zeus_core`, listed once. Type checkers read this stub; at run time
# zeus_core/__init__.py loads each name's module on first use (zeus_core/_lazy.py).
__version__: str

# training protocol, ranks and the Zeus cost
from zeus_core._cost import zeus_cost as zeus_cost
from zeus_core._distributed import JobMeasurement as JobMeasurement
from zeus_core._distributed import reduce_measurement as reduce_measurement
from zeus_core.callback import CallbackList as CallbackList
from zeus_core.callback import TrainingCallback as TrainingCallback
from zeus_core.callback import TrainingProtocol as TrainingProtocol

# carbon intensity and electricity price, offline first
from zeus_core.carbon import Footprint as Footprint
from zeus_core.device import CPU as CPU
from zeus_core.device import GPU as GPU
from zeus_core.device import Activity as Activity
from zeus_core.device import ChildProcessActivity as ChildProcessActivity
from zeus_core.device import CpuEnergy as CpuEnergy
from zeus_core.device import Device as Device
from zeus_core.device import PowerLimitConstraints as PowerLimitConstraints
from zeus_core.device import ProcessActivity as ProcessActivity
from zeus_core.device import discover as discover
from zeus_core.device import get_cpus as get_cpus
from zeus_core.device import get_gpus as get_gpus

# devices
from zeus_core.device._amd import AMDGPU as AMDGPU
from zeus_core.device._nvidia import NVIDIAGPU as NVIDIAGPU
from zeus_core.device._rapl import RaplCPU as RaplCPU

# errors
from zeus_core.exceptions import ZeusConfigError as ZeusConfigError
from zeus_core.exceptions import ZeusDeviceError as ZeusDeviceError
from zeus_core.exceptions import ZeusDeviceNotFoundError as ZeusDeviceNotFoundError
from zeus_core.exceptions import ZeusError as ZeusError
from zeus_core.exceptions import ZeusNotSupportedError as ZeusNotSupportedError
from zeus_core.exceptions import ZeusPermissionError as ZeusPermissionError
from zeus_core.exceptions import ZeusProfileError as ZeusProfileError
from zeus_core.exceptions import ZeusWindowError as ZeusWindowError

# measurement
from zeus_core.monitor import Measurement as Measurement
from zeus_core.monitor import MetricsServer as MetricsServer
from zeus_core.monitor import PowerMonitor as PowerMonitor
from zeus_core.monitor import PrometheusExporter as PrometheusExporter
from zeus_core.monitor import TemperatureMonitor as TemperatureMonitor
from zeus_core.monitor import WindowHandle as WindowHandle
from zeus_core.monitor import ZeusMonitor as ZeusMonitor
from zeus_core.monitor import check_window as check_window

# batch-size optimizer
from zeus_core.optimizer.batch_size import BatchSizeBandit as BatchSizeBandit
from zeus_core.optimizer.batch_size import BatchSizeOptimizer as BatchSizeOptimizer
from zeus_core.optimizer.batch_size import JobSpec as JobSpec

# Perseus pipeline frequency planning
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan as FrequencyPlan
from zeus_core.optimizer.pipeline_frequency import InstructionProfile as InstructionProfile
from zeus_core.optimizer.pipeline_frequency import PerseusRuntime as PerseusRuntime
from zeus_core.optimizer.pipeline_frequency import plan_frontier as plan_frontier

# power-limit optimizer
from zeus_core.optimizer.power_limit import Energy as Energy
from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer as GlobalPowerLimitOptimizer
from zeus_core.optimizer.power_limit import MaxSlowdownConstraint as MaxSlowdownConstraint
from zeus_core.optimizer.power_limit import OptimumSelector as OptimumSelector
from zeus_core.optimizer.power_limit import PowerLimitOptions as PowerLimitOptions
from zeus_core.optimizer.power_limit import Time as Time
from zeus_core.optimizer.power_limit import ZeusCost as ZeusCost

# GPU settings: record at start, restore on every exit path
from zeus_core.settings import Setting as Setting
from zeus_core.settings import SettingsGuard as SettingsGuard

# simulated devices for machines without a GPU (always marked "simulated")
from zeus_core.testing import MeasuredProfile as MeasuredProfile
from zeus_core.testing import PhysicalModel as PhysicalModel
from zeus_core.testing import SimulatedGPU as SimulatedGPU
from zeus_core.testing import VirtualClock as VirtualClock
from zeus_core.testing import simulate_steps as simulate_steps

# training: the engine under every adapter, and the energy insights adapters add
from zeus_core.training import EnergyInsights as EnergyInsights
from zeus_core.training import TrainingLifecycle as TrainingLifecycle
from zeus_core.training import TrainingTracker as TrainingTracker
