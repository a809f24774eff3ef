# zeus-source: docs/measure/index.md:352
# sha256: b81bd0feb0c924aeaa22f08ca3d8be2412da753d54eef49eaf260908d0c9ba71
# stand-ins: yes
# services: pushgateway
# rapl: fake
# before: from zeus_core.compat.metric import EnergyHistogram
# ---
energy_histogram = EnergyHistogram(
    cpu_indices=[0], 
    gpu_indices=[0], 
    prometheus_url="http://localhost:9091", 
    job="training_energy_histogram",
    gpu_bucket_range=[10.0, 25.0, 50.0, 100.0],
    cpu_bucket_range=[5.0, 15.0, 30.0, 50.0],
    dram_bucket_range=[2.0, 8.0, 20.0, 40.0],
)
