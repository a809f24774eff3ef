"""Zeus's ``zeus.optimizer.power_limit``: the suite's power-limit optimizer under Zeus's names.

:class:`GlobalPowerLimitOptimizer` takes Zeus's arguments in Zeus's order with Zeus's defaults
(``ZeusCost(eta_knob=0.5)``, ``warmup_steps=10``, ``profile_steps=40``, ``pl_step=25``) and runs
in Zeus's loop (no ``on_train_begin`` needed); the selectors are the suite's.
:class:`HFGlobalPowerLimitOptimizer` (Hugging Face ``Trainer``) loads ``transformers`` on first use.

Example:
    >>> from zeus_core.compat.optimizer.power_limit import MaxSlowdownConstraint
    >>> MaxSlowdownConstraint(factor=1.1).factor
    1.1
"""

from __future__ import annotations

from typing import Any

from zeus_core.optimizer.power_limit import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)

__all__ = [
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",  # noqa: F822 - loaded on first use (module __getattr__)
    "OptimumSelector",
    "Energy",
    "Time",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "PowerLimitMeasurement",
]


def __getattr__(name: str) -> Any:
    if name == "HFGlobalPowerLimitOptimizer":  # imports transformers: only when asked for
        from zeus_integrations.huggingface import HFGlobalPowerLimitOptimizer

        return HFGlobalPowerLimitOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
