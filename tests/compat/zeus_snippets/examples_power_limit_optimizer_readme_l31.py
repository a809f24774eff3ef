# zeus-source: examples/power_limit_optimizer/README.md:31
# sha256: 6cbb1bf1ab5dd69fb181280a272740dbf7b7b8edc1dbc03c5bbc83a23fada231
# stand-ins: yes
# before: from zeus_core.compat.monitor import ZeusMonitor; from zeus_core.compat.optimizer.power_limit import GlobalPowerLimitOptimizer
# ---
monitor = ZeusMonitor(gpu_indices=[local_rank]) # pass in local rank to gpu_indices.
plo = GlobalPowerLimitOptimizer(monitor)
