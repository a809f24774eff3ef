"""Just-in-time GPU power-limit optimization (docs/optimizers/power-limit.md).

:class:`GlobalPowerLimitOptimizer` profiles power limits during the first steps of training and
keeps the best one set; a selector (:class:`Time`, :class:`Energy`, :class:`ZeusCost`,
:class:`MaxSlowdownConstraint`, or your own :class:`OptimumSelector`) says what "best" means.
"""

from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement, Visit
from zeus_core.optimizer.power_limit._optimizer import GlobalPowerLimitOptimizer
from zeus_core.optimizer.power_limit._options import PowerLimitOptions
from zeus_core.optimizer.power_limit._profile import JobGPUs, PowerLimitProfile
from zeus_core.optimizer.power_limit._sampling import window_name
from zeus_core.optimizer.power_limit._selectors import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    Time,
    ZeusCost,
)
from zeus_core.optimizer.power_limit._states import Deciding, Done, Measuring, Ready, State, Warmup

__all__ = [
    "GlobalPowerLimitOptimizer",
    "PowerLimitOptions",
    "OptimumSelector",
    "Time",
    "Energy",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "PowerLimitMeasurement",
    "Visit",
    "PowerLimitProfile",
    "JobGPUs",
    "Ready",
    "Warmup",
    "Measuring",
    "Deciding",
    "Done",
    "State",
    "window_name",
]
