"""Temperature and clock-event reasons, and the predicate that drops throttled or still-heating windows.

Covered: the fake NVML's thermal model, the device layer, the temperature monitor, and
``check_window``, which the power-limit optimizer can call on each profiling window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from zeus_core.device import _base as device_base
from zeus_core.device._base import ClockEventReasons
from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError
from zeus_core.monitor._thermal import TemperatureMonitor, check_window
from zeus_core.testing import FakeGPUSpec, FakeNVML, PhysicalModel, SimulatedGPU, VirtualClock


@dataclass
class Rig:
    """One fake GPU on a virtual clock behind the real NVML backend, and a temperature monitor."""

    clock: VirtualClock
    fake: FakeNVML
    gpu: device_base.GPU
    temps: TemperatureMonitor

    def run(self, seconds: float, watts: float, step_s: float = 0.1) -> int:
        """Work drawing ``watts`` for ``seconds`` of work; a slowed-down GPU takes longer per step.

        Returns the steps run; the monitor samples every 0.5 s.
        """
        steps = round(seconds / step_s)
        last = self.clock()
        for _ in range(steps):
            self.fake.set_power(0, watts)
            slow = self.fake.devices[0].slowed_down
            self.clock.advance(step_s / (self.fake.devices[0].spec.slowdown_power_factor if slow else 1.0))
            if self.clock() - last >= 0.5:
                last = self.clock()
                self.temps.sample_now()
        return steps

    def idle(self, seconds: float, watts: float = 50.0) -> None:
        self.fake.set_power(0, watts)
        for _ in range(round(seconds / 0.5)):
            self.clock.advance(0.5)
            self.temps.sample_now()


def rig(monkeypatch: pytest.MonkeyPatch, **spec: float | None) -> Rig:
    clock = VirtualClock(0.0)
    fake = FakeNVML([FakeGPUSpec.a40(power_w=50.0, **spec)], clock=clock)  # type: ignore[arg-type]
    fake.patch(monkeypatch)
    monkeypatch.setattr(device_base, "wall_clock", clock)
    from zeus_core.device._nvidia import nvidia_gpus

    gpu = nvidia_gpus(environ={})[0]
    return Rig(clock, fake, gpu, TemperatureMonitor([gpu], update_period=0.5))


def test_temperature_follows_power_with_the_thermal_time_constant(monkeypatch: pytest.MonkeyPatch) -> None:
    r = rig(monkeypatch, thermal_resistance_c_per_w=0.2, thermal_time_constant_s=30.0)
    assert r.gpu.get_temperature() == 30.0  # ambient at creation
    r.fake.set_power(0, 250.0)  # steady state 30 + 0.2 x 250 = 80 °C
    r.clock.advance(30.0)  # one time constant: 1 - 1/e of the way
    assert r.gpu.get_temperature() == pytest.approx(30 + 50 * (1 - math.exp(-1)), abs=0.6)
    r.clock.advance(600.0)
    assert r.gpu.get_temperature() == 80.0
    assert r.gpu.get_clock_event_reasons() == ClockEventReasons(0)  # no slowdown unless the spec asks
    assert r.fake.devices[0].draw_w() == 250.0  # and no change of power: energy stays exact by default


def test_a_hot_gpu_slows_down_reports_it_and_recovers_with_hysteresis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r = rig(monkeypatch, thermal_resistance_c_per_w=0.25, thermal_time_constant_s=20.0, slowdown_c=80.0)
    r.fake.set_power(0, 280.0)  # would settle at 100 °C
    r.clock.advance(200.0)
    reasons = r.gpu.get_clock_event_reasons()
    assert reasons.slowdown and "sw_thermal_slowdown" in reasons.names
    assert r.gpu.get_power() == pytest.approx(0.8 * 280.0)  # slowed down: 80 % of the power
    r.fake.set_power(0, 50.0)
    r.clock.advance(200.0)
    assert not r.gpu.get_clock_event_reasons().slowdown and r.gpu.get_temperature() < 77.0
    limited = rig(monkeypatch)
    limited.fake.devices[0].power_limit_mw = 200_000
    limited.fake.set_power(0, 280.0)
    assert limited.gpu.get_clock_event_reasons().names == ("sw_power_cap",)  # a cap, not a slowdown
    assert not limited.gpu.get_clock_event_reasons().slowdown


def test_devices_without_sensors_say_so_and_the_monitor_skips_them() -> None:
    sim = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    with pytest.raises(ZeusNotSupportedError):
        sim.get_temperature()
    with pytest.raises(ZeusNotSupportedError):
        sim.get_clock_event_reasons()
    temps = TemperatureMonitor([sim])
    temps.sample_now()
    assert temps.supported == [] and temps.get_temperature() is None
    check = check_window(temps, 0.0, 1.0)
    assert check.ok and check.samples == 0  # nothing to judge: usable
    with pytest.raises(ZeusConfigError):
        TemperatureMonitor([sim], update_period=0)
    with pytest.raises(ZeusConfigError):
        check_window(temps, 2.0, 1.0)


def test_the_monitor_samples_in_a_thread_and_answers_zeus_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    r = rig(monkeypatch)
    r.fake.set_power(0, 250.0)
    r.idle(3.0, watts=250.0)
    timeline = r.temps.get_temperature_timeline()
    assert list(timeline) == [0] and len(timeline[0]) == 6
    assert [c for _, c in timeline[0]] == sorted(c for _, c in timeline[0])  # heating
    assert r.temps.get_temperature(time=0.0) == {0: timeline[0][0][1]}
    assert r.temps.get_temperature_timeline(start_time=2.0)[0][0][0] >= 2.0
    with TemperatureMonitor([r.gpu], update_period=0.01) as threaded:
        for _ in range(200):
            if len(threaded.get_temperature_timeline().get(0, [])) >= 3:
                break
            import time

            time.sleep(0.01)
    assert len(threaded.get_temperature_timeline()[0]) >= 3 and not threaded.running


def test_check_window_flags_throttled_and_still_heating_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    r = rig(monkeypatch, thermal_resistance_c_per_w=0.25, thermal_time_constant_s=20.0, slowdown_c=85.0)
    r.temps.sample_now()
    start = r.clock()
    r.run(10.0, 200.0)  # from 30 °C towards 80 °C
    heating = check_window(r.temps, start, r.clock())
    assert heating.settling and not heating.throttled and not heating
    assert "temperature still changing" in heating.reason
    r.run(150.0, 200.0)  # settled at 80 °C
    start = r.clock()
    r.run(10.0, 200.0)
    assert check_window(r.temps, start, r.clock()).ok
    r.run(150.0, 300.0)  # would settle at 105 °C: slows down at 85 °C
    start = r.clock()
    r.run(10.0, 300.0)
    hot = check_window(r.temps, start, r.clock())
    assert hot.throttled and hot.throttled_s > 5.0 and "slowed down" in hot.reason


def test_a_profiling_loop_that_drops_flagged_windows_measures_each_limit_at_its_steady_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the power-limit optimizer would do with the predicate: measure, check, measure again."""
    r = rig(  # settles at 30 + 0.2 x draw: 90 °C at 300 W slows down; 250 W and below do not
        monkeypatch,
        thermal_resistance_c_per_w=0.2,
        thermal_time_constant_s=20.0,
        slowdown_c=85.0,
        leakage_per_c=0.004,
    )
    demand_w, step_s, window_s = 300.0, 0.1, 5.0
    dev = r.fake.devices[0]
    first_windows: dict[float, tuple[float, float]] = {}
    kept: dict[float, tuple[float, float]] = {}
    flagged: list[tuple[float, str]] = []
    for limit in (300.0, 250.0, 200.0, 150.0):
        dev.power_limit_mw = int(limit * 1000)
        for attempt in range(20):
            e0, t0 = r.gpu.get_total_energy(), r.clock()
            steps = r.run(window_s, demand_w, step_s)
            energy, elapsed = r.gpu.get_total_energy() - e0, r.clock() - t0
            if attempt == 0:
                first_windows[limit] = (energy / steps, elapsed / steps)
            check = check_window(r.temps, t0, r.clock())
            if check:
                kept[limit] = (energy / steps, elapsed / steps)
                break
            flagged.append((limit, check.reason))
    assert set(kept) == {250.0, 200.0, 150.0}  # 300 W stays throttled: the optimizer is told so
    assert any("slowed down" in reason for limit, reason in flagged if limit == 300.0)
    assert any("temperature still changing" in reason for _, reason in flagged)
    for limit, (energy_per_step, time_per_step) in kept.items():
        # settled: the draw is the limit (leakage only pushes the demand further above it)
        assert time_per_step == pytest.approx(step_s)
        assert energy_per_step == pytest.approx(limit * step_s, rel=0.01)
    # the first window at 300 W (still heating, then slowing down) was off by more than the kept ones
    assert abs(first_windows[300.0][1] - step_s) > 0.005 or abs(first_windows[300.0][0] - 280 * step_s) > 1.0
