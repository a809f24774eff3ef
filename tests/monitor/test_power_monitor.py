"""PowerMonitor: exact integration on a VirtualClock, a real sampling thread, bounds, CSV."""

from __future__ import annotations

import csv
import gc
import logging
import threading
import time
from pathlib import Path

import pytest

from zeus_core.device._base import CPU, CpuEnergy
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError, ZeusDeviceNotFoundError
from zeus_core.monitor._power import PowerMonitor
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

BUSY_W, IDLE_W = 300.0, 30.0


class FakeCPU(CPU):
    """Counters that advance by a settable power on a VirtualClock (exact J = W x s)."""

    def __init__(self, index: int, clock: VirtualClock, cpu_w: float, dram_w: float | None) -> None:
        super().__init__(index)
        self._clock = clock
        self._t = clock()
        self._cpu_j, self._dram_j = 500.0, 20.0
        self.cpu_w, self.dram_w = cpu_w, dram_w

    @property
    def name(self) -> str:
        return f"package-{self.index}"

    @property
    def has_dram(self) -> bool:
        return self.dram_w is not None

    def set_power(self, cpu_w: float, dram_w: float | None) -> None:
        self.get_energy()
        self.cpu_w, self.dram_w = cpu_w, dram_w

    def get_energy(self) -> CpuEnergy:
        now = self._clock()
        self._cpu_j += self.cpu_w * (now - self._t)
        if self.dram_w is not None:
            self._dram_j += self.dram_w * (now - self._t)
        self._t = now
        return CpuEnergy(self._cpu_j, self._dram_j if self.dram_w is not None else None)


class FlakyGPU(SimulatedGPU):
    """Fails to read its power while ``broken``."""

    broken = False
    calls = 0
    failures = 0

    def get_power(self) -> float:
        self.calls += 1
        if self.broken:
            self.failures += 1
            raise ZeusDeviceError("GPU 9 fell off the bus")
        return super().get_power()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(100.0)


def gpu(clock: VirtualClock | None = None, index: int = 0, busy: bool = True) -> SimulatedGPU:
    return SimulatedGPU(PhysicalModel.a40(), index=index, clock=clock, busy=busy)


def test_integration_is_exact_for_piecewise_linear_power(clock: VirtualClock) -> None:
    g = gpu(clock, busy=False)
    pm = PowerMonitor(gpus=[g])
    pm.sample_now()  # t=100: 30 W
    clock.advance(10.0)
    g.set_busy(True)
    pm.sample_now()  # t=110: 300 W (power ramps linearly between samples as far as the monitor knows)
    clock.advance(10.0)
    pm.sample_now()  # t=120: 300 W
    assert pm.get_power_timeline() == {0: [(100.0, IDLE_W), (110.0, BUSY_W), (120.0, BUSY_W)]}
    assert pm.get_energy(100.0, 120.0) == {0: pytest.approx(5 * (IDLE_W + BUSY_W) + 10 * BUSY_W)}
    # Bounds inside the data: power interpolated at 105 s is 165 W.
    assert pm.get_energy(105.0, 115.0) == {0: pytest.approx(5 * (165.0 + BUSY_W) / 2 + 5 * BUSY_W)}
    # Beyond the data the first / last sample holds.
    assert pm.get_energy(90.0, 100.0) == {0: pytest.approx(10 * IDLE_W)}
    assert pm.get_energy(120.0, 130.0) == {0: pytest.approx(10 * BUSY_W)}
    assert pm.get_energy(95.0, 125.0)[0] == pytest.approx(5 * IDLE_W + 4650.0 + 5 * BUSY_W)
    assert pm.get_energy(107.0, 107.0) == {0: 0.0}


def test_single_sample_holds_over_the_window(clock: VirtualClock) -> None:
    pm = PowerMonitor(gpus=[gpu(clock)])
    pm.sample_now()
    assert pm.get_energy(0.0, 2.0) == {0: pytest.approx(600.0)}


def test_timeline_filter_and_several_gpus(clock: VirtualClock) -> None:
    gpus = [gpu(clock, 0), gpu(clock, 1, busy=False), gpu(clock, 2)]
    pm = PowerMonitor(gpus=gpus, gpu_indices=[1, 0])
    assert [g.index for g in pm.gpus] == [1, 0]
    for _ in range(5):
        pm.sample_now()
        clock.advance(1.0)
    timeline = pm.get_power_timeline(start=101.0, end=103.0)
    assert timeline == {
        1: [(101.0, IDLE_W), (102.0, IDLE_W), (103.0, IDLE_W)],
        0: [(101.0, BUSY_W), (102.0, BUSY_W), (103.0, BUSY_W)],
    }
    assert pm.get_energy(100.0, 104.0) == {1: pytest.approx(120.0), 0: pytest.approx(1200.0)}


