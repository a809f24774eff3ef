"""A fake NVML whose settings persist across processes, with slow setters, for fault tests.

:class:`PersistentFakeNVML` is :class:`~zeus_core.testing._fake_nvml.FakeNVML` whose power limits and
locked clocks live in a JSON state file, as a real GPU's settings outlive the process that set
them: every getter reads the file, every setter sleeps ``set_delay_s`` (NVML calls that take a
while make the signal-during-restore window wide enough to hit) and then writes it. Every write
is also appended to the file's ``writes`` list with the writer's pid, so a test can check that a
command wrote nothing.

A subprocess picks it up with :func:`install_from_env` (``ZEUS_FAKE_NVML_STATE`` names the state
file, ``ZEUS_FAKE_NVML_SET_DELAY_S`` the delay); the test, playing the administrator, prepares
the state with :func:`write_state` and reads the outcome with :func:`read_state`.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "nvml.json"
    >>> write_state(path, power_limit_w=280)
    >>> fake = PersistentFakeNVML(path)
    >>> fake.nvmlInit(); fake.nvmlDeviceGetPowerManagementLimit(fake.devices[0])
    280000
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from zeus_core.testing import FakeGPUSpec, FakeNVML

__all__ = [
    "PersistentFakeNVML",
    "install_from_env",
    "write_state",
    "read_state",
    "sets_started",
    "STATE_ENV",
    "DELAY_ENV",
]

STATE_ENV = "ZEUS_FAKE_NVML_STATE"
DELAY_ENV = "ZEUS_FAKE_NVML_SET_DELAY_S"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_state(path: str | Path) -> dict[str, Any]:
    """The state file's content: ``{"gpus": [{"power_limit_mw", "locked_clocks"}], "writes": [...]}``."""
    path = Path(path)
    with _locked(path):
        return json.loads(path.read_text()) if path.exists() else {"gpus": [], "writes": []}


def write_state(
    path: str | Path,
    *,
    power_limit_w: float = 300.0,
    locked_clocks: tuple[int, int] | None = None,
    gpus: int = 1,
) -> None:
    """Set every fake GPU's state as an administrator would (``nvidia-smi -pl`` / ``-lgc``)."""
    state = {
        "gpus": [
            {"power_limit_mw": int(power_limit_w * 1000), "locked_clocks": locked_clocks} for _ in range(gpus)
        ],
        "writes": [],
    }
    with _locked(Path(path)):
        Path(path).write_text(json.dumps(state))


def sets_started(path: str | Path) -> int:
    """How many set calls have begun on the state file ``path`` (by any process)."""
    started = Path(f"{path}.started")
    return int(started.read_text() or 0) if started.exists() else 0


class PersistentFakeNVML(FakeNVML):
    """A :class:`FakeNVML` over fake A40s whose settings are kept in ``state_path``.

    Args:
        state_path: The JSON state file (created from the specs' defaults if absent).
        gpus: The fake GPUs (default: one A40).
        set_delay_s: How long every setter takes, s.
        **kwargs: Passed to :class:`FakeNVML` (``root``, ``clock``, ...).
    """

    def __init__(
        self,
        state_path: str | Path,
        gpus: tuple[FakeGPUSpec, ...] | None = None,
        *,
        set_delay_s: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(gpus or (FakeGPUSpec.a40(),), **kwargs)
        self.state_path = Path(state_path)
        self.set_delay_s = set_delay_s
        if not self.state_path.exists() or not read_state(self.state_path)["gpus"]:
            write_state(
                self.state_path, power_limit_w=self.devices[0].power_limit_mw / 1000, gpus=len(self.devices)
            )
        self._load()

    # -- persistence ----------------------------------------------------------------------------
    def _load(self) -> None:
        for dev, saved in zip(self.devices, read_state(self.state_path)["gpus"]):
            dev.power_limit_mw = int(saved["power_limit_mw"])
            lock = saved["locked_clocks"]
            dev.locked_clocks = None if lock is None else (int(lock[0]), int(lock[1]))

    def _save(self, call: str, *args: Any) -> None:
        with _locked(self.state_path):
            state = json.loads(self.state_path.read_text())
            state["gpus"] = [
                {"power_limit_mw": d.power_limit_mw, "locked_clocks": d.locked_clocks} for d in self.devices
            ]
            state["writes"].append([os.getpid(), call, *args])
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.state_path)

    def _slow_set(self, call: str, handle: Any, *args: Any) -> None:
        started = sets_started(self.state_path) + 1
        Path(f"{self.state_path}.started").write_text(str(started))  # tests wait for a restore's set
        time.sleep(self.set_delay_s)  # a signal may arrive in here, as in a slow NVML call
        self._load()
        getattr(super(), call)(handle, *args)
        self._save(call, handle.index, *args)

    # -- NVML: reads see the file, writes are slow and persist ----------------------------------
    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        self._load()
        return super().nvmlDeviceGetPowerManagementLimit(handle)

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, limit_mw: int) -> None:
        self._slow_set("nvmlDeviceSetPowerManagementLimit", handle, limit_mw)

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, min_mhz: int, max_mhz: int) -> None:
        self._slow_set("nvmlDeviceSetGpuLockedClocks", handle, min_mhz, max_mhz)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        self._slow_set("nvmlDeviceResetGpuLockedClocks", handle)


def install_from_env() -> PersistentFakeNVML:
    """Install a :class:`PersistentFakeNVML` as ``pynvml`` from ``ZEUS_FAKE_NVML_STATE`` (subprocesses).

    Also makes ``has_admin_rights`` follow the fake's ``root`` flag (root: ``ZEUS_FAKE_NVML_ROOT``,
    default 1).
    """
    from tests.fakes.admin_rights import follow_the_fakes

    fake = PersistentFakeNVML(
        os.environ[STATE_ENV],
        set_delay_s=float(os.environ.get(DELAY_ENV, "0")),
        root=os.environ.get("ZEUS_FAKE_NVML_ROOT", "1") == "1",
    )
    sys.modules["pynvml"] = fake
    follow_the_fakes()
    return fake
