"""Child process for the fork, signal and per-GPU record tests (tests/settings/test_forks_and_record.py).

Usage: ``python -m tests.settings.record_child MODE [ARGS]`` with ``ZEUS_FAKE_NVML_STATE`` naming
the persistent fake NVML's state file (tests/fakes/persistent_nvml.py), whose write log holds the
writer's pid of every power-limit write.

Modes:
    hold WATTS: a SettingsGuard records the power limit of the fake GPU and sets WATTS, prints
        ``READY <pid>`` and waits until the file ``<state>.stop-<pid>`` exists; then restores, prints
        ``DONE`` and exits 0. ``GPUBusyError`` prints ``BUSY <message>`` and exits 5. A signal is
        handled as the process would (the guard's hooks restore first).
    forks: holds 200 W, then forks children as programs do (a multiprocessing Pool, which ends its
        workers with SIGTERM; ``Process.terminate()``; ``os.fork()`` then ``sys.exit``; torch
        DataLoader workers) and prints ``STEP <name> <limit W>`` after each, ``WORKER <json>`` for
        what a DataLoader worker saw; then restores and prints ``DONE``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

from tests.fakes.persistent_nvml import install_from_env


def _guard(watts: float) -> object:
    from zeus_core.device._nvidia import nvidia_gpus
    from zeus_core.settings import Setting, SettingsGuard

    gpu = nvidia_gpus(environ={})[0]
    guard = SettingsGuard([gpu], {Setting.POWER_LIMIT})
    guard.record()
    guard.set_power_limit(gpu, watts)
    return guard


def hold(watts: float) -> None:
    from zeus_core import settings

    busy = getattr(settings, "GPUBusyError", ())  # () catches nothing (code before issue 30 had none)
    fake = install_from_env()
    try:
        guard = _guard(watts)
    except busy as e:
        print(f"BUSY {e}", flush=True)
        sys.exit(5)
    stop = Path(f"{fake.state_path}.stop-{os.getpid()}")
    print(f"READY {os.getpid()}", flush=True)
    deadline = time.monotonic() + 60
    while not stop.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    guard.restore()  # type: ignore[attr-defined]
    print("DONE", flush=True)


def _limit(fake: object) -> float:
    return fake.nvmlDeviceGetPowerManagementLimit(fake.devices[0]) / 1000  # type: ignore[attr-defined]


def _square(x: int) -> int:
    return x * x


def _sleep_forever(ready: object) -> None:
    ready.set()  # type: ignore[attr-defined]
    time.sleep(60)


def _worker_saw(worker_id: int) -> None:
    from zeus_core import _restore_hooks

    seen = {
        "pid": os.getpid(),
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "sighup_default": signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,
        "armed": [r.what for r in _restore_hooks._state.armed],
    }
    # One write(2) per line: the two workers print at once, and print() may write the text and its
    # newline separately, which interleaved their lines on a busy runner ("{...}WORKER {...}").
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), f"WORKER {json.dumps(seen)}\n".encode())


def forks() -> None:
    fake = install_from_env()
    guard = _guard(200)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:  # __exit__ terminates the workers: SIGTERM
        pool.map(_square, range(8))
    print(f"STEP pool {_limit(fake)}", flush=True)

    ready = ctx.Event()
    proc = ctx.Process(target=_sleep_forever, args=(ready,))
    proc.start()
    ready.wait(30)
    proc.terminate()  # SIGTERM
    proc.join(30)
    print(f"STEP terminate {_limit(fake)}", flush=True)

    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # runs the atexit hooks in the child
    os.waitpid(pid, 0)
    print(f"STEP fork-exit {_limit(fake)}", flush=True)

    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(
        list(range(8)),
        batch_size=2,
        num_workers=2,
        worker_init_fn=_worker_saw,
        multiprocessing_context="fork",
    )
    total = sum(int(torch.as_tensor(b).sum()) for b in loader)
    print(f"STEP dataloader {_limit(fake)} {total}", flush=True)
    guard.restore()  # type: ignore[attr-defined]
    print("DONE", flush=True)


def hard_exit(watts: float) -> None:
    """Lower the limit, then leave by ``os._exit``: no Python code (atexit, finally) runs after it."""
    install_from_env()
    _guard(watts)
    print(f"READY {os.getpid()}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(float(sys.argv[2]))
    elif sys.argv[1] == "os-exit":
        hard_exit(float(sys.argv[2]))
    else:
        forks()
