"""SettingsGuard in one process: what is recorded, what comes back, and how a restore resists signals."""

from __future__ import annotations

import logging
import signal
import threading
import time

import pytest

from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps
from tests.pipeline_runtime.test_controller import SlowGPU
from zeus_core import Setting, SettingsGuard, console
from zeus_core.device._nvidia import nvidia_gpus
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.pipeline_frequency import FrequencyController
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer
from zeus_core.settings import DirectAccess, GPUSettings, get_access, set_access
from zeus_core.testing import FakeGPUSpec, FakeNVML, PhysicalModel, SimulatedGPU, VirtualClock, simulate_steps

main_thread_only = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers need the main thread"
)


def sim(**kwargs: object) -> SimulatedGPU:
    return SimulatedGPU(PhysicalModel.a40(), **kwargs)  # type: ignore[arg-type]


def test_the_limit_found_at_start_comes_back_not_the_default() -> None:
    gpus = [sim(index=0), sim(index=1)]
    gpus[0].set_power_limit(280)
    with SettingsGuard(gpus) as guard:
        assert guard.recorded == {0: GPUSettings(280.0), 1: GPUSettings(300.0)}
        for g in gpus:
            guard.set_power_limit(g, 150)
    assert [g.get_power_limit() for g in gpus] == [280.0, 300.0]


def test_restore_is_idempotent_and_a_guard_can_record_again() -> None:
    gpu = sim()
    guard = SettingsGuard([gpu])
    assert guard.restore() is False  # nothing recorded yet
    guard.record()
    gpu.set_power_limit(200)
    assert guard.restore() is True and guard.restore() is False and not guard.armed
    gpu.set_power_limit(250)
    guard.record()  # a second run starts from 250 W
    gpu.set_power_limit(100)
    guard.restore()
    assert gpu.get_power_limit() == 250.0


def test_an_exception_in_the_block_restores_and_propagates() -> None:
    gpu = sim()
    gpu.set_power_limit(280)
    with pytest.raises(RuntimeError, match="boom"):
        with SettingsGuard([gpu], {Setting.POWER_LIMIT, Setting.SM_CLOCKS}) as guard:
            guard.set_power_limit(gpu, 120)
            guard.lock_sm_clocks(gpu, 900)
            raise RuntimeError("boom")
    assert gpu.get_power_limit() == 280.0 and gpu.get_locked_sm_frequency() is None


def test_locked_clocks_come_back_locked() -> None:
    gpu = sim()
    gpu.set_locked_sm_frequency(1200)  # an administrator's lock
    with SettingsGuard([gpu], {Setting.SM_CLOCKS}) as guard:
        assert guard.recorded[0] == GPUSettings(None, (1200, 1200), sm_clocks_known=True)
        guard.lock_sm_clocks(gpu, 900)
    assert gpu.get_locked_sm_frequency() == (1200, 1200)


