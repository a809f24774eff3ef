# zeus-source: docs/optimize/power_limit_optimizer.md:55
# sha256: 4d800742112d4e4a643452bb2e553770eaf6637fbe2ca13a79d1e194b1b43821
# stand-ins: yes
# ---
from transformers import Trainer
from zeus_core.compat.monitor import ZeusMonitor
from zeus_core.compat.optimizer.power_limit import HFGlobalPowerLimitOptimizer

monitor = ZeusMonitor()
plo = HFGlobalPowerLimitOptimizer(monitor)

# Also works with trl.SFTTrainer.
trainer = Trainer(
    ...,
    callbacks=[plo],
)
