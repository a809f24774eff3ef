# zeus-source: examples/jax/README.md:5
# sha256: f9e072d1d3792acfd8ade496532e71a7757ffd777040761d4b5e8779e0bd6512
# stand-ins: yes
# jax: fake
# before: from zeus_core.compat.monitor import ZeusMonitor; import jax
# ---
monitor = ZeusMonitor(sync_execution_with="jax")

monitor.begin_window("computations")
# Run computation
measurement = monitor.end_window("computations")
