# The public names of `zeus_integrations`, listed once. Type checkers read this stub; at run time
# zeus_integrations/__init__.py imports each adapter's framework only when its class is first used.
from zeus_integrations.accelerate import ZeusAccelerateHook as ZeusAccelerateHook
from zeus_integrations.fabric import ZeusFabricCallback as ZeusFabricCallback
from zeus_integrations.huggingface import HFGlobalPowerLimitOptimizer as HFGlobalPowerLimitOptimizer
from zeus_integrations.huggingface import ZeusTrainerCallback as ZeusTrainerCallback
from zeus_integrations.lightning import ZeusCallback as ZeusCallback
