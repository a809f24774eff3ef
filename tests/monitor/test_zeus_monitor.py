"""ZeusMonitor window semantics on simulated GPUs driven by a VirtualClock, and fake CPUs."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest

from tests.fakes.clock_cpu import ClockCPU as FakeCPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusWindowError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._measurement import Measurement
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock, simulate_steps

BUSY_W = 300.0  # PhysicalModel.a40() at its default 300 W limit
IDLE_W = 30.0


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def busy_gpu(clock: VirtualClock, index: int = 0, **kw: object) -> SimulatedGPU:
    return SimulatedGPU(PhysicalModel.a40(), index=index, clock=clock, busy=True, **kw)


def test_single_window_fields(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    clock.advance(3.0)  # before the window: not counted
    monitor.begin_window("epoch")
    clock.advance(10.0)
    m = monitor.end_window("epoch")
    assert isinstance(m, Measurement)
    assert m.time == 10.0
    assert m.gpu_energy == {0: pytest.approx(10.0 * BUSY_W)}
    assert m.cpu_energy == {} and m.dram_energy == {}
    assert m.estimated_gpus == frozenset() and not m.estimated
    assert m.simulated and monitor.simulated
    assert m.gpu_total_energy == m.total_energy == pytest.approx(3000.0)
    assert m.average_power == pytest.approx(BUSY_W)
    assert m.describe() == "10.00 s, 3000.0 J (GPU 0: 3000.0 J) [simulated]"
    assert monitor.open_windows == []


def test_nested_windows_each_see_their_own_span(clock: VirtualClock) -> None:
    gpu = busy_gpu(clock)
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    monitor.begin_window("epoch")
    clock.advance(2.0)
    monitor.begin_window("step")
    clock.advance(4.0)
    gpu.set_busy(False)
    clock.advance(1.0)
    step = monitor.end_window("step")
    clock.advance(3.0)
    epoch = monitor.end_window("epoch")
    assert (step.time, epoch.time) == (5.0, 10.0)
    assert step.gpu_energy[0] == pytest.approx(4 * BUSY_W + 1 * IDLE_W)
    assert epoch.gpu_energy[0] == pytest.approx(6 * BUSY_W + 4 * IDLE_W)


def test_overlapping_windows(clock: VirtualClock) -> None:
    gpu = busy_gpu(clock)
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    monitor.begin_window("a")
    clock.advance(3.0)
    monitor.begin_window("b")
    assert monitor.open_windows == ["a", "b"]
    clock.advance(3.0)
    gpu.set_power_limit(150)  # slower and lower power from here on
    low_w = gpu.get_power()
    assert low_w < 150.0
    a = monitor.end_window("a")
    clock.advance(3.0)
    b = monitor.end_window("b")
    assert a.gpu_energy[0] == pytest.approx(6 * BUSY_W)
    assert b.gpu_energy[0] == pytest.approx(3 * BUSY_W + 3 * low_w)


def test_duplicate_begin_is_a_clear_error_and_keeps_the_first_window(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    monitor.begin_window("train")
    clock.advance(1.0)
    already_open = r"begin_window\('train'\): a window with this name is already open"
    with pytest.raises(ZeusWindowError, match=already_open):
        monitor.begin_window("train")
    with pytest.raises(ValueError):  # ZeusWindowError is a ValueError too
        monitor.begin_window("train")
    clock.advance(1.0)
    assert monitor.end_window("train").time == 2.0  # the first window is intact


@pytest.mark.parametrize("call", ["end_window", "read_window"])
def test_unknown_window_names_the_open_ones_and_the_fix(clock: VirtualClock, call: str) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    monitor.begin_window("b")
    monitor.begin_window("a")
    with pytest.raises(ZeusWindowError) as info:
        getattr(monitor, call)("missing")
    message = str(info.value)
    assert f"{call}('missing')" in message and "['a', 'b']" in message
    assert "Call begin_window('missing') first" in message


def test_ending_twice_fails_the_second_time(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    monitor.begin_window("w")
    monitor.end_window("w")
    with pytest.raises(ZeusWindowError, match="no window with this name is open"):
        monitor.end_window("w")


def test_cancel_returns_zeros_logs_nothing_and_frees_the_name(clock: VirtualClock, tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    cpu = FakeCPU(0, clock, cpu_w=50.0, dram_w=5.0)
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpus=[cpu], log_file=log)
    monitor.begin_window("w")
    clock.advance(5.0)
    m = monitor.end_window("w", cancel=True)
    assert (m.time, m.gpu_energy, m.cpu_energy, m.dram_energy) == (0.0, {0: 0.0}, {0: 0.0}, {0: 0.0})
    assert m.simulated
    assert log.read_text().count("\n") == 1  # the header only: a cancelled window logs no row
    monitor.begin_window("w")  # the name is free again
    clock.advance(1.0)
    assert monitor.end_window("w").gpu_energy[0] == pytest.approx(BUSY_W)
    monitor.close()


def test_read_window_is_live_and_leaves_the_window_open(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    monitor.begin_window("w")
    clock.advance(2.0)
    first = monitor.read_window("w")
    clock.advance(2.0)
    second = monitor.read_window("w")
    assert (first.time, second.time) == (2.0, 4.0)
    assert (first.gpu_energy[0], second.gpu_energy[0]) == (pytest.approx(600.0), pytest.approx(1200.0))
    assert monitor.open_windows == ["w"]
    clock.advance(1.0)
    assert monitor.end_window("w").time == 5.0


def test_window_context_manager(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    with monitor.window("eval") as w:
        clock.advance(1.0)
        assert w.measurement is None
        assert w.read().time == 1.0
        clock.advance(1.0)
    assert w.measurement is not None and w.measurement.time == 2.0
    assert w.read() is w.measurement
    assert monitor.open_windows == []


def test_window_context_manager_ends_the_window_on_exception(clock: VirtualClock, tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[], log_file=log)
    handle = None
    with pytest.raises(RuntimeError, match="boom"):
        with monitor.window("train") as handle:
            clock.advance(4.0)
            raise RuntimeError("boom")
    assert handle is not None and handle.measurement is not None
    assert handle.measurement.time == 4.0
    assert handle.measurement.gpu_energy[0] == pytest.approx(4 * BUSY_W)
    assert monitor.open_windows == []
    with log.open() as f:
        assert [r["window_name"] for r in csv.DictReader(f)] == ["train"]  # the partial window is kept
    monitor.close()


def read_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_log_rows_are_flushed_as_windows_end(clock: VirtualClock, tmp_path: Path) -> None:
    log = tmp_path / "sub" / "energy.csv"
    cpus = [FakeCPU(0, clock, 40.0, 4.0), FakeCPU(1, clock, 60.0, None)]
    monitor = ZeusMonitor(gpus=[busy_gpu(clock, 0), busy_gpu(clock, 1)], cpus=cpus, log_file=log)
    clock.advance(100.0)
    monitor.begin_window("step_1")
    clock.advance(2.0)
    monitor.end_window("step_1")
    rows = read_rows(log)  # readable before close: flushed at once
    assert rows[0] == [
        "start_time",
        "window_name",
        "elapsed_time",
        "gpu0_energy",
        "gpu1_energy",
        "cpu0_energy",
        "cpu1_energy",
        "dram0_energy",
    ]
    assert rows[1][:3] == ["100.0", "step_1", "2.0"]
    assert [float(v) for v in rows[1][3:]] == pytest.approx([600.0, 600.0, 80.0, 120.0, 8.0])
    monitor.begin_window("step_2")
    clock.advance(1.0)
    monitor.end_window("step_2")
    assert [r[1] for r in read_rows(log)] == ["window_name", "step_1", "step_2"]
    monitor.close()

    # A new monitor with the same devices appends below the same header.
    again = ZeusMonitor(gpus=[busy_gpu(clock, 0), busy_gpu(clock, 1)], cpus=cpus, log_file=log)
    again.begin_window("step_3")
    again.end_window("step_3")
    again.close()
    assert [r[1] for r in read_rows(log)] == ["window_name", "step_1", "step_2", "step_3"]


def test_log_with_other_columns_is_refused(clock: VirtualClock, tmp_path: Path) -> None:
    log = tmp_path / "energy.csv"
    log.write_text("start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n1,a,1,1,1\n")
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[], log_file=log)
    with pytest.raises(ZeusConfigError, match="Use a new file for a different set of devices"):
        monitor.begin_window("w")  # refused before a window exists, so no measurement can be lost
    assert monitor.open_windows == []
    assert log.read_text().count("\n") == 2  # the user's file is untouched
    monitor.close()


def test_multi_gpu_energy_per_gpu_and_selection(clock: VirtualClock) -> None:
    gpus = [busy_gpu(clock, i) for i in range(4)]
    gpus[2].set_power_limit(200)
    monitor = ZeusMonitor(gpus=gpus, gpu_indices=[2, 0], cpu_indices=[])
    assert [g.index for g in monitor.gpus] == [2, 0]
    monitor.begin_window("steps")
    elapsed = simulate_steps(gpus, 50)
    m = monitor.end_window("steps")
    assert m.time == pytest.approx(elapsed)
    assert set(m.gpu_energy) == {0, 2}
    p2 = gpus[2].behavior.step(200, None)[1]
    assert m.gpu_energy[0] == pytest.approx(BUSY_W * elapsed)
    assert m.gpu_energy[2] == pytest.approx(p2 * elapsed)
    assert m.gpu_energy[2] < m.gpu_energy[0]


def test_unknown_gpu_or_cpu_index_is_a_clear_error(clock: VirtualClock) -> None:
    with pytest.raises(ZeusDeviceNotFoundError, match=r"gpu_indices=\[5\].*no GPU 5.*GPUs \[0, 1\]"):
        ZeusMonitor(gpus=[busy_gpu(clock, 0), busy_gpu(clock, 1)], gpu_indices=[5], cpu_indices=[])
    with pytest.raises(ZeusDeviceNotFoundError, match=r"no CPU 3"):
        ZeusMonitor(gpus=[], cpus=[FakeCPU(0, clock, 1.0, None)], cpu_indices=[3])


def test_gpus_on_different_clocks_are_refused() -> None:
    with pytest.raises(ZeusConfigError, match="different clocks"):
        ZeusMonitor(gpus=[busy_gpu(VirtualClock(), 0), busy_gpu(VirtualClock(), 1)], cpu_indices=[])


def test_bad_sync_option_is_refused() -> None:
    with pytest.raises(ZeusConfigError, match="sync_execution_with='cupy'"):
        ZeusMonitor(gpus=[], cpu_indices=[], sync_execution_with="cupy")


def test_cpu_and_dram_energy_from_fake_packages(clock: VirtualClock) -> None:
    cpus = [FakeCPU(0, clock, 80.0, 10.0), FakeCPU(1, clock, 70.0, None)]
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpus=cpus)
    monitor.begin_window("w")
    clock.advance(10.0)
    m = monitor.end_window("w")
    assert m.cpu_energy == {0: pytest.approx(800.0), 1: pytest.approx(700.0)}
    assert m.dram_energy == {0: pytest.approx(100.0)}  # package 1 has no DRAM domain
    assert m.total_energy == pytest.approx(3000.0 + 1500.0 + 100.0)
    assert m.describe() == (
        "10.00 s, 4600.0 J (GPU 0: 3000.0 J, CPU 0: 800.0 J, CPU 1: 700.0 J, DRAM 0: 100.0 J) [simulated]"
    )
    only_one = ZeusMonitor(gpus=[], cpus=cpus, cpu_indices=[1])
    only_one.begin_window("w")
    clock.advance(1.0)
    m = only_one.end_window("w")
    assert m.cpu_energy == {1: pytest.approx(70.0)} and m.dram_energy == {}
    assert not m.simulated  # no simulated device measured
    assert only_one.cpus == [cpus[1]]


def test_empty_cpu_indices_reads_no_cpu(clock: VirtualClock) -> None:
    cpu = FakeCPU(0, clock, 10.0, None)
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpus=[cpu], cpu_indices=[])
    monitor.begin_window("w")
    monitor.end_window("w")
    assert monitor.cpus == [] and cpu.reads == 0


def test_gpu_without_energy_counter_is_estimated_from_power(clock: VirtualClock) -> None:
    old = busy_gpu(clock, 1, energy_counter=False)
    monitor = ZeusMonitor(gpus=[busy_gpu(clock, 0), old], cpu_indices=[], power_sample_interval_s=0.01)
    monitor.begin_window("w")
    clock.advance(10.0)
    m = monitor.end_window("w")
    assert m.estimated_gpus == frozenset({1}) and m.estimated
    assert m.gpu_energy == {0: pytest.approx(3000.0), 1: pytest.approx(3000.0)}
    assert "GPU 1: 3000.0 J (estimated)" in m.describe()
    threads = [t for t in threading.enumerate() if t.name == "zeus-power-monitor"]
    assert threads  # power sampling runs in the background ...
    monitor.close()
    for t in threads:
        t.join(timeout=2.0)
        assert not t.is_alive()  # ... and close() stops it


def test_reset_windows_forgets_open_windows(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[])
    monitor.begin_window("a")
    monitor.begin_window("b")
    monitor.reset_windows()
    assert monitor.open_windows == []
    monitor.begin_window("a")  # no duplicate error any more
    assert monitor.open_windows == ["a"]


def test_close_forgets_windows_and_closes_the_log(clock: VirtualClock, tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    with ZeusMonitor(gpus=[busy_gpu(clock)], cpu_indices=[], log_file=log) as monitor:
        monitor.begin_window("done")
        monitor.end_window("done")
        monitor.begin_window("left_open")
    assert monitor.open_windows == []
    assert monitor._log is not None and not monitor._log.is_open  # file handle released
    assert [r[1] for r in read_rows(log)] == ["window_name", "done"]