def test_samples_at_the_same_time_keep_the_newest_value(clock: VirtualClock) -> None:
    g = gpu(clock)
    pm = PowerMonitor(gpus=[g])
    pm.sample_now()
    g.set_busy(False)
    pm.sample_now()
    assert pm.get_power_timeline() == {0: [(100.0, IDLE_W)]}


def test_errors_name_the_problem(clock: VirtualClock) -> None:
    pm = PowerMonitor(gpus=[gpu(clock)])
    with pytest.raises(ZeusConfigError, match="no power sample yet. Call start"):
        pm.get_energy(0.0, 1.0)
    pm.sample_now()
    with pytest.raises(ZeusConfigError, match=r"get_energy\(start=5.0, end=4.0\): end is before start"):
        pm.get_energy(5.0, 4.0)
    with pytest.raises(ZeusConfigError, match="interval_s=0"):
        PowerMonitor(gpus=[], interval_s=0)
    with pytest.raises(ZeusConfigError, match="capacity=1"):
        PowerMonitor(gpus=[], capacity=1)
    with pytest.raises(ZeusDeviceNotFoundError, match=r"no GPU 3; this process sees GPUs \[0\]"):
        PowerMonitor(gpus=[gpu(clock)], gpu_indices=[3])
    with pytest.raises(ZeusConfigError, match="different clocks"):
        PowerMonitor(gpus=[gpu(VirtualClock(), 0), gpu(VirtualClock(), 1)])


