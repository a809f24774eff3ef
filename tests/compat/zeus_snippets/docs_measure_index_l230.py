# zeus-source: docs/measure/index.md:230
# sha256: 628d8084514e36ad34b786007999543c744f877426903210c3ed9533f6343150
# stand-ins: yes
# before: from zeus_core.compat.monitor import ZeusMonitor; monitor = ZeusMonitor(); monitor.begin_window("epoch")
# ---
# ...
mes = monitor.end_window("epoch")
apple_energy_metrics = mes.soc_energy
