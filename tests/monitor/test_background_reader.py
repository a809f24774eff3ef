"""ZeusMonitor's background reader on GPUs that behave like real ones (zeus_core/testing/_quirky_nvml.py).

Timing margins are generous: these run on a loaded machine. Accuracy targets live in
benchmarks/measurement_accuracy.py, not here.
"""

from __future__ import annotations

import gc
import os
import pickle
import threading
import time
import warnings

import pytest

from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._reader import shared_reader
from zeus_core.testing._quirky_nvml import FakeGPUSpec, Quirks, QuirkyNVML, StepProfile, constant, square_wave


@pytest.fixture(autouse=True)
def _no_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZEUS_SUITE_SIMULATE"):
        monkeypatch.delenv(var, raising=False)


def quirky(monkeypatch: pytest.MonkeyPatch, *specs: FakeGPUSpec, **kw: object) -> QuirkyNVML:
    fake = QuirkyNVML(list(specs) or [FakeGPUSpec.h100()], **kw)  # type: ignore[arg-type]
    fake.patch(monkeypatch)
    return fake


def monitor_on(fake: QuirkyNVML, **kw: object) -> ZeusMonitor:
    from zeus_core.device._nvidia import nvidia_gpus

    return ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[], sync_execution_with=None, **kw)  # type: ignore[arg-type]


def timed_window(monitor: ZeusMonitor, name: str, seconds: float) -> tuple[float, float, object]:
    monitor.begin_window(name)
    t0 = time.time()
    time.sleep(seconds)
    t1 = time.time()
    return t0, t1, monitor.end_window(name)


def caller_thread_nvml_calls(fake: QuirkyNVML, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the NVML reads made on this (the test's) thread."""
    seen: list[str] = []
    me = threading.get_ident()
    for name in (
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetPowerUsage",
    ):
        real = getattr(fake, name)

        def spy(*args: object, _real: object = real, _name: str = name) -> object:
            if threading.get_ident() == me:
                seen.append(_name)
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(fake, name, spy)
    return seen


def test_reader_starts_with_the_monitor_and_stops_with_the_last_one(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[constant(300.0)])
    first, second = monitor_on(fake), monitor_on(fake)
    reader = shared_reader()
    assert reader.running
    first.close()
    assert reader.running  # the second monitor still measures
    calls = fake.calls["nvmlDeviceGetFieldValues"]
    time.sleep(0.05)
    assert fake.calls["nvmlDeviceGetFieldValues"] > calls  # still sampling
    second.close()
    time.sleep(0.02)  # a sampling round that began before close may still finish its read
    calls = fake.total_calls()
    time.sleep(0.05)
    assert fake.total_calls() == calls  # nothing reads the GPU any more
    assert 0.0 <= reader.cpu_fraction < 1.0
    if not reader._tracks:  # no other monitor (of an earlier test) is alive: the thread is gone
        assert not reader.running


def test_a_monitor_dropped_without_close_releases_its_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[constant(300.0)])
    monitor = monitor_on(fake)
    time.sleep(0.02)
    del monitor
    gc.collect()
    calls = fake.total_calls()
    time.sleep(0.05)
    assert fake.total_calls() == calls


def test_windows_take_timestamps_only_and_finalize_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 40 ms reads and a 300 ms counter, begin/end return at once; the energy comes later."""
    quirks = Quirks(counter_period_s=0.3, energy_read_latency_s=0.04, power_read_latency_s=0.01)
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), quirks=quirks, profiles=[constant(250.0)])
    with monitor_on(fake) as monitor:
        on_my_thread = caller_thread_nvml_calls(fake, monkeypatch)
        time.sleep(0.1)
        t0 = time.perf_counter()
        monitor.begin_window("step")
        begin_s = time.perf_counter() - t0
        time.sleep(0.05)
        t0 = time.perf_counter()
        m = monitor.end_window("step")
        end_s = time.perf_counter() - t0
        assert on_my_thread == []  # no NVML call on the caller's thread
        assert begin_s < 0.03 and end_s < 0.03  # far below one 40 ms read
        assert not m.finalized  # the counter has not refreshed since the window ended
        assert 0.05 <= m.time < 0.5
        energy = m.gpu_energy[0]  # waits for the reader
        assert m.finalized and on_my_thread == []
        # Loose: with 40 ms reads and only the first counter refreshes seen, ticks are known to ~40 ms.
        assert energy == pytest.approx(250.0 * m.time, rel=0.3)
        assert m.total_energy == energy and not m.estimated and m.interpolated_gpus == frozenset()


def test_window_shorter_than_a_counter_period_is_apportioned_by_power(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 20 ms window inside a 100 ms counter period: not 0 J, not a whole tick, but its share."""
    profile = StepProfile([(0.05, 400.0), (0.05, 100.0)])  # two levels, so the share depends on power
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[profile])
    with monitor_on(fake) as monitor:
        time.sleep(0.3)
        errors = []
        for _ in range(8):
            t0, t1, m = timed_window(monitor, "short", 0.02)
            truth = fake.true_energy(0, t0, t1)
            errors.append(abs(m.gpu_energy[0] - truth) / truth)  # type: ignore[attr-defined]
    errors.sort()
    assert errors[len(errors) // 2] < 0.25  # median: within 25 % (the benchmark's target is tighter)


def test_long_windows_match_the_true_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(
        monkeypatch, FakeGPUSpec.h100(), FakeGPUSpec.a100(), profiles=[square_wave(), constant(200.0)]
    )
    with monitor_on(fake) as monitor:
        time.sleep(0.4)
        t0, t1, m = timed_window(monitor, "long", 0.6)
    for i in (0, 1):
        assert m.gpu_energy[i] == pytest.approx(fake.true_energy(i, t0, t1), rel=0.05)  # type: ignore[attr-defined]


def test_nested_and_overlapping_windows_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[square_wave()])
    with monitor_on(fake) as monitor:
        time.sleep(0.2)
        monitor.begin_window("outer")
        monitor.begin_window("a")
        time.sleep(0.12)
        monitor.begin_window("b")  # overlaps a
        time.sleep(0.05)
        a = monitor.end_window("a")
        monitor.begin_window("c")
        time.sleep(0.1)
        b = monitor.end_window("b")
        c = monitor.end_window("c")
        outer = monitor.end_window("outer")
    assert outer.time > a.time + c.time - 0.01
    # Windows share one counter-value function V(t): a then c (back to back) tile the outer window.
    assert a.gpu_energy[0] + c.gpu_energy[0] == pytest.approx(outer.gpu_energy[0], rel=0.02)
    assert 0 < b.gpu_energy[0] < outer.gpu_energy[0]


