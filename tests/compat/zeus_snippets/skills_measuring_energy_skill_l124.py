# zeus-source: skills/measuring-energy/SKILL.md:124
# sha256: 39088af0c748b9df74531fc849bb3b9fe444cc01c231ff342ffa6ff6fd166f7c
# stand-ins: yes
# rapl: fake
# expect: ZeusSoCInitError
# check: ^NVIDIA A40$ ;; ^250000$ ;; raised ZeusSoCInitError
# ---
from zeus_core.compat.device import get_gpus, get_cpus, get_soc

gpus = get_gpus()  # NVML (NVIDIA) or AMDSMI (AMD) behind one interface
print(gpus.get_name(0))
print(gpus.get_instant_power_usage(0))  # milliwatts
if gpus.supports_get_total_energy_consumption(0):
    print(gpus.get_total_energy_consumption(0))  # cumulative millijoules

cpus = get_cpus()  # RAPL
print(cpus.get_total_energy_consumption(0).cpu_mj)  # cumulative millijoules

soc = get_soc()  # Apple silicon or Jetson
print(soc.get_total_energy_consumption())
