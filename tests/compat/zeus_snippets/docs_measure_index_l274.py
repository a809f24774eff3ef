# zeus-source: docs/measure/index.md:274
# sha256: 106b4a4f6af4a4ffefdcd0b02127cdc5da8d7a233999683d59f701b9f6881c5e
# stand-ins: yes
# before: from zeus_core.compat.monitor import ZeusMonitor; monitor = ZeusMonitor(); monitor.begin_window("epoch")
# ---
# ...
mes = monitor.end_window("epoch")
jetson_energy_metrics = mes.soc_energy
