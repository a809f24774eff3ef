"""SimulatedGPU: energy integrates power over its clock; profiles and the physical model."""

from __future__ import annotations

import pytest

from zeus_core import MeasuredProfile, PhysicalModel, SimulatedGPU, VirtualClock, simulate_steps
from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError, ZeusPermissionError, ZeusProfileError


def test_energy_is_power_times_time_on_a_virtual_clock() -> None:
    clock = VirtualClock()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock)
    clock.advance(10.0)  # idle
    assert gpu.get_total_energy() == pytest.approx(10.0 * gpu.behavior.idle_power_w)
    gpu.set_busy(True)
    clock.advance(2.0)
    assert gpu.get_total_energy() == pytest.approx(10.0 * 30.0 + 2.0 * 300.0)


def test_lower_power_limit_is_slower_and_draws_less() -> None:
    clock = VirtualClock()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock)
    t_full = gpu.run_steps(10)
    e_full = gpu.get_total_energy()
    gpu.set_power_limit(150)
    t_low = gpu.run_steps(10)
    e_low = gpu.get_total_energy() - e_full
    assert t_low > t_full
    assert e_low / t_low <= 150.0 + 1e-9 < e_full / t_full


def test_locked_clock_caps_frequency_and_reset_restores() -> None:
    model = PhysicalModel.a40()
    gpu = SimulatedGPU(model, clock=VirtualClock(), busy=True)
    gpu.set_locked_sm_frequency(900)
    assert gpu.locked_sm_frequency == 900
    assert gpu.get_power() == pytest.approx(model.power_at(900))
    gpu.reset_locked_sm_frequency()
    assert gpu.get_power() == pytest.approx(model.power_at(model.f_max_mhz))
    with pytest.raises(ZeusConfigError, match="clocks must satisfy"):
        gpu.set_locked_sm_frequency(5000)


def test_measured_profile_follows_the_csv(shared_data) -> None:
    profile = MeasuredProfile.from_zeus_csv(shared_data / "power_limit_profiles" / "A40_resnet50_1gpu.csv")
    assert profile.gpu_name == "NVIDIA A40"
    assert profile.constraints.max_w == 300.0
    step_300, power_300 = profile.step(300.0, None)
    assert step_300 == pytest.approx(24.011604165658355 / 40)
    assert power_300 == pytest.approx(6224.88599999249 / 24.011604165658355)
    # Between measured limits the values are interpolated.
    mid_t, _ = profile.step(287.5, None)
    assert min(step_300, profile.step(275.0, None)[0]) <= mid_t <= max(step_300, profile.step(275.0, None)[0])
    with pytest.raises(ZeusNotSupportedError, match="no SM-clock data"):
        profile.step(300.0, 1000)


def test_malformed_profile_is_rejected(tmp_path) -> None:
    bad = tmp_path / "A40_bad.csv"
    bad.write_text("start_time,window_name,elapsed_time,gpu0_energy\n0,window_without_limit,1.0,100\n")
    with pytest.raises(ZeusProfileError, match="does not end in"):
        MeasuredProfile.from_zeus_csv(bad)
    with pytest.raises(ZeusProfileError, match="no column 'gpu3_energy'"):
        MeasuredProfile.from_zeus_csv(bad, gpu=3)


def test_permission_and_range_errors_name_the_problem() -> None:
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock(), can_control=False)
    with pytest.raises(ZeusPermissionError):
        gpu.check_control_permission()
    with pytest.raises(ZeusPermissionError):
        gpu.set_power_limit(200)
    ok = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    with pytest.raises(ZeusConfigError, match="100–300 W"):
        ok.set_power_limit(50)


def test_no_counter_mode_and_simulated_label() -> None:
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock(), energy_counter=False)
    assert not gpu.has_energy_counter
    with pytest.raises(ZeusNotSupportedError):
        gpu.get_total_energy()
    assert "simulated" in gpu.name and "simulated" in gpu.describe()


def test_data_parallel_steps_wait_for_the_slowest_gpu() -> None:
    clock = VirtualClock()
    fast = SimulatedGPU(PhysicalModel.a40(), 0, clock=clock)
    slow = SimulatedGPU(PhysicalModel.a40(), 1, clock=clock)
    slow.set_power_limit(120)
    elapsed = simulate_steps([fast, slow], 5)
    assert elapsed == pytest.approx(5 * slow.behavior.step(120, None)[0])
    assert clock() == pytest.approx(elapsed)
    with pytest.raises(ZeusConfigError, match="share one clock"):
        simulate_steps([fast, SimulatedGPU(PhysicalModel.a40(), 2, clock=VirtualClock())], 1)


def test_noise_is_seeded() -> None:
    def run(seed: int) -> float:
        return SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock(), noise=0.05, seed=seed).run_steps(20)

    assert run(1) == run(1) != run(2)
