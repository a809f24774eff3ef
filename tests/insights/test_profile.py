"""zeus_core.profile: energy per call with cooldown and measurement durations found automatically.

The GPU is a fake NVML device on a virtual clock that heats up: its temperature follows power with
a 30 s time constant and its power grows 0.4 % per °C (leakage), so back-to-back measurements of the
same work drift upwards. Each call draws 250 W for 50 ms (±0.5 % noise); idle is 60 W.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from typing import Callable

import pytest

from zeus_core.device import _base as device_base
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.profile import ProfileResult, measure, profile
from zeus_core.testing import FakeGPUSpec, FakeNVML, PhysicalModel, SimulatedGPU, VirtualClock

CALL_S, BUSY_W, IDLE_W = 0.05, 250.0, 60.0


@dataclass
class HotGPU:
    clock: VirtualClock
    fake: FakeNVML
    monitor: ZeusMonitor
    work: Callable[[], None]
    sleep: Callable[[float], None]


def hot_gpu(monkeypatch: pytest.MonkeyPatch, slowdown_c: float | None = None, seed: int = 0) -> HotGPU:
    clock = VirtualClock(0.0)
    spec = FakeGPUSpec.a40(
        power_w=IDLE_W,
        thermal_resistance_c_per_w=0.2,
        thermal_time_constant_s=30.0,
        leakage_per_c=0.004,
        slowdown_c=slowdown_c,
    )
    fake = FakeNVML([spec], clock=clock)
    fake.patch(monkeypatch)
    monkeypatch.setattr(device_base, "wall_clock", clock)
    from zeus_core.device._nvidia import nvidia_gpus

    monitor = ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[], sync_execution_with=None)
    rng = random.Random(seed)

    def work() -> None:
        fake.set_power(0, BUSY_W)
        slow = fake.devices[0].slowed_down
        clock.advance(CALL_S * rng.gauss(1.0, 0.005) / (0.8 if slow else 1.0))
        fake.set_power(0, IDLE_W)

    def sleep(seconds: float) -> None:
        fake.set_power(0, IDLE_W)
        clock.advance(seconds)

    return HotGPU(clock, fake, monitor, work, sleep)


def rel_std(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def test_profile_has_a_lower_variance_than_back_to_back_windows_on_a_gpu_that_heats_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = hot_gpu(monkeypatch)
    naive = [measure(g.work, g.monitor, measurement_s=2.0, warmup_calls=0, sleep=g.sleep) for _ in range(8)]
    naive_energy = [t.energy_per_call_j for t in naive]
    assert naive_energy == sorted(naive_energy)  # they drift upwards as the GPU heats
    g.sleep(300.0)  # cool down again
    result = profile(g.work, g.monitor, sleep=g.sleep)
    assert isinstance(result, ProfileResult) and len(result.trials) == 5
    assert result.rel_std < 0.01  # the target spread
    assert rel_std(naive_energy) > 5 * result.rel_std
    # every trial began equally cool: within the tolerance of the starting temperature (+ warm-up calls)
    starts = [t.temperature_before_c for t in result.trials]
    assert max(starts) - min(starts) <= 2.0  # type: ignore[operator]
    assert result.cooldown_s > 0 and result.measurement_s >= 1.0
    assert result.sweep[-1][0] == result.measurement_s
    assert result.time_per_call_s == pytest.approx(CALL_S, rel=0.02)
    assert "J/call" in str(result)


def test_trials_slowed_down_by_heat_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    g = hot_gpu(monkeypatch, slowdown_c=48.0)  # 250 W would settle at 80 °C: slows down in a few seconds
    result = profile(g.work, g.monitor, sleep=g.sleep, measurement_s=8.0, trials=3)
    assert result.rejected and all(t.slowdown_s > 0 for t in result.rejected)
    assert all(t.slowdown_s == 0 for t in result.trials)


def test_without_a_temperature_sensor_the_cooldown_is_a_fixed_pause() -> None:
    clock = VirtualClock()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock)
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[], sync_execution_with=None)

    def step() -> None:
        gpu.run_steps(1)  # 0.1 s at 300 W on the virtual clock

    result = profile(step, monitor, sleep=clock.advance, trials=3, min_measurement_s=1.0)
    assert result.energy_per_call_j == pytest.approx(30.0) and result.rel_std == pytest.approx(0.0, abs=1e-9)
    assert result.cooldown_s == pytest.approx(result.measurement_s)  # as long as the measurement
    fixed = profile(step, monitor, sleep=clock.advance, trials=2, measurement_s=0.5, cooldown_s=0.0)
    assert fixed.cooldown_s == 0.0 and fixed.trials[0].calls == 5


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ZeusConfigError, match="trials >= 2"):
        profile(lambda: None, ZeusMonitor(gpus=[], cpu_indices=[]), trials=1)
    with pytest.raises(ZeusConfigError):
        profile(lambda: None, ZeusMonitor(gpus=[], cpu_indices=[]), min_measurement_s=4, max_measurement_s=2)
