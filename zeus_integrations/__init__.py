"""Framework adapters. Each imports its framework only when its class is first used.

* ``ZeusCallback`` — Lightning (``zeus_integrations.lightning``)
* ``ZeusTrainerCallback`` — Hugging Face ``Trainer`` / TRL ``SFTTrainer`` (``zeus_integrations.huggingface``)
* ``HFGlobalPowerLimitOptimizer`` — the power-limit optimizer as a ``Trainer`` callback
  (``zeus_integrations.hf_power_limit``)
* ``ZeusAccelerateHook`` and ``attach`` — plain Accelerate loops (``zeus_integrations.accelerate``)
* ``ZeusFabricCallback`` — Lightning Fabric loops through ``fabric.call`` (``zeus_integrations.fabric``)
* pipeline-parallel instruction hooks — ``zeus_integrations.pipeline``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ZeusCallback": "zeus_integrations.lightning",
    "ZeusTrainerCallback": "zeus_integrations.huggingface",
    "ZeusAccelerateHook": "zeus_integrations.accelerate",
    "ZeusFabricCallback": "zeus_integrations.fabric",
    "HFGlobalPowerLimitOptimizer": "zeus_integrations.hf_power_limit",
}

if TYPE_CHECKING:  # real types for editors and type checkers; run time stays lazy
    from zeus_integrations.accelerate import ZeusAccelerateHook
    from zeus_integrations.fabric import ZeusFabricCallback
    from zeus_integrations.hf_power_limit import HFGlobalPowerLimitOptimizer
    from zeus_integrations.huggingface import ZeusTrainerCallback
    from zeus_integrations.lightning import ZeusCallback

# Written out (not computed from _EXPORTS) so that type checkers and editors read it: a name in
# __all__ is re-exported for them. tests/core/test_typed_api.py keeps it equal to _EXPORTS.
__all__ = [
    "HFGlobalPowerLimitOptimizer",
    "ZeusAccelerateHook",
    "ZeusCallback",
    "ZeusFabricCallback",
    "ZeusTrainerCallback",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_integrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