def test_ring_buffer_keeps_the_newest_capacity_samples(
    clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    g = gpu(clock)
    pm = PowerMonitor(gpus=[g], capacity=5)
    for k in range(12):
        g.set_busy(k % 2 == 0)
        pm.sample_now()
        clock.advance(1.0)
    timeline = pm.get_power_timeline()[0]
    assert [t for t, _ in timeline] == [107.0, 108.0, 109.0, 110.0, 111.0]
    assert [w for _, w in timeline] == [IDLE_W, BUSY_W, IDLE_W, BUSY_W, IDLE_W]
    assert pm._gpu_power["device_instant"][0]._t.shape == (5,)  # storage never grows
    with caplog.at_level(logging.WARNING, logger="zeus_core.monitor._power"):
        pm.get_energy(100.0, 111.0)
    assert "samples before t=107.000 s were dropped (capacity=5)" in caplog.text


def test_cpu_power_derived_from_energy_counters(clock: VirtualClock) -> None:
    cpu0, cpu1 = FakeCPU(0, clock, 50.0, 6.0), FakeCPU(1, clock, 80.0, None)
    pm = PowerMonitor(gpus=[gpu(clock)], cpus=[cpu0, cpu1])
    pm.sample_now()
    clock.advance(2.0)
    pm.sample_now()
    cpu0.set_power(100.0, 8.0)
    clock.advance(2.0)
    pm.sample_now()
    assert pm.get_cpu_power_timeline() == {
        0: [(102.0, 50.0), (104.0, 100.0)],
        1: [(102.0, 80.0), (104.0, 80.0)],
    }
    assert pm.get_dram_power_timeline() == {0: [(102.0, 6.0), (104.0, 8.0)]}
    assert pm.get_cpu_power_timeline(start=103.0) == {0: [(104.0, 100.0)], 1: [(104.0, 80.0)]}
    # Counter values interpolated between samples: exact at sample times.
    assert pm.get_cpu_energy(100.0, 104.0) == {0: pytest.approx(300.0), 1: pytest.approx(320.0)}
    assert pm.get_cpu_energy(101.0, 103.0) == {0: pytest.approx(150.0), 1: pytest.approx(160.0)}
    assert pm.get_dram_energy(100.0, 104.0) == {0: pytest.approx(28.0)}
    # Beyond the data, the nearest interval's average power continues.
    assert pm.get_cpu_energy(104.0, 105.0)[0] == pytest.approx(100.0)
    assert pm.get_cpu_energy(99.0, 100.0)[0] == pytest.approx(50.0)


def test_to_csv_writes_every_series(clock: VirtualClock, tmp_path: Path) -> None:
    pm = PowerMonitor(gpus=[gpu(clock, 0), gpu(clock, 1, busy=False)], cpus=[FakeCPU(0, clock, 50.0, 5.0)])
    for _ in range(3):
        pm.sample_now()
        clock.advance(0.5)
    out = pm.to_csv(tmp_path / "out" / "power.csv")
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["time_s", "device", "power_w", "simulated"]
    by_device: dict[str, list[tuple[float, float, str]]] = {}
    for r in rows:
        sample = (float(r["time_s"]), float(r["power_w"]), r["simulated"])
        by_device.setdefault(r["device"], []).append(sample)
    assert by_device["gpu0"] == [(100.0, BUSY_W, "1"), (100.5, BUSY_W, "1"), (101.0, BUSY_W, "1")]
    assert by_device["gpu1"] == [(100.0, IDLE_W, "1"), (100.5, IDLE_W, "1"), (101.0, IDLE_W, "1")]
    assert by_device["cpu0"] == [(100.5, 50.0, "0"), (101.0, 50.0, "0")]
    assert by_device["dram0"] == [(100.5, 5.0, "0"), (101.0, 5.0, "0")]
    assert [float(r["time_s"]) for r in rows] == sorted(float(r["time_s"]) for r in rows)


def test_background_thread_samples_on_the_wall_clock_and_stops_cleanly() -> None:
    g = gpu()  # wall clock
    pm = PowerMonitor(gpus=[g], interval_s=0.01)
    assert not pm.running
    t0 = time.time()
    with pm:
        assert pm.running
        pm.start()  # already running: no second thread
        assert sum(t.name == "zeus-power-monitor" for t in threading.enumerate()) >= 1
        time.sleep(0.25)
    t1 = time.time()
    assert not pm.running
    pm.stop()  # idempotent
    samples = pm.get_power_timeline()[0]
    times = [t for t, _ in samples]
    assert 5 <= len(samples) <= 40  # ~25 at 10 ms, with slack for a loaded machine
    assert times == sorted(times) and t0 <= times[0] and times[-1] <= t1
    assert all(w == BUSY_W for _, w in samples)
    assert pm.get_energy(times[0], times[-1])[0] == pytest.approx(BUSY_W * (times[-1] - times[0]))
    time.sleep(0.05)
    assert len(pm.get_power_timeline()[0]) == len(samples)  # nothing sampled after stop()


def test_restart_after_stop(clock: VirtualClock) -> None:
    pm = PowerMonitor(gpus=[gpu(clock)], interval_s=0.01)
    pm.start()
    pm.stop()
    clock.advance(1.0)
    pm.start()
    assert pm.running
    pm.stop()
    assert [t for t, _ in pm.get_power_timeline()[0]] == [100.0, 101.0]


def test_failing_gpu_is_logged_once_per_streak_and_others_keep_sampling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, flaky = gpu(None, 0), FlakyGPU(PhysicalModel.a40(), index=9, busy=True)
    pm = PowerMonitor(gpus=[good, flaky], interval_s=0.005)
    flaky.broken = True
    with pytest.raises(ZeusDeviceError, match="fell off the bus"):
        pm.start()  # the first, synchronous sample reports the error to the caller
    assert not pm.running
    assert len(pm.get_power_timeline()[0]) == 1  # the good GPU was still sampled
    flaky.broken = False
    with caplog.at_level(logging.WARNING, logger="zeus_core.monitor._power"):
        pm.start()
        flaky.broken = True
        wait_until(lambda: flaky.failures >= 5)
        flaky.broken = False
        wait_until(lambda: flaky.calls >= flaky.failures + 5)
        flaky.broken = True
        wait_until(lambda: flaky.failures >= 10)
        pm.stop()
    assert caplog.text.count("reading gpu9 failed") == 2  # once per failure streak
    good_samples = pm.get_power_timeline()[0]
    assert len(good_samples) > len(pm.get_power_timeline()[9]) > 1


def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.002)


def test_abandoned_monitor_stops_its_thread() -> None:
    pm = PowerMonitor(gpus=[gpu()], interval_s=0.01)
    pm.start()
    thread = pm._thread
    del pm
    gc.collect()
    assert thread is not None
    thread.join(timeout=2.0)
    assert not thread.is_alive()


def test_simulated_flag() -> None:
    assert PowerMonitor(gpus=[gpu()]).simulated
    assert not PowerMonitor(gpus=[], cpus=[FakeCPU(0, VirtualClock(), 1.0, None)]).simulated
