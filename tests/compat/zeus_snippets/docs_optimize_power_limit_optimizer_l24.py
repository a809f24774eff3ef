# zeus-source: docs/optimize/power_limit_optimizer.md:24
# sha256: 6ca5d9a4b6fe076622d30f9012a2b2c8dcdf7ff098a5d0eac9fdd5e3d7726419
# stand-ins: yes
# gpus: 4
# ---
from zeus_core.compat.monitor import ZeusMonitor
from zeus_core.compat.optimizer.power_limit import GlobalPowerLimitOptimizer

# Data parallel training with four GPUs.
monitor = ZeusMonitor(gpu_indices=[0,1,2,3])
plo = GlobalPowerLimitOptimizer(monitor)

for epoch in range(100):
    plo.on_epoch_begin()

    for x, y in train_dataloader:
        plo.on_step_begin()
        # Learn from x and y
        plo.on_step_end()

    plo.on_epoch_end()
