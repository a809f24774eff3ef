# zeus-source: skills/measuring-energy/SKILL.md:96
# sha256: dae513a99c5724142b13d9e2218148a94df47c07280774f949b7bf6acf76a045
# stand-ins: yes
# clock: accelerated 500
# check: ^[0-9.e-]+ J/iter, [0-9.e-]+ s/iter$
# status: runs
# change: none: its default sweep (Zeus's 1-10 s windows and cooldowns, 10 trials each) is about 50 minutes of wall time, as in Zeus; CI runs it on a clock 500 times faster whose sleeps return at once (the fake GPU's energy counter follows that clock)
# ---
from zeus_core.compat.monitor import ZeusMonitor
from zeus_core.compat.profile import measure, profile_parameters

def one_iteration() -> None: ...

if __name__ == "__main__":
    monitor = ZeusMonitor(gpu_indices=[0])

    # If good durations are unknown, sweep both and pick the smallest valid values.
    measurement_report, cooldown_report = profile_parameters(one_iteration, monitor)

    # With known durations, run a single trial.
    trial = measure(one_iteration, monitor, measurement_duration=5.0, cooldown_duration=10.0)
    print(f"{trial.energy_per_iter} J/iter, {trial.time_per_iter} s/iter")
