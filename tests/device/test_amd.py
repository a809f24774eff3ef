"""The amdsmi backend against the fake amdsmi, and the real amdsmi failing to load without ROCm."""

from __future__ import annotations

import sys

import pytest

from tests.fakes.fake_amdsmi import AmdSmiLibraryException, FakeAMDSMI, FakeAMDSpec
from zeus_core.device import _amd as amd
from zeus_core.device._amd import AMDGPU, amd_gpus, probe_amd
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.testing import VirtualClock


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def install(monkeypatch: pytest.MonkeyPatch, *specs: FakeAMDSpec, **kw: object) -> FakeAMDSMI:
    return FakeAMDSMI(list(specs), **kw).patch(monkeypatch)  # type: ignore[arg-type]


def test_energy_is_accumulator_times_resolution(monkeypatch: pytest.MonkeyPatch, clock: VirtualClock) -> None:
    install(monkeypatch, FakeAMDSpec.mi300x(power_w=600.0), clock=clock)
    (gpu,) = amd_gpus()
    assert gpu.has_energy_counter and gpu.vendor == "amd"
    e0 = gpu.get_total_energy()
    clock.advance(10.0)
    assert gpu.get_total_energy() - e0 == pytest.approx(6000.0, abs=0.001)  # within one 15 µJ tick


def test_power_cap_in_watts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeAMDSpec.mi300x())
    (gpu,) = amd_gpus()
    c = gpu.power_limit_constraints()
    assert (c.min_w, c.max_w, c.default_w) == (200.0, 750.0, 750.0)
    gpu.set_power_limit(450.5)
    assert fake.devices[0].cap_uw == 450_500_000
    assert gpu.get_power_limit() == 450.5
    assert gpu.get_power() == 450.0  # draw (600 W) capped by the new cap, rounded to W like amdsmi
    gpu.set_power_limit(450.5)
    assert fake.calls["amdsmi_set_power_cap"] == 1  # already there: no write
    with pytest.raises(ZeusConfigError, match="200-750 W"):
        gpu.set_power_limit(800)
    gpu.reset_power_limit()
    assert fake.devices[0].cap_uw == 750_000_000


def test_setters_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeAMDSpec.mi300x(), root=False)
    (gpu,) = amd_gpus()
    for action in (
        lambda: gpu.set_power_limit(300),
        gpu.check_control_by_writing,
        lambda: gpu.set_locked_sm_frequency(900),
    ):
        with pytest.raises(ZeusPermissionError, match="root") as e:
            action()
        assert isinstance(e.value.__cause__, AmdSmiLibraryException)
    with pytest.raises(ZeusPermissionError, match="lacks admin rights"):  # asked without writing
        gpu.check_control_permission()


def test_average_power_where_current_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeAMDSpec.mi250x(power_w=400.0))
    (gpu,) = amd_gpus()
    assert gpu.get_power() == 400.0


def test_no_accumulator_means_estimated_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeAMDSpec.mi300x(has_energy=False, power_w=300.0))
    (gpu,) = amd_gpus()
    assert not gpu.has_energy_counter
    with pytest.raises(ZeusNotSupportedError, match="get_total_energy"):
        gpu.get_total_energy()
    with ZeusMonitor(gpus=[gpu], cpu_indices=[], sync_execution_with=None, power_sample_interval_s=0.02) as m:
        m.begin_window("w")
        result = m.end_window("w")
    assert result.estimated_gpus == frozenset({0})


def test_clocks_in_mhz_lock_and_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeAMDSpec.mi300x())
    (gpu,) = amd_gpus()
    assert gpu.supported_sm_frequencies() == [2100, 1700, 1300, 900, 500]  # from Hz, highest first
    assert gpu.supported_memory_frequencies() == [1300, 900]
    gpu.set_locked_sm_frequency(1300)
    assert fake.devices[0].gfx_range == (1300, 1300)
    gpu.reset_locked_sm_frequency()
    assert fake.devices[0].gfx_range == (500, 2100)
    with pytest.raises(ZeusConfigError):
        gpu.set_locked_sm_frequency(100, 3000)


def test_clock_locking_without_amdsmi_support(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeAMDSpec.mi300x())
    monkeypatch.setattr(fake, "amdsmi_set_gpu_clk_range", None)  # an amdsmi without the function
    (gpu,) = amd_gpus()
    with pytest.raises(ZeusNotSupportedError, match="amdsmi_set_gpu_clk_range"):
        gpu.set_locked_sm_frequency(900)


def test_indices_follow_hip_numbering_and_visibility(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = FakeAMDSpec.mi300x(name="A"), FakeAMDSpec.mi300x(name="B"), FakeAMDSpec.mi300x(name="C")
    install(monkeypatch, a, b, c, hip_order=[2, 0, 1])  # amd-smi (PCI) order differs from HIP's
    assert [g.name for g in amd_gpus()] == ["B", "C", "A"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert [(g.index, g.hip_index, g.name) for g in amd_gpus()] == [(0, 2, "A")]
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,0")  # wins over CUDA_VISIBLE_DEVICES
    gpus = amd_gpus()
    assert [g.name for g in gpus] == ["C", "B"]
    assert gpus[0].describe() == "GPU 0: C (HIP 1)"
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "3")
    with pytest.raises(ZeusDeviceNotFoundError, match="HIP_VISIBLE_DEVICES"):
        amd_gpus()
    with pytest.raises(ZeusDeviceNotFoundError):
        AMDGPU(0, hip_index=7)


def test_uuid_entries_and_empty_visibility(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeAMDSpec.mi300x(name="A"), FakeAMDSpec.mi300x(name="B"))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", f"GPU-{fake.devices[1].uuid}")
    assert [g.name for g in amd_gpus()] == ["B"]
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    gpus, why = probe_amd()
    assert gpus == [] and why is not None and "hides all 2 AMD GPU" in why.reason


def test_driver_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeAMDSpec.mi300x(), driver_loaded=False)
    gpus, why = probe_amd()
    assert gpus == [] and why is not None and "could not initialise" in why.reason
    with pytest.raises(ZeusDeviceError):
        AMDGPU(0)


def test_real_amdsmi_without_rocm_is_a_reason_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setattr(amd, "_import_failure", None)  # import for real, even if tried before
    gpus, why = probe_amd()
    if gpus:
        pytest.skip("this machine has ROCm and AMD GPUs")
    assert why is not None and why.what == "AMD GPUs"
    assert "libamd_smi.so" in why.reason or "not installed" in why.reason
    assert capsys.readouterr().out == ""  # amdsmi's import-time print is swallowed
    assert amd_gpus() == []