def test_a_lost_gpu_fails_its_windows_with_a_clear_error_and_no_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(
        monkeypatch, FakeGPUSpec.h100(), FakeGPUSpec.h100(), profiles=[constant(100.0), constant(100.0)]
    )
    with monitor_on(fake) as monitor:
        time.sleep(0.15)
        monitor.begin_window("w")
        fake.lose(1)
        time.sleep(0.05)
        m = monitor.end_window("w")
        t0 = time.monotonic()
        with pytest.raises(ZeusDeviceError, match="GPU 1.*reading it failed") as err:
            m.gpu_energy  # noqa: B018
        assert time.monotonic() - t0 < 5.0
        assert "GpuIsLost" in str(err.value) or "GPU is lost" in str(err.value)
        monitor.begin_window("after")  # later windows fail the same way, at once
        with pytest.raises(ZeusDeviceError, match="GPU 1"):
            monitor.end_window("after").gpu_energy  # noqa: B018


def test_gpu_without_energy_counter_integrates_power_and_is_marked_estimated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.p100(), quirks=Quirks.volta(), profiles=[constant(150.0)])
    with monitor_on(fake) as monitor:
        time.sleep(0.05)
        t0, t1, m = timed_window(monitor, "w", 0.3)
        assert m.estimated_gpus == frozenset({0})  # type: ignore[attr-defined]
        assert m.gpu_energy[0] == pytest.approx(150.0 * (t1 - t0), rel=0.1)  # type: ignore[attr-defined]
    assert fake.calls["nvmlDeviceGetPowerUsage"] > 10  # sampled in the background


