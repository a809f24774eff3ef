"""Child process for the fault tests: changes GPU settings, then waits to be ended as argv[1] says.

Usage: ``python -m tests.settings.fault_child MODE [LOG]`` with ``ZEUS_FAKE_NVML_STATE`` naming the
persistent fake NVML's state file (tests/fakes/persistent_nvml.py). Setters are slowed to
``ZEUS_FAKE_NVML_SET_DELAY_S`` only once the settings are changed, so that reaching READY is quick
and every restore is slow.

Modes:
    plo-wait: the power-limit optimizer lowers the limit below 250 W, prints ``READY <pid>`` and
        sleeps; ``KeyboardInterrupt`` prints INTERRUPTED and exits 3.
    plo-train-end: the same, then prints RESTORING and calls ``on_train_end`` (a slow restore),
        then prints RESTORED.
    perseus-nvml: Perseus's clock controller locks the fake NVIDIA GPU at 900 MHz, prints READY and
        sleeps.
    perseus-sim LOG: the controller works on a simulated GPU an administrator locked at 1200 MHz,
        keeps changing clocks (every change takes the delay) and appends each GPU clock state to
        LOG as JSON lines ``{"t": s, "thread": name, "locked": [min, max] | null}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from tests.fakes.persistent_nvml import DELAY_ENV, install_from_env, sets_started

DELAY_S = float(os.environ.get(DELAY_ENV, "0"))


def lower_the_limit() -> object:
    """A GlobalPowerLimitOptimizer that has lowered the fake GPU's limit below 250 W."""
    from zeus_core.device._nvidia import nvidia_gpus
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

    gpus = nvidia_gpus(environ={})
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(gpus=gpus, cpu_indices=[]),
        Energy(),
        wait_steps=0,
        warmup_steps=1,
        profile_steps=2,
        pl_step=100,
        early_stopping=None,
    )
    plo.on_train_begin()
    plo.on_epoch_begin()
    for _ in range(500):
        if gpus[0].get_power_limit() < 250:
            return plo
        plo.on_step_begin()
        time.sleep(0.01)
        plo.on_step_end()
    raise SystemExit("the limit never went below 250 W")


def wait_for_signal() -> None:
    """Sleep until a signal ends the process (exit 4 if none comes in 60 s)."""
    for _ in range(600):
        time.sleep(0.1)
    sys.exit(4)


def plo_mode(mode: str) -> None:
    fake = install_from_env()
    plo = lower_the_limit()
    fake.set_delay_s = DELAY_S
    if mode == "plo-train-end":
        print(f"RESTORING {sets_started(fake.state_path)}", flush=True)  # set calls begun so far
        plo.on_train_end()  # type: ignore[attr-defined]
        print("RESTORED", flush=True)
        return
    try:
        print(f"READY {os.getpid()}", flush=True)  # inside try: the signal may come at once
        wait_for_signal()
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        plo.on_train_end()  # type: ignore[attr-defined]  # what an adapter does: a no-op by now
        sys.exit(3)


def perseus_nvml() -> None:
    from zeus_core.device._nvidia import nvidia_gpus
    from zeus_core.optimizer.pipeline_frequency import FrequencyController

    fake = install_from_env()
    ctl = FrequencyController(nvidia_gpus(environ={})[0])
    ctl.start()
    ctl.request(900)
    assert ctl.wait()
    fake.set_delay_s = DELAY_S
    print(f"READY {os.getpid()}", flush=True)
    wait_for_signal()


def perseus_sim(log: str) -> None:
    from zeus_core.optimizer.pipeline_frequency import FrequencyController
    from zeus_core.testing import PhysicalModel, SimulatedGPU

    class LoggedGPU(SimulatedGPU):
        """A simulated GPU whose clock changes take DELAY_S and are logged."""

        def _log(self) -> None:
            with open(log, "a") as f:
                entry = {"t": time.time(), "thread": threading.current_thread().name}
                f.write(json.dumps({**entry, "locked": self.get_locked_sm_frequency()}) + "\n")

        def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
            time.sleep(DELAY_S)
            super().set_locked_sm_frequency(min_mhz, max_mhz)
            self._log()

        def reset_locked_sm_frequency(self) -> None:
            time.sleep(DELAY_S)
            super().reset_locked_sm_frequency()
            self._log()

    gpu = LoggedGPU(PhysicalModel.a40())
    SimulatedGPU.set_locked_sm_frequency(gpu, 1200)  # the administrator's lock, before the run
    gpu._log()
    ctl = FrequencyController(gpu)
    ctl.start()
    print(f"READY {os.getpid()}", flush=True)
    for i in range(1200):  # a plan that keeps changing the clock, as a pipeline's instructions do
        ctl.request((900, 1410)[i % 2])
        time.sleep(0.05)
    sys.exit(4)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode.startswith("plo-"):
        plo_mode(mode)
    elif mode == "perseus-nvml":
        perseus_nvml()
    else:
        perseus_sim(sys.argv[2])
