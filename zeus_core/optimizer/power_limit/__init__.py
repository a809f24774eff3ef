"""Just-in-time GPU power-limit optimization.

:class:`GlobalPowerLimitOptimizer` profiles power limits during the first steps of training and
keeps the best one set; the optimum selectors (:class:`Time`, :class:`Energy`,
:class:`ZeusCost`, :class:`MaxSlowdownConstraint`, or your own :class:`OptimumSelector`) say
what "best" means. Modules: ``optimizer`` (the callback), ``selectors``, ``planner`` (what to
profile next, and the early-stopping rules), ``measurement`` (per-limit results, early-stopping
knobs), ``sampling`` (how measurements are cut into samples read once from the energy counter),
``states`` (the state machine's states), ``profile`` (the JSON profile file), ``generator``
(generated profiles: a physical model of GPUs under a power cap, with noise, for development
and benchmarks).

Example:
    >>> from zeus_core import ZeusMonitor  # doctest: +SKIP
    >>> plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), Energy())  # doctest: +SKIP
    >>> plo.on_train_begin()  # then on_step_begin/on_epoch_end..., on_train_end  # doctest: +SKIP
"""

from zeus_core.optimizer.power_limit.measurement import EarlyStopping, PowerLimitMeasurement
from zeus_core.optimizer.power_limit.optimizer import GlobalPowerLimitOptimizer, window_name
from zeus_core.optimizer.power_limit.profile import JobGPUs, PowerLimitProfile
from zeus_core.optimizer.power_limit.selectors import (
    Energy,
    LinearCostSelector,
    MaxSlowdownConstraint,
    OptimumSelector,
    Time,
    ZeusCost,
)
from zeus_core.optimizer.power_limit.states import Done, Profiling, Ready, State, Warmup

__all__ = [
    "GlobalPowerLimitOptimizer",
    "OptimumSelector",
    "LinearCostSelector",
    "Time",
    "Energy",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "PowerLimitMeasurement",
    "EarlyStopping",
    "PowerLimitProfile",
    "JobGPUs",
    "Ready",
    "Warmup",
    "Profiling",
    "Done",
    "State",
    "window_name",
]