def test_gpu_without_instant_power_uses_the_counter_and_is_marked_interpolated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An A40 on an old driver: no instant-power field, nvmlDeviceGetPowerUsage a 1 s average."""
    quirks = Quirks(instant_field=False, power_usage_average_s=1.0)
    fake = quirky(
        monkeypatch, FakeGPUSpec.a40(instant_power_field=False), quirks=quirks, profiles=[constant(200.0)]
    )
    with monitor_on(fake) as monitor:
        assert not monitor.gpus[0].has_instant_power
        time.sleep(0.25)
        t0, t1, m = timed_window(monitor, "w", 0.35)
        assert m.interpolated_gpus == frozenset({0}) and not m.estimated  # type: ignore[attr-defined]
        assert m.gpu_energy[0] == pytest.approx(200.0 * (t1 - t0), rel=0.1)  # type: ignore[attr-defined]
    assert fake.calls["nvmlDeviceGetPowerUsage"] <= 2  # an average is no use for edges: not polled


def test_forked_child_measures_with_its_own_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[constant(300.0)])
    monitor = monitor_on(fake)
    time.sleep(0.1)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        pid = os.fork()
    if pid == 0:  # the child: measure, report, exit without running pytest's teardown
        try:
            m = timed_window(monitor, "child", 0.2)[2]
            os.write(write_end, f"{m.gpu_energy[0] / m.time:.3f}".encode())  # type: ignore[attr-defined]
        finally:
            os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end) as f:
        child_power = float(f.read() or "nan")
    assert status == 0 and child_power == pytest.approx(300.0, rel=0.1)
    m = timed_window(monitor, "parent", 0.1)[2]  # the parent's reader is untouched
    assert m.gpu_energy[0] == pytest.approx(300.0 * m.time, rel=0.15)  # type: ignore[attr-defined]
    monitor.close()


def test_measurement_pickles_once_final(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[constant(300.0)])
    with monitor_on(fake) as monitor:
        time.sleep(0.1)
        m = timed_window(monitor, "w", 0.05)[2]
        copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.finalized


def test_monitor_survives_pickling_and_measures_the_same_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning's ddp_spawn pickles callbacks with the monitor they hold."""
    quirky(monkeypatch, FakeGPUSpec.h100(), FakeGPUSpec.h100(), profiles=[constant(100.0), constant(300.0)])
    monitor = ZeusMonitor(gpu_indices=[1], cpu_indices=[], sync_execution_with=None)
    monitor.begin_window("open in the parent")
    clone = pickle.loads(pickle.dumps(monitor))
    monitor.close()
    assert clone.gpu_indices == [1] and clone.cpu_indices == [] and clone.open_windows == []
    time.sleep(0.1)
    m = timed_window(clone, "w", 0.2)[2]
    assert m.gpu_energy[1] == pytest.approx(300.0 * m.time, rel=0.1)  # type: ignore[attr-defined]
    clone.close()


def test_monitor_of_simulated_gpus_pickles_with_their_model() -> None:
    from zeus_core import PhysicalModel, SimulatedGPU, VirtualClock

    clock = VirtualClock()
    monitor = ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)], cpu_indices=[])
    clone = pickle.loads(pickle.dumps(monitor))
    clone.begin_window("w")
    clone.clock.advance(2.0)  # type: ignore[attr-defined]
    m = clone.end_window("w")
    assert m.simulated and m.time == 2.0 and m.gpu_energy[0] == pytest.approx(600.0)


def test_zeus_positional_order_and_attributes(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """Zeus's order: (gpu_indices, cpu_indices, approx_instant_energy, log_file, sync_execution_with)."""
    quirky(monkeypatch, FakeGPUSpec.h100(), FakeGPUSpec.h100(), profiles=[constant(100.0), constant(200.0)])
    log = f"{tmp_path}/windows.csv"
    monitor = ZeusMonitor([1], [], True, log, None)
    assert monitor.gpu_indices == [1] and monitor.cpu_indices == [] and monitor.approx_instant_energy
    monitor.begin_window("w")
    time.sleep(0.1)
    result = monitor.end_window("w")
    assert result.total_energy == pytest.approx(200.0 * result.time, rel=0.15)
    monitor.close()
    with open(log) as f:
        assert f.readline().strip() == "start_time,window_name,elapsed_time,gpu1_energy"
        assert f.readline().split(",")[1] == "w"
    with pytest.raises(ZeusConfigError, match="approx_instant_energy.*sync_execution_with='torch'"):
        ZeusMonitor([0], [], "torch")  # Zeus Suite's old third positional argument


def test_approx_instant_energy_fills_windows_between_counter_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zeus's meaning, on the synchronous path: a window that saw no tick is power x time, estimated."""
    quirks = Quirks(counter_period_s=10.0, energy_read_latency_s=0.0, power_read_latency_s=0.0)
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), quirks=quirks, profiles=[constant(250.0)])
    plain = monitor_on(fake, read_in_background=False)
    approx = monitor_on(fake, approx_instant_energy=True, read_in_background=False)
    for monitor in (plain, approx):
        monitor.begin_window("w")
    time.sleep(0.05)
    zero, estimate = plain.end_window("w"), approx.end_window("w")
    assert zero.gpu_energy == {0: 0.0} and not zero.estimated  # the counter did not move
    assert estimate.gpu_energy[0] == pytest.approx(250.0 * estimate.time, rel=0.05) and estimate.estimated


