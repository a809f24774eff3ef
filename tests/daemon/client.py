"""A daemon client process for the tests: an unprivileged user's script on the fake GPUs.

Usage: ``python -m tests.daemon.client MODE [ARGS]`` with ``ZEUSD_SOCK_PATH`` naming the daemon and
the shared fake NVML refusing this process's own writes (``ZEUS_FAKE_NVML_ROOT=0``).

Modes:
    direct WATTS: set the limit on the NVML GPU itself; prints ``REFUSED <message>`` (no permission).
    set WATTS [GPU]: ``zeus_core.get_gpus()[GPU].set_power_limit(WATTS)`` (through the daemon), prints
        ``READY``, then sleeps until killed (exit 4 after 60 s).
    set-exit WATTS: the same, then exits normally without restoring (the daemon restores).
    guard WATTS: a SettingsGuard records, sets the limit, prints ``READY``, restores, prints ``DONE``.
    try WATTS [GPU]: set once; prints ``OK`` or ``ERROR <message>`` and exits.
    plo: the power-limit optimizer lowers the limit below 250 W, prints ``READY``, ends training
        (its restore), prints ``RESTORED``.
    perseus MHZ: Perseus's clock controller locks the SM clock, prints ``READY <locked clocks>`` (as the GPU
        has them then), closes, ``RESTORED``.
    env: prints ``zeus-suite env --json``'s daemon object and GPU control column as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tests.daemon.fake_gpus import install_from_env, settings


def _sleep_until_killed() -> None:
    for _ in range(600):
        time.sleep(0.1)
    sys.exit(4)


def _gpu(index: int = 0):  # type: ignore[no-untyped-def]
    import zeus_core

    return zeus_core.get_gpus()[index]


def main(mode: str, args: list[str]) -> None:
    install_from_env()
    if mode == "direct":
        from zeus_core.device._nvidia import nvidia_gpus
        from zeus_core.exceptions import ZeusPermissionError

        try:
            nvidia_gpus(environ={})[0].set_power_limit(float(args[0]))
        except ZeusPermissionError as e:
            print(f"REFUSED {e}", flush=True)
    elif mode in ("set", "set-exit"):
        _gpu(int(args[1]) if len(args) > 1 else 0).set_power_limit(float(args[0]))
        print("READY", flush=True)
        if mode == "set":
            _sleep_until_killed()
    elif mode == "try":
        try:
            _gpu(int(args[1]) if len(args) > 1 else 0).set_power_limit(float(args[0]))
            print("OK", flush=True)
        except Exception as e:
            print(f"ERROR {type(e).__name__}: {e}", flush=True)
    elif mode == "guard":
        from zeus_core.settings import SettingsGuard

        gpu = _gpu()
        with SettingsGuard([gpu]) as guard:
            guard.set_power_limit(gpu, float(args[0]))
            print(f"READY {gpu.get_power_limit():g}", flush=True)
        print(f"DONE {gpu.get_power_limit():g}", flush=True)
    elif mode == "plo":
        _plo()
    elif mode == "perseus":
        from zeus_core.optimizer.pipeline_frequency.runtime import FrequencyController

        ctl = FrequencyController(_gpu())
        ctl.start()
        ctl.request(int(args[0]))
        assert ctl.wait()
        print(f"READY {json.dumps(settings(os.environ['ZEUS_FAKE_NVML_STATE'])[0][1])}", flush=True)
        ctl.close()
        print("RESTORED", flush=True)
    elif mode == "env":
        from zeus_core.device._cli_env import report_dict
        from zeus_core.device._discovery import discover

        data = report_dict(discover(sysfs_root="/nonexistent"))
        print(
            json.dumps({"daemon": data.get("daemon"), "control": [g["control"] for g in data["gpus"]]}),
            flush=True,
        )
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def _plo() -> None:
    import zeus_core
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

    gpus = zeus_core.get_gpus()
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
            break
        plo.on_step_begin()
        time.sleep(0.01)
        plo.on_step_end()
    print(f"READY {gpus[0].get_power_limit():g}", flush=True)
    plo.on_train_end()
    print(f"RESTORED {gpus[0].get_power_limit():g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
