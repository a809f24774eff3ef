"""The fake NVML the daemon tests share between processes: N fake A40s whose settings live in a file.

:class:`SharedFakeNVML` is the persistent fake of ``tests/fakes/persistent_nvml.py`` with what a
daemon needs besides: memory locked clocks, persistence mode and the PCI address (kept in the same
state file), and setters that are atomic across threads and processes (the daemon writes to
several GPUs at once from its per-GPU worker threads; the base fake's load-set-save is not).

Processes pick it up with :func:`install_from_env`: ``ZEUS_FAKE_NVML_STATE`` names the state file,
``ZEUS_FAKE_NVML_GPUS`` the number of GPUs, ``ZEUS_FAKE_NVML_ROOT`` whether direct writes are allowed
(the daemon: 1; a client: 0, so that only the daemon can change anything).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from tests.fakes.persistent_nvml import PersistentFakeNVML, _locked, read_state
from zeus_core.testing._fake_nvml import FakeGPUSpec

__all__ = ["SharedFakeNVML", "install_from_env", "write_gpus", "settings", "GPUS_ENV"]

GPUS_ENV = "ZEUS_FAKE_NVML_GPUS"
_DEFAULT = {"power_limit_mw": 300000, "locked_clocks": None, "mem_locked_clocks": None, "persistence": False}


def write_gpus(path: str | Path, gpus: int, power_limit_w: float = 300.0) -> None:
    """A fresh state file: ``gpus`` A40s at ``power_limit_w``, clocks unlocked, persistence off."""
    state = {
        "gpus": [{**_DEFAULT, "power_limit_mw": int(power_limit_w * 1000)} for _ in range(gpus)],
        "writes": [],
    }
    with _locked(Path(path)):
        Path(path).write_text(json.dumps(state))
    for p in (Path(path), Path(f"{path}.lock")):
        p.touch()
        os.chmod(p, 0o666)  # a client running as another user takes the lock too


def settings(path: str | Path) -> list[tuple[Any, ...]]:
    """Every GPU's ``(power_limit_mw, locked_clocks, mem_locked_clocks, persistence)`` now."""
    out = []
    for g in read_state(path)["gpus"]:
        clocks, mem = g.get("locked_clocks"), g.get("mem_locked_clocks")
        out.append(
            (
                g["power_limit_mw"],
                None if clocks is None else tuple(clocks),
                None if mem is None else tuple(mem),
                bool(g.get("persistence", False)),
            )
        )
    return out


class SharedFakeNVML(PersistentFakeNVML):
    """:class:`PersistentFakeNVML` plus memory clocks, persistence mode and PCI info; atomic setters."""

    _thread_lock = threading.RLock()

    def __init__(self, state_path: str | Path, gpus: int = 1, **kwargs: Any) -> None:
        self._extra: list[dict[str, Any]] = [dict(_DEFAULT) for _ in range(gpus)]
        super().__init__(state_path, tuple(FakeGPUSpec.a40() for _ in range(gpus)), **kwargs)

    # -- persistence (all fields) ---------------------------------------------------------------
    def _load(self) -> None:
        with self._thread_lock:
            saved = read_state(self.state_path)["gpus"]
            for dev, extra, g in zip(self.devices, self._extra, saved):
                dev.power_limit_mw = int(g["power_limit_mw"])
                lock = g.get("locked_clocks")
                dev.locked_clocks = None if lock is None else (int(lock[0]), int(lock[1]))
                extra["mem_locked_clocks"] = g.get("mem_locked_clocks")
                extra["persistence"] = bool(g.get("persistence", False))

    def _save_unlocked(self, call: str, *args: Any) -> None:
        state = json.loads(self.state_path.read_text())
        state["gpus"] = [
            {
                "power_limit_mw": d.power_limit_mw,
                "locked_clocks": d.locked_clocks,
                "mem_locked_clocks": e["mem_locked_clocks"],
                "persistence": e["persistence"],
            }
            for d, e in zip(self.devices, self._extra)
        ]
        state["writes"].append([os.getpid(), call, *args])
        tmp = self.state_path.with_name(f"{self.state_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.state_path)

    def _slow_set(self, call: str, handle: Any, *args: Any) -> None:
        import time

        time.sleep(self.set_delay_s)
        with self._thread_lock, _locked(self.state_path):
            state = json.loads(self.state_path.read_text())
            for dev, extra, g in zip(self.devices, self._extra, state["gpus"]):  # _load without the lock
                dev.power_limit_mw = int(g["power_limit_mw"])
                lock = g.get("locked_clocks")
                dev.locked_clocks = None if lock is None else (int(lock[0]), int(lock[1]))
                extra["mem_locked_clocks"] = g.get("mem_locked_clocks")
                extra["persistence"] = bool(g.get("persistence", False))
            method = getattr(self, f"_set_{call}", None)
            if method is not None:
                method(handle, *args)
            else:
                getattr(super(PersistentFakeNVML, self), call)(handle, *args)
            self._save_unlocked(call, handle.index, *args)

    # -- NVML calls the base fake lacks ---------------------------------------------------------
    def _set_nvmlDeviceSetMemoryLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        self._require_root()
        memory = handle.spec.memory_clocks_mhz
        if lo > hi or lo < min(memory) or hi > max(memory):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        self._extra[handle.index]["mem_locked_clocks"] = [lo, hi]

    def _set_nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        self._require_root()
        self._extra[handle.index]["mem_locked_clocks"] = None

    def _set_nvmlDeviceSetPersistenceMode(self, handle: Any, mode: int) -> None:
        self._require_root()
        self._extra[handle.index]["persistence"] = mode == self.NVML_FEATURE_ENABLED

    def nvmlDeviceSetMemoryLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        self.calls["nvmlDeviceSetMemoryLockedClocks"] += 1
        self._slow_set("nvmlDeviceSetMemoryLockedClocks", self._dev(handle), lo, hi)

    def nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        self.calls["nvmlDeviceResetMemoryLockedClocks"] += 1
        self._slow_set("nvmlDeviceResetMemoryLockedClocks", self._dev(handle))

    def nvmlDeviceSetPersistenceMode(self, handle: Any, mode: int) -> None:
        self.calls["nvmlDeviceSetPersistenceMode"] += 1
        self._slow_set("nvmlDeviceSetPersistenceMode", self._dev(handle), mode)

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPersistenceMode"] += 1
        self._load()
        enabled = self._extra[self._dev(handle).index]["persistence"]
        return self.NVML_FEATURE_ENABLED if enabled else self.NVML_FEATURE_DISABLED

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        self.calls["nvmlDeviceGetPciInfo"] += 1
        index = self._dev(handle).index

        class _PciInfo:
            busId = f"00000000:{0x17 + index:02X}:00.0".encode()

        return _PciInfo()


def install_from_env() -> SharedFakeNVML:
    """Install a :class:`SharedFakeNVML` as ``pynvml`` (and admin rights following its ``root``)."""
    from tests.fakes.admin_rights import follow_the_fakes

    fake = SharedFakeNVML(
        os.environ["ZEUS_FAKE_NVML_STATE"],
        gpus=int(os.environ.get(GPUS_ENV, "1")),
        root=os.environ.get("ZEUS_FAKE_NVML_ROOT", "1") == "1",
    )
    sys.modules["pynvml"] = fake
    follow_the_fakes()
    return fake
