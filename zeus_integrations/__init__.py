"""Framework adapters. Each imports its framework only when its class is first used.

* ``ZeusCallback``: Lightning (``zeus_integrations.lightning``)
* ``ZeusTrainerCallback``: Hugging Face ``Trainer`` / TRL ``SFTTrainer`` (``zeus_integrations.huggingface``)
* ``HFGlobalPowerLimitOptimizer``: Zeus's name for the power-limit optimizer as a ``Trainer`` callback
* ``ZeusAccelerateHook``: plain Accelerate loops (``zeus_integrations.accelerate``)
* ``ZeusFabricCallback``: Lightning Fabric loops through ``fabric.call`` (``zeus_integrations.fabric``)
* pipeline-parallel instruction hooks: ``zeus_integrations.pipeline``

The names are listed once, in ``__init__.pyi``.
"""

from zeus_core._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__, globals())
