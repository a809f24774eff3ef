# zeus-source: skills/measuring-energy/SKILL.md:69
# sha256: 35a084183849cfa56840485b82761433eb228e9454e451745d6bc27758211a7c
# stand-ins: yes
# check: ^\{0: 250\.0\}$
# ---
from zeus_core.compat.monitor import PowerMonitor

def run_workload() -> None: ...

if __name__ == "__main__":
    monitor = PowerMonitor(gpu_indices=[0], update_period=0.1)
    run_workload()
    print(monitor.get_power())  # {0: ...} in Watts, latest sample
    timeline = monitor.get_power_timeline("device_instant")  # {0: [(timestamp, watts), ...]}
    monitor.stop()
