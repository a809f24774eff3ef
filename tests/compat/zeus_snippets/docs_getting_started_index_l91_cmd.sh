# zeus-source: docs/getting_started/index.md:91
# sha256: ea9c14330dc256950d0d9e3680300f4a90cd9b35f0ac663b97f508e0ee6a08aa
# gpus: 2
# check: PyTorch version ;; cuda:0 ;; cuda:1
# ---
python -m zeus_core.compat.show_env
