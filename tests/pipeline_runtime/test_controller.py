"""FrequencyController: non-blocking, coalescing, restoring on every exit path, measure mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError, ZeusPermissionError
from zeus_core.optimizer.pipeline_frequency import ControlMode, FrequencyController
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock


class SlowGPU(SimulatedGPU):
    """A simulated GPU whose clock changes take ``latency_s`` (like NVML) and are recorded."""

    def __init__(self, latency_s: float = 0.0, **kwargs: object) -> None:
        super().__init__(PhysicalModel.a40(), clock=VirtualClock(), **kwargs)  # type: ignore[arg-type]
        self.latency_s = latency_s
        self.calls: list[int | None] = []
        self.threads: set[str] = set()
        self.entered = threading.Event()

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        time.sleep(self.latency_s)
        super().set_locked_sm_frequency(min_mhz, max_mhz)
        self.calls.append(min_mhz)

    def reset_locked_sm_frequency(self) -> None:
        super().reset_locked_sm_frequency()
        self.calls.append(None)


def test_requests_return_at_once_and_coalesce_to_the_latest() -> None:
    gpu = SlowGPU(latency_s=0.2)
    with FrequencyController(gpu) as ctl:
        ctl.request(1740)
        assert gpu.entered.wait(5)  # the worker is now inside the 200 ms clock change
        t0 = time.perf_counter()
        for mhz in (1500, 1200, 900):
            ctl.request(mhz)
        issued = time.perf_counter() - t0
        assert ctl.wait()
        assert gpu.locked_sm_frequency == 900 and ctl.applied_mhz == 900
    assert issued < 0.1  # the requests did not wait for the 200 ms change in progress
    assert gpu.calls == [1740, 900, None]  # 1500 and 1200 were superseded before the worker got to them
    assert gpu.threads == {"zeus-frequency-gpu0"}  # never set from the training thread
    assert [r.frequency_mhz for r in ctl.requests] == [1740, 1500, 1200, 900]
    assert [c.frequency_mhz for c in ctl.changes] == [1740, 900, None]
    assert all(c.latency_s >= 0 for c in ctl.changes)


def test_unchanged_clock_is_not_set_again() -> None:
    gpu = SlowGPU()
    with FrequencyController(gpu) as ctl:
        for mhz in (1200, 1200, 1200):
            ctl.request(mhz, tag="x")
            ctl.wait()
        ctl.request(900)
        ctl.wait()
        ctl.request(1200)
        ctl.wait()
    assert gpu.calls == [1200, 900, 1200, None]
    assert len(ctl.requests) == 5


def test_close_restores_and_refuses_more_requests() -> None:
    gpu = SlowGPU()
    ctl = FrequencyController(gpu)
    ctl.start()
    ctl.request(1005)
    ctl.wait()
    assert gpu.locked_sm_frequency == 1005 and ctl.active
    ctl.close()
    ctl.close()  # idempotent
    assert gpu.locked_sm_frequency is None and not ctl.active and gpu.calls == [1005, None]
    with pytest.raises(ZeusConfigError, match="not running"):
        ctl.request(1200)


def test_exception_in_training_restores_clocks() -> None:
    gpu = SlowGPU()
    with pytest.raises(KeyboardInterrupt):
        with FrequencyController(gpu) as ctl:
            ctl.request(1200)
            ctl.wait()
            raise KeyboardInterrupt
    assert gpu.locked_sm_frequency is None and gpu.calls[-1] is None


def test_measure_mode_records_and_never_touches_the_gpu() -> None:
    gpu = SlowGPU(can_control=False)  # no permission needed: nothing is changed
    with FrequencyController(gpu, mode="measure") as ctl:
        for mhz in (1740, 900, 900):
            ctl.request(mhz, tag="stage0:F0")
        assert ctl.wait() and ctl.latest_request_mhz == 900
    assert gpu.calls == [] and list(ctl.changes) == []
    assert [(r.frequency_mhz, r.tag) for r in ctl.requests] == [(1740, "stage0:F0"), (900, "stage0:F0")] + [
        (900, "stage0:F0")
    ]
    assert ctl.mode is ControlMode.MEASURE


def test_permission_is_checked_before_anything_changes() -> None:
    gpu = SlowGPU(can_control=False)
    with pytest.raises(ZeusPermissionError, match="no permission"):
        FrequencyController(gpu).start()
    assert gpu.calls == []


def test_worker_failure_reaches_the_training_thread() -> None:
    gpu = SlowGPU()
    with FrequencyController(gpu) as ctl:
        ctl.request(5000)  # not a supported clock
        with pytest.raises(ZeusDeviceError, match="setting the locked SM clock failed") as info:
            ctl.wait()
        assert isinstance(info.value.__cause__, ZeusConfigError)
    assert gpu.locked_sm_frequency is None


def test_bad_arguments() -> None:
    with pytest.raises(ZeusConfigError, match="control mode"):
        FrequencyController(SlowGPU(), mode="auto")
    with pytest.raises(ZeusConfigError, match="history"):
        FrequencyController(SlowGPU(), history=0)


_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from zeus_core.testing import PhysicalModel, SimulatedGPU
    from zeus_core.optimizer.pipeline_frequency.runtime._controller import FrequencyController

    marker = Path(sys.argv[1])

    class MarkingGPU(SimulatedGPU):
        def reset_locked_sm_frequency(self):
            super().reset_locked_sm_frequency()
            marker.write_text(f"reset after {self.locked_sm_frequency_before} MHz")

        def set_locked_sm_frequency(self, lo, hi=None):
            super().set_locked_sm_frequency(lo, hi)
            self.locked_sm_frequency_before = lo

    ctl = FrequencyController(MarkingGPU(PhysicalModel.a40()))
    ctl.start()
    ctl.request(1200)
    ctl.wait()
    if sys.argv[2] == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    # "exit": leave without close(); atexit restores
    """
)


@pytest.mark.parametrize("how", ["sigterm", "exit"])
def test_clocks_are_restored_on_sigterm_and_at_interpreter_exit(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(marker), how], env=env, capture_output=True, text=True, timeout=60
    )
    expected = -signal.SIGTERM if how == "sigterm" else 0
    assert proc.returncode == expected, proc.stderr
    assert marker.read_text() == "reset after 1200 MHz"