def test_nvidia_clocks_cannot_be_read_so_they_are_unlocked_and_the_user_is_told(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    fake.devices[0].locked_clocks = (1200, 1200)
    gpu = nvidia_gpus(environ={})[0]
    gpu.index = 7  # a GPU no other test warned about (the warning is shown once per GPU)
    console_logger = logging.getLogger("zeus_suite")
    console_logger.addHandler(caplog.handler)  # the console logger does not propagate
    try:
        with SettingsGuard([gpu], {Setting.SM_CLOCKS}) as guard:
            guard.lock_sm_clocks(gpu, 900)
            assert guard.recorded[7].sm_clocks_known is False
    finally:
        console_logger.removeHandler(caplog.handler)
    assert fake.devices[0].locked_clocks is None
    assert "cannot report its locked SM clocks" in caplog.text


def test_every_gpu_is_restored_before_the_first_error_is_raised() -> None:
    gpus = [sim(index=0), sim(index=1)]
    guard = SettingsGuard(gpus)
    guard.record()
    gpus[1].set_power_limit(150)
    gpus[0]._can_control = False  # the write back to GPU 0 now fails
    gpus[0]._power_limit_w = 150.0
    with pytest.raises(Exception, match="no permission"):
        guard.restore()
    assert gpus[1].get_power_limit() == 300.0 and not guard.armed


def test_the_owner_is_stopped_first_and_its_failure_does_not_stop_the_restore() -> None:
    gpu = sim()
    order: list[str] = []

    def stop() -> None:
        order.append(f"stop at {gpu.get_power_limit():g} W")
        raise ZeusConfigError("owner failed to stop")

    guard = SettingsGuard([gpu], before_restore=stop)
    guard.record()
    gpu.set_power_limit(180)
    guard.restore()
    assert order == ["stop at 180 W"] and gpu.get_power_limit() == 300.0


def test_writes_go_through_the_access_seam() -> None:
    calls: list[tuple[str, float]] = []

    class Recording(DirectAccess):
        def set_power_limit(self, gpu, watts):  # type: ignore[no-untyped-def]
            calls.append(("set", watts))
            super().set_power_limit(gpu, watts)

    previous = set_access(Recording())
    try:
        gpu = sim()
        with SettingsGuard([gpu]) as guard:
            guard.set_power_limit(gpu, 200)
    finally:
        assert set_access(previous).__class__ is Recording and get_access() is previous
    assert calls == [("set", 200), ("set", 300.0)]


class InterruptingGPU(SimulatedGPU):
    """A simulated GPU whose next set call receives a signal in the middle (as in a slow NVML call)."""

    def __init__(self, signum: int | None = None) -> None:
        super().__init__(PhysicalModel.a40())
        self.signum = signum
        self.limits: list[float] = []

    def set_power_limit(self, watts: float) -> None:
        if self.signum is not None:
            signum, self.signum = self.signum, None
            signal.raise_signal(signum)  # handled by Python at the next bytecode: inside this call
            time.sleep(0.01)
        super().set_power_limit(watts)
        self.limits.append(watts)


@main_thread_only
def test_ctrl_c_inside_the_restore_waits_until_it_is_done() -> None:
    gpu = InterruptingGPU()
    gpu.set_power_limit(280)
    guard = SettingsGuard([gpu])
    guard.record()
    gpu.set_power_limit(150)
    gpu.signum = signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
        guard.restore()  # explicit restore (on_train_end), Ctrl-C in its NVML call
        time.sleep(1)  # the deferred Ctrl-C is re-delivered as soon as the restore is done
    assert gpu.get_power_limit() == 280.0 and gpu.limits[-1] == 280.0


@main_thread_only
def test_a_foreign_keyboard_interrupt_is_retried_then_raised() -> None:
    gpu = InterruptingGPU()
    guard = SettingsGuard([gpu])
    guard.record()
    gpu.set_power_limit(150)
    gpu.signum = signal.SIGINT
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # someone replaced our handler
    try:
        with pytest.raises(KeyboardInterrupt):
            guard.restore()
    finally:
        signal.signal(signal.SIGINT, before)
    assert gpu.get_power_limit() == 300.0


@main_thread_only
def test_previous_handler_runs_after_the_restore_and_comes_back() -> None:
    calls: list[tuple[int, float]] = []
    gpu = sim()

    def previous(signum: int, frame: object) -> None:
        calls.append((signum, gpu.get_power_limit()))

    saved = signal.signal(signal.SIGTERM, previous)
    try:
        guard = SettingsGuard([gpu])
        guard.record()
        gpu.set_power_limit(200)
        assert signal.getsignal(signal.SIGTERM) is not previous
        signal.raise_signal(signal.SIGTERM)
        assert calls == [(signal.SIGTERM, 300.0)] and not guard.armed
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_a_guard_recorded_off_the_main_thread_installs_no_handler_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gpu = sim()
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def run() -> None:
        with SettingsGuard([gpu]) as guard:
            guard.set_power_limit(gpu, 200)
            seen.append(signal.getsignal(signal.SIGTERM))

    console._seen.discard("settings-off-main-thread")  # shown once per process: make it show here
    console_logger = logging.getLogger("zeus_suite")
    console_logger.addHandler(caplog.handler)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join(10)
    finally:
        console_logger.removeHandler(caplog.handler)
    assert seen == [before] and gpu.get_power_limit() == 300.0
    assert "Not in the main thread" in caplog.text and "not on SIGTERM" in caplog.text


def test_plain_loop_with_block_restores_on_a_caught_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    fake = FakeNVML([FakeGPUSpec.a40(power_w=200.0)], clock=clock).patch(monkeypatch)
    fake.devices[0].power_limit_mw = 280_000  # the administrator's limit
    gpus = nvidia_gpus(environ={})
    try:
        with GlobalPowerLimitOptimizer(
            ZeusMonitor(gpus=gpus, cpu_indices=[]), Energy(), wait_steps=0, warmup_steps=1, profile_steps=2
        ) as plo:
            plo.on_train_begin()
            plo.on_epoch_begin()
            while gpus[0].get_power_limit() >= 250:
                plo.on_step_begin()
                clock.advance(0.5)
                plo.on_step_end()
            raise ValueError("a bad batch")
    except ValueError:
        assert fake.devices[0].power_limit_mw == 280_000  # back at once, not at process exit


def test_frequency_controller_stops_its_worker_promptly_even_while_the_lock_is_held() -> None:
    gpu = SlowGPU(latency_s=0.5)
    SimulatedGPU.set_locked_sm_frequency(gpu, 1200)  # the administrator's lock (not a slow call)
    ctl = FrequencyController(gpu)
    ctl.start()
    ctl.request(900)
    assert gpu.entered.wait(5)  # the worker is inside a 0.5 s clock change
    with ctl._cond:  # as when a signal handler interrupts the training thread inside request()
        t0 = time.monotonic()
        ctl.close()
        took = time.monotonic() - t0
    assert took < 2.0, took  # the change in flight (0.5 s) + one join of at most 0.5 s; was 5 s
    time.sleep(0.6)
    assert gpu.get_locked_sm_frequency() == (1200, 1200)  # and nothing was set after the restore
    assert gpu.calls == [900, 1200]  # the change in flight finished, then the restore


def test_optimizer_restores_the_limit_before_a_training_error_propagates() -> None:
    gpus = make_gpus(1)
    gpus[0].set_power_limit(270)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), warmup_steps=1, profile_steps=2, pl_step=50)
    plo.on_train_begin()
    run_steps(plo, gpus, 4)
    plo.on_train_end()
    assert gpus[0].get_power_limit() == 270


