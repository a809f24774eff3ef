"""Child process for the restore tests: lowers the limit, then leaves in the way argv[1] says.

Usage: python plo_exit_script.py MODE LOGFILE [zeus-loop], with MODE one of ``sigterm`` / ``sigint``
(wait for the signal), ``exit`` (return from main without on_train_end), ``crash`` (uncaught
exception). ``zeus-loop``: no ``on_train_begin``, as in Zeus's documented loop (the first epoch
event begins training).
Every power-limit change is appended to LOGFILE, one per line, in W.
"""

from __future__ import annotations

import sys
import time

from tests.optimizer.plo_support import synthetic_profile
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer
from zeus_core.testing import SimulatedGPU, VirtualClock

MODE, LOG = sys.argv[1], sys.argv[2]
ZEUS_LOOP = sys.argv[3:] == ["zeus-loop"]


class LoggedGPU(SimulatedGPU):
    """A simulated GPU that records every limit it is given."""

    def set_power_limit(self, watts: float) -> None:
        """Set the limit and append it to LOG."""
        super().set_power_limit(watts)
        with open(LOG, "a") as f:
            f.write(f"{watts:g}\n")


gpu = LoggedGPU(synthetic_profile(), clock=VirtualClock())
gpu.set_power_limit(280)  # the user's limit before training: what must come back
plo = GlobalPowerLimitOptimizer(
    ZeusMonitor(gpus=[gpu], cpu_indices=[]),
    Energy(),
    wait_steps=0,
    warmup_steps=1,
    profile_steps=2,
    pl_step=50,
    early_stopping=None,
)
if not ZEUS_LOOP:
    plo.on_train_begin()
plo.on_epoch_begin()
while gpu.get_power_limit() >= 250:  # profile until the limit is below the original
    plo.on_step_begin()
    gpu.run_steps(1)
    plo.on_step_end()
if MODE in ("sigterm", "sigint"):
    try:
        print(f"READY {gpu.get_power_limit():g}", flush=True)  # inside try: the signal may come at once
        for _ in range(600):
            time.sleep(0.1)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        plo.on_train_end()  # what an adapter does when training is interrupted: a no-op by now
        sys.exit(3)
    sys.exit(4)  # the signal never came
print(f"READY {gpu.get_power_limit():g}", flush=True)
if MODE == "crash":
    raise RuntimeError("training crashed without on_train_end")