def test_profile_windows_of_a_tenth_of_a_second_stay_physical(monkeypatch: pytest.MonkeyPatch) -> None:
    """The H100 log's 0.1-0.2 s power-limit profiles read 791 W at a 500 W limit; these cannot."""
    kernels = StepProfile([(0.015, 700.0), (0.015, 250.0)])  # capped at the limit, as the GPU does
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), profiles=[kernels])
    fake.devices[0].power_limit_mw = 500_000
    with monitor_on(fake) as monitor:
        time.sleep(0.2)
        powers = []
        for i in range(6):
            m = timed_window(monitor, "profile", 0.1 + 0.02 * i)[2]
            powers.append(m.gpu_energy[0] / m.time)  # type: ignore[attr-defined]
    assert max(powers) <= 500.0 * 1.05  # within the sensor tolerance of the limit
    assert min(powers) >= 375.0 * 0.9  # (500 + 250) / 2 W on average


def test_the_default_monitor_fake_is_the_quirky_h100(quirky_h100: QuirkyNVML) -> None:
    with ZeusMonitor(cpu_indices=[], sync_execution_with=None) as monitor:
        assert monitor.gpu_indices == [0] and monitor.gpus[0].has_instant_power
        time.sleep(0.4)
        t0, t1, m = timed_window(monitor, "w", 0.3)
    assert m.gpu_energy[0] == pytest.approx(quirky_h100.true_energy(0, t0, t1), rel=0.1)  # type: ignore[attr-defined]


def test_a_monitor_of_gpu_objects_pickles_by_index(quirky_h100: QuirkyNVML) -> None:
    """NVIDIAGPU objects hold NVML handles: the copy finds GPU 0 again instead of pickling them."""
    from zeus_core.device._nvidia import nvidia_gpus

    monitor = ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[], sync_execution_with=None)
    clone = pickle.loads(pickle.dumps(monitor))
    monitor.close()
    assert clone.gpu_indices == [0] and clone.gpus[0] is not monitor.gpus[0]
    clone.close()


def test_windows_on_an_idle_counter_still_finalize(monkeypatch: pytest.MonkeyPatch) -> None:
    """A counter that never moves (0 W) has no tick after the window: it is final once clearly stale."""
    quirks = Quirks(counter_period_s=0.05, energy_read_latency_s=0.001, power_read_latency_s=0.001)
    fake = quirky(monkeypatch, FakeGPUSpec.h100(), quirks=quirks, profiles=[constant(0.0)])
    with monitor_on(fake) as monitor:
        m = timed_window(monitor, "idle", 0.05)[2]
        t0 = time.monotonic()
        assert m.gpu_energy == {0: 0.0}  # type: ignore[attr-defined]
        assert time.monotonic() - t0 < 5.0


class _CounterGpu:
    """Just what a GpuTrack asks of a GPU with an energy counter and instant power."""

    index = 0
    has_energy_counter = True
    has_instant_power = True

    def get_power(self) -> float:
        return 200.0

    def describe(self) -> str:
        return "GPU 0 (test)"


def test_values_stay_monotone_while_the_tick_lattice_is_refined() -> None:
    # The reader locates each counter refresh only to within its reads, then sharpens the newest
    # one with a fit through earlier refreshes. Stamps resolved against a refresh must agree with
    # stamps resolved later, or a window straddling it comes out negative (seen as a 0 J step).
    import random

    from zeus_core.monitor._reader import GpuTrack, Stamp

    rng = random.Random(3)
    track = GpuTrack(_CounterGpu())  # type: ignore[arg-type]
    period, watts = 0.1, 200.0
    stamps: list[Stamp] = []
    t = 0.0
    while t < 3.0:
        a = t + rng.uniform(0.0, 0.002)
        b = a + rng.uniform(0.002, 0.008)  # a 4 ms-ish read of the counter...
        sampled = rng.uniform(a, b)  # ...taken at an unknown instant inside it
        track._on_power((a + b) / 2, watts)
        track._on_energy(a, b, watts * period * int(sampled / period))
        for _ in range(4):  # windows begin and end at any instant, many near a refresh
            stamp = Stamp(rng.uniform(a - 0.006, b))
            track.incoming.append(stamp)
            stamps.append(stamp)
        track.resolve()
        t = b
    resolved = sorted((s.t, track.value(s)) for s in stamps if track.value(s) is not None)
    assert len(resolved) > 0.9 * len(stamps)
    values = [v for _, v in resolved]
    backwards = [(t1, v0 - v1) for (_, v0), (t1, v1) in zip(resolved, resolved[1:]) if v1 < v0 - 1e-9]
    assert not backwards, f"V(t) went backwards at {backwards[:3]}"
    assert values[-1] - values[0] == pytest.approx(watts * (resolved[-1][0] - resolved[0][0]), rel=0.05)
