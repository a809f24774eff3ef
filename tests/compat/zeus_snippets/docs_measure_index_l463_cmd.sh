# zeus-source: docs/measure/index.md:463
# sha256: bfd58b767970e06813492cc22c0b1bf2ec17e293ed6783d82346561f446ed73d
# ctrl-c: 3.5
# gpus: 2
# check: \{'GPU0': 250\.0, 'GPU1': 250\.0\} ;; Total energy \(J\): \{'GPU0'
# ---
python -m zeus_core.compat.monitor power
