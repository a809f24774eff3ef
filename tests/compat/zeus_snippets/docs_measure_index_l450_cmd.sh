# zeus-source: docs/measure/index.md:450
# sha256: d3a46ccea8dfcf7f7806d49f488c58c7499a5990dc457e9124b348a4c90d53e2
# ctrl-c: 2.5
# gpus: 2
# check: Total energy \(J\): ;; gpu_energy=\{0: \S+, 1: \S+\}
# ---
python -m zeus_core.compat.monitor energy
