# zeus-source: skills/measuring-energy/SKILL.md:34
# sha256: 3bcbe01e5a38221bb939d7e0c1f0c533e6bb90ff1e879ff15bc9ff99fdba7a5d
# stand-ins: yes
# gpus: 2
# check: \{0: \S+, 1: \S+\}
# ---
from zeus_core.compat.monitor import ZeusMonitor

def run_workload() -> None: ...

if __name__ == "__main__":
    monitor = ZeusMonitor(gpu_indices=[0, 1])

    monitor.begin_window("workload")
    run_workload()
    result = monitor.end_window("workload")

    print(f"{result.time} s, {result.total_energy} J")
    print(result.gpu_energy)  # {0: ..., 1: ...} in Joules
