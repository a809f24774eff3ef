"""The quirky fake NVML behaves like the real GPUs it stands for (zeus_core/testing/_quirky_nvml.py)."""

from __future__ import annotations

import time

import pynvml as real_nvml
import pytest

from zeus_core.testing import VirtualClock
from zeus_core.testing._quirky_nvml import FakeGPUSpec, Quirks, QuirkyNVML, StepProfile, constant, square_wave


def make(profile: StepProfile, quirks: Quirks | None = None, clock: VirtualClock | None = None) -> QuirkyNVML:
    fake = QuirkyNVML(
        [FakeGPUSpec.h100()],
        quirks=quirks or Quirks(energy_read_latency_s=0.0, power_read_latency_s=0.0),
        profiles=[profile],
        clock=clock or VirtualClock(0.0),
    )
    fake.nvmlInit()
    return fake


def test_the_counter_moves_only_at_its_refreshes_and_is_exact_there() -> None:
    clock = VirtualClock(0.0)
    fake = make(constant(200.0), clock=clock)
    dev = fake.devices[0]
    phase = fake._phase[0]
    clock.advance(phase + 0.01)  # just after a refresh
    base = fake.nvmlDeviceGetTotalEnergyConsumption(dev)
    clock.advance(0.1)  # just after the next one
    after_tick = fake.nvmlDeviceGetTotalEnergyConsumption(dev)
    clock.advance(0.08)  # still inside the same 100 ms period
    assert fake.nvmlDeviceGetTotalEnergyConsumption(dev) == after_tick
    assert (after_tick - base) / 1000 == pytest.approx(200.0 * 0.1, abs=0.002)  # whole ticks, J


def test_power_usage_is_a_one_second_average_and_the_field_is_instant() -> None:
    clock = VirtualClock(10.0)
    fake = make(StepProfile([(0.5, 400.0), (0.5, 100.0)], start=0.0), clock=clock)
    dev = fake.devices[0]
    clock.advance(0.25)  # at 10.25 s: instantly 400 W, averaged over the last second 250 W
    assert fake.nvmlDeviceGetPowerUsage(dev) == pytest.approx(250_000, abs=1)
    (field,) = fake.nvmlDeviceGetFieldValues(dev, [real_nvml.NVML_FI_DEV_POWER_INSTANT])
    assert field.nvmlReturn == real_nvml.NVML_SUCCESS and field.value.uiVal == 400_000


def test_older_generations_lack_the_field_and_report_instant_power_usage() -> None:
    clock = VirtualClock(10.0)
    fake = make(square_wave(), quirks=Quirks.volta(), clock=clock)
    dev = fake.devices[0]
    (field,) = fake.nvmlDeviceGetFieldValues(dev, [real_nvml.NVML_FI_DEV_POWER_INSTANT])
    assert field.nvmlReturn == real_nvml.NVML_ERROR_NOT_SUPPORTED
    assert fake.nvmlDeviceGetPowerUsage(dev) == int(fake.true_power(0, clock()) * 1000)


def test_reads_take_their_latency_and_the_power_limit_caps_true_power() -> None:
    fake = QuirkyNVML([FakeGPUSpec.h100()], quirks=Quirks.hopper(), profiles=[constant(650.0)])
    fake.nvmlInit()
    dev = fake.devices[0]
    t0 = time.perf_counter()
    fake.nvmlDeviceGetTotalEnergyConsumption(dev)
    assert time.perf_counter() - t0 >= 0.004
    fake.nvmlDeviceSetPowerManagementLimit(dev, 300_000)
    now = time.time()
    assert fake.true_power(0, now) == 300.0
    assert fake.true_energy(0, now, now + 2.0) == pytest.approx(600.0)


def test_a_lost_gpu_raises_gpu_is_lost() -> None:
    fake = make(constant(100.0))
    fake.lose(0)
    with pytest.raises(real_nvml.NVMLError) as err:
        fake.nvmlDeviceGetTotalEnergyConsumption(fake.devices[0])
    assert err.value.value == real_nvml.NVML_ERROR_GPU_IS_LOST