@main_thread_only
def test_a_signal_mid_measurement_restores_and_on_train_end_cancels_the_cut_window() -> None:
    gpus = make_gpus(1)
    gpus[0].set_power_limit(260)
    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus), Energy(), warmup_steps=1, profile_steps=4, pl_step=50, early_stopping=None
    )
    saved = signal.signal(signal.SIGTERM, lambda *a: None)  # the program's own handler: keeps running
    try:
        plo.on_train_begin()
        plo.on_epoch_begin()
        for _ in range(20):  # until inside a limit's measurement (no epoch end: it would cancel it)
            if plo.monitor.open_windows:
                break
            plo.on_step_begin()
            simulate_steps(gpus, 1)
            plo.on_step_end()
        signal.raise_signal(signal.SIGTERM)
        assert gpus[0].get_power_limit() == 260 and plo.monitor.open_windows  # restored at once
        plo.on_train_end()  # what an adapter does next
        assert not plo.monitor.open_windows
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_a_pickled_guard_is_not_armed_in_its_new_process() -> None:
    import pickle

    gpu = sim()
    guard = SettingsGuard([gpu])
    guard.record()
    copy = pickle.loads(pickle.dumps(guard))  # as ddp_spawn does with a callback holding it
    assert guard.armed and not copy.armed and copy.recorded == guard.recorded
    guard.restore()
    plo = GlobalPowerLimitOptimizer(monitor_of(make_gpus(1)), Energy())
    assert pickle.loads(pickle.dumps(plo)).optimal_power_limit_w is None  # the optimizer pickles too
