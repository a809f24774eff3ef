"""Zeus Suite: measure and cut the energy of deep-learning training.

Public classes are importable from here; they load on first use, so ``import zeus_core``
imports neither torch nor any framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # devices
    "Device": "zeus_core.device.base",
    "GPU": "zeus_core.device.base",
    "CPU": "zeus_core.device.base",
    "CpuEnergy": "zeus_core.device.base",
    "PowerLimitConstraints": "zeus_core.device.base",
    "SimulatedGPU": "zeus_core.device.simulated",
    "VirtualClock": "zeus_core.device.simulated",
    "PhysicalModel": "zeus_core.device.simulated",
    "MeasuredProfile": "zeus_core.device.simulated",
    "simulate_steps": "zeus_core.device.simulated",
    "Activity": "zeus_core.device.activity",
    "ProcessActivity": "zeus_core.device.activity",
    "ChildProcessActivity": "zeus_core.device.activity",
    "get_gpus": "zeus_core.device.discovery",
    "get_cpus": "zeus_core.device.discovery",
    "discover": "zeus_core.device.discovery",
    "NVIDIAGPU": "zeus_core.device.nvidia",
    "AMDGPU": "zeus_core.device.amd",
    "RaplCPU": "zeus_core.device.rapl",
    # measurement
    "ZeusMonitor": "zeus_core.monitor.energy",
    "WindowHandle": "zeus_core.monitor.energy",
    "Measurement": "zeus_core.monitor.measurement",
    "PowerMonitor": "zeus_core.monitor.power",
    "TrainingTracker": "zeus_core.monitor.training",
    "TrainingLifecycle": "zeus_core.monitor.lifecycle",
    "PrometheusExporter": "zeus_core.monitor.prometheus",
    "MetricsServer": "zeus_core.monitor.prometheus",
    # power-limit optimizer
    "GlobalPowerLimitOptimizer": "zeus_core.optimizer.power_limit",
    "OptimumSelector": "zeus_core.optimizer.power_limit",
    "Time": "zeus_core.optimizer.power_limit",
    "Energy": "zeus_core.optimizer.power_limit",
    "ZeusCost": "zeus_core.optimizer.power_limit",
    "MaxSlowdownConstraint": "zeus_core.optimizer.power_limit",
    "EarlyStopping": "zeus_core.optimizer.power_limit",
    # batch-size optimizer
    "JobSpec": "zeus_core.optimizer.batch_size",
    "BatchSizeOptimizer": "zeus_core.optimizer.batch_size",
    "BatchSizeBandit": "zeus_core.optimizer.batch_size",
    # Perseus pipeline frequency planning
    "plan_frontier": "zeus_core.optimizer.pipeline_frequency",
    "InstructionProfile": "zeus_core.optimizer.pipeline_frequency",
    "FrequencyPlan": "zeus_core.optimizer.pipeline_frequency",
    "PerseusRuntime": "zeus_core.optimizer.pipeline_frequency",
    # GPU settings: record at start, restore on every exit path
    "SettingsGuard": "zeus_core.settings",
    "Setting": "zeus_core.settings",
    # training protocol and ranks
    "TrainingProtocol": "zeus_core.callback",
    "TrainingCallback": "zeus_core.callback",
    "CallbackList": "zeus_core.callback",
    "JobMeasurement": "zeus_core.distributed",
    "reduce_measurement": "zeus_core.distributed",
    # errors
    "ZeusError": "zeus_core.exceptions",
    "ZeusConfigError": "zeus_core.exceptions",
    "ZeusDeviceNotFoundError": "zeus_core.exceptions",
    "ZeusWindowError": "zeus_core.exceptions",
    "ZeusProfileError": "zeus_core.exceptions",
    "ZeusPermissionError": "zeus_core.exceptions",
    "ZeusDeviceError": "zeus_core.exceptions",
    "ZeusNotSupportedError": "zeus_core.exceptions",
}

if TYPE_CHECKING:  # real types for editors and type checkers; run time stays lazy
    from zeus_core.callback import CallbackList, TrainingCallback, TrainingProtocol
    from zeus_core.device.activity import Activity, ChildProcessActivity, ProcessActivity
    from zeus_core.device.amd import AMDGPU
    from zeus_core.device.base import CPU, GPU, CpuEnergy, Device, PowerLimitConstraints
    from zeus_core.device.discovery import discover, get_cpus, get_gpus
    from zeus_core.device.nvidia import NVIDIAGPU
    from zeus_core.device.rapl import RaplCPU
    from zeus_core.device.simulated import (
        MeasuredProfile,
        PhysicalModel,
        SimulatedGPU,
        VirtualClock,
        simulate_steps,
    )
    from zeus_core.distributed import JobMeasurement, reduce_measurement
    from zeus_core.exceptions import (
        ZeusConfigError,
        ZeusDeviceError,
        ZeusDeviceNotFoundError,
        ZeusError,
        ZeusNotSupportedError,
        ZeusPermissionError,
        ZeusProfileError,
        ZeusWindowError,
    )
    from zeus_core.monitor.energy import WindowHandle, ZeusMonitor
    from zeus_core.monitor.lifecycle import TrainingLifecycle
    from zeus_core.monitor.measurement import Measurement
    from zeus_core.monitor.power import PowerMonitor
    from zeus_core.monitor.prometheus import MetricsServer, PrometheusExporter
    from zeus_core.monitor.training import TrainingTracker
    from zeus_core.optimizer.batch_size import BatchSizeBandit, BatchSizeOptimizer, JobSpec
    from zeus_core.optimizer.pipeline_frequency import (
        FrequencyPlan,
        InstructionProfile,
        PerseusRuntime,
        plan_frontier,
    )
    from zeus_core.optimizer.power_limit import (
        EarlyStopping,
        Energy,
        GlobalPowerLimitOptimizer,
        MaxSlowdownConstraint,
        OptimumSelector,
        Time,
        ZeusCost,
    )
    from zeus_core.settings import Setting, SettingsGuard

# Written out (not computed from _EXPORTS) so that type checkers and editors read it: a name in
# __all__ is re-exported for them. tests/core/test_typed_api.py keeps it equal to _EXPORTS.
__all__ = [
    "AMDGPU",
    "Activity",
    "BatchSizeBandit",
    "BatchSizeOptimizer",
    "CPU",
    "CallbackList",
    "ChildProcessActivity",
    "CpuEnergy",
    "Device",
    "EarlyStopping",
    "Energy",
    "FrequencyPlan",
    "GPU",
    "GlobalPowerLimitOptimizer",
    "InstructionProfile",
    "JobMeasurement",
    "JobSpec",
    "MaxSlowdownConstraint",
    "MeasuredProfile",
    "Measurement",
    "MetricsServer",
    "NVIDIAGPU",
    "OptimumSelector",
    "PerseusRuntime",
    "PhysicalModel",
    "PowerLimitConstraints",
    "PowerMonitor",
    "ProcessActivity",
    "PrometheusExporter",
    "RaplCPU",
    "Setting",
    "SettingsGuard",
    "SimulatedGPU",
    "Time",
    "TrainingCallback",
    "TrainingLifecycle",
    "TrainingProtocol",
    "TrainingTracker",
    "VirtualClock",
    "WindowHandle",
    "ZeusConfigError",
    "ZeusCost",
    "ZeusDeviceError",
    "ZeusDeviceNotFoundError",
    "ZeusError",
    "ZeusMonitor",
    "ZeusNotSupportedError",
    "ZeusPermissionError",
    "ZeusProfileError",
    "ZeusWindowError",
    "discover",
    "get_cpus",
    "get_gpus",
    "plan_frontier",
    "reduce_measurement",
    "simulate_steps",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
