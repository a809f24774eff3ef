"""The NVML backend against the fake pynvml, and ZeusMonitor over NVIDIA GPUs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest

from zeus_core.device._nvidia import NVIDIAGPU, _translate, nvidia_gpus, probe_nvidia
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.testing import FakeGPUSpec, FakeNVML, VirtualClock

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def install(monkeypatch: pytest.MonkeyPatch, *specs: FakeGPUSpec, **kw: object) -> FakeNVML:
    return FakeNVML(list(specs), **kw).patch(monkeypatch)  # type: ignore[arg-type]


# -- identity, units, limits ---------------------------------------------------------------------
def test_identity_and_limits_in_watts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40(), FakeGPUSpec.h100())
    a40, h100 = nvidia_gpus()
    assert (a40.index, a40.nvml_index, a40.vendor, a40.simulated) == (0, 0, "nvidia", False)
    assert a40.name == "NVIDIA A40" and h100.name == "NVIDIA H100 80GB HBM3"
    assert a40.uuid == fake.devices[0].uuid and a40.uuid.startswith("GPU-")
    c = h100.power_limit_constraints()
    assert (c.min_w, c.max_w, c.default_w) == (200.0, 700.0, 700.0)
    assert h100.get_power_limit() == 700.0
    h100.power_limit_constraints()
    assert fake.calls["nvmlDeviceGetPowerManagementLimitConstraints"] == 1  # constant: cached
    assert a40.describe() == "GPU 0: NVIDIA A40"


def test_set_power_limit_writes_milliwatts_and_skips_when_already_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    (gpu,) = nvidia_gpus()
    gpu.set_power_limit(212.5)
    assert fake.devices[0].power_limit_mw == 212_500
    assert gpu.get_power_limit() == 212.5
    gpu.set_power_limit(212.5)
    assert fake.calls["nvmlDeviceSetPowerManagementLimit"] == 1
    gpu.reset_power_limit()
    assert fake.devices[0].power_limit_mw == 300_000


def test_set_power_limit_outside_range_names_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    (gpu,) = nvidia_gpus()
    with pytest.raises(ZeusConfigError, match=r"set_power_limit\(350\).*100-300 W"):
        gpu.set_power_limit(350)
    assert fake.calls["nvmlDeviceSetPowerManagementLimit"] == 0


def test_setters_without_root_raise_permission_errors_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.a40(), root=False)
    (gpu,) = nvidia_gpus()
    for action in (
        lambda: gpu.set_power_limit(200),
        lambda: gpu.set_locked_sm_frequency(1200),
        gpu.reset_locked_sm_frequency,
        gpu.check_control_by_writing,
    ):
        with pytest.raises(ZeusPermissionError) as e:
            action()
        assert "setcap cap_sys_admin+ep" in str(e.value) and "root" in str(e.value)
        assert isinstance(e.value.__cause__, pynvml.NVMLError_NoPermission)
        assert isinstance(e.value, PermissionError)


def test_permission_check_writes_nothing_and_follows_the_process_rights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40(), root=False)
    (gpu,) = nvidia_gpus()
    with pytest.raises(ZeusPermissionError, match="lacks admin rights") as e:
        gpu.check_control_permission()
    assert "setcap cap_sys_admin+ep" in str(e.value)
    fake.root = True  # the process's rights, as the fake models them (tests/fakes/admin_rights.py)
    gpu.check_control_permission()
    assert fake.calls["nvmlDeviceSetPowerManagementLimit"] == 0


def test_the_write_probe_rewrites_the_current_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    (gpu,) = nvidia_gpus()
    gpu.set_power_limit(250)
    gpu.check_control_by_writing()
    assert fake.calls["nvmlDeviceSetPowerManagementLimit"] == 2  # the probe bypasses the skip
    assert fake.devices[0].power_limit_mw == 250_000  # and changes nothing


def test_permission_probe_on_a_gpu_without_settable_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.a40(power_limit_settable=False))
    (gpu,) = nvidia_gpus()
    with pytest.raises(ZeusNotSupportedError):
        gpu.check_control_permission()


# -- clocks ----------------------------------------------------------------------------------------
def test_supported_clocks_highest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.a40(memory_clocks_mhz=[405, 7251, 810], sm_clocks_mhz=[210, 1740, 990]))
    (gpu,) = nvidia_gpus()
    assert gpu.supported_memory_frequencies() == [7251, 810, 405]
    assert gpu.supported_sm_frequencies() == [1740, 990, 210]
    assert gpu.supported_sm_frequencies(810) == [1740, 990, 210]
    with pytest.raises(ZeusConfigError, match=r"supported_sm_frequencies\(1234\)"):
        gpu.supported_sm_frequencies(1234)


def test_lock_and_reset_sm_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    (gpu,) = nvidia_gpus()
    gpu.set_locked_sm_frequency(1200)
    assert fake.devices[0].locked_clocks == (1200, 1200)
    gpu.set_locked_sm_frequency(900, 1500)
    assert fake.devices[0].locked_clocks == (900, 1500)
    gpu.reset_locked_sm_frequency()
    assert fake.devices[0].locked_clocks is None
    with pytest.raises(ZeusConfigError, match="max_mhz must be >= min_mhz"):
        gpu.set_locked_sm_frequency(1500, 900)
    with pytest.raises(ZeusConfigError):  # NVML's InvalidArgument, translated
        gpu.set_locked_sm_frequency(100, 5000)


# -- energy and power ------------------------------------------------------------------------------
def test_energy_counter_advances_with_power_times_time(
    monkeypatch: pytest.MonkeyPatch, clock: VirtualClock
) -> None:
    install(monkeypatch, FakeGPUSpec.a40(power_w=250.0), clock=clock)
    (gpu,) = nvidia_gpus()
    assert gpu.has_energy_counter
    e0 = gpu.get_total_energy()
    clock.advance(10.0)
    assert gpu.get_total_energy() - e0 == pytest.approx(2500.0, abs=1e-3)
    gpu.set_power_limit(200)  # the limit caps the draw
    e1 = gpu.get_total_energy()
    clock.advance(10.0)
    assert gpu.get_total_energy() - e1 == pytest.approx(2000.0, abs=1e-3)
    assert gpu.get_power() == 200.0


def test_pre_volta_has_no_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.p100(), FakeGPUSpec.v100())
    p100, v100 = nvidia_gpus()
    assert not p100.has_energy_counter and v100.has_energy_counter
    assert not p100.has_energy_counter
    assert fake.calls["nvmlDeviceGetArchitecture"] == 2  # cached per GPU
    with pytest.raises(ZeusNotSupportedError, match="get_total_energy") as e:
        p100.get_total_energy()
    assert isinstance(e.value.__cause__, pynvml.NVMLError_NotSupported)


def test_counter_that_answers_not_supported_means_no_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    fake.devices[0].has_counter = False  # e.g. a vGPU: new architecture, counter not exposed
    (gpu,) = nvidia_gpus()
    assert not gpu.has_energy_counter


def test_power_uses_the_instant_field_else_power_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40(power_w=123.456), FakeGPUSpec.p100())
    a40, p100 = nvidia_gpus()
    assert a40.get_power() == pytest.approx(123.456)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 0
    assert p100.get_power() == 150.0
    assert p100.get_power() == 150.0
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 2
    assert fake.calls["nvmlDeviceGetFieldValues"] == 2  # the P100 was asked once, then never again


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_NO_PERMISSION, ZeusPermissionError),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, ZeusNotSupportedError),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, ZeusNotSupportedError),
        (pynvml.NVML_ERROR_INVALID_ARGUMENT, ZeusConfigError),
        (pynvml.NVML_ERROR_GPU_IS_LOST, ZeusDeviceError),
        (pynvml.NVML_ERROR_UNKNOWN, ZeusDeviceError),
    ],
)
def test_nvml_errors_translate_in_one_place(code: int, expected: type) -> None:
    err = _translate(pynvml.NVMLError(code), "GPU 3: something(7)")
    assert type(err) is expected
    assert str(err).startswith("GPU 3: something(7)")


# -- NVML availability and visibility -------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "reason", "fix"),
    [
        ({"library_found": False}, "libnvidia-ml.so.1", "install the NVIDIA driver"),
        ({"driver_loaded": False}, "kernel driver is not loaded", "modprobe nvidia"),
    ],
)
def test_no_driver_means_no_gpus_and_a_reason(
    monkeypatch: pytest.MonkeyPatch, kw: dict, reason: str, fix: str
) -> None:
    install(monkeypatch, FakeGPUSpec.a40(), **kw)
    assert nvidia_gpus() == []
    gpus, why = probe_nvidia()
    assert gpus == [] and why is not None
    assert reason in why.reason and fix in why.fix
    with pytest.raises(ZeusDeviceError, match=reason):
        NVIDIAGPU(0)


def test_nvml_is_initialised_once_per_module(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())
    nvidia_gpus()
    nvidia_gpus()
    assert fake.calls["nvmlInit"] == 1
    other = install(monkeypatch, FakeGPUSpec.h100())
    assert [g.name for g in nvidia_gpus()] == ["NVIDIA H100 80GB HBM3"]
    assert other.calls["nvmlInit"] == 1


def test_visible_devices_by_index_and_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40(), FakeGPUSpec.a100(), FakeGPUSpec.h100())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    gpus = nvidia_gpus()
    assert [(g.index, g.nvml_index, g.name) for g in gpus] == [
        (0, 2, "NVIDIA H100 80GB HBM3"),
        (1, 0, "NVIDIA A40"),
    ]
    assert gpus[0].describe() == "GPU 0: NVIDIA H100 80GB HBM3 (NVML 2)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{fake.devices[1].uuid[:12]},0")
    assert [g.nvml_index for g in nvidia_gpus()] == [1, 0]


def test_visible_devices_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.a40(), FakeGPUSpec.a40())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-5f0b/1/0")
    with pytest.raises(ZeusConfigError, match="MIG slices"):
        nvidia_gpus()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(ZeusDeviceNotFoundError, match="no GPU 2"):
        nvidia_gpus()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-ffffffff")
    with pytest.raises(ZeusDeviceNotFoundError, match="GPU-ffffffff"):
        nvidia_gpus()
    with pytest.raises(ZeusDeviceNotFoundError, match="nvml_index=5"):
        NVIDIAGPU(0, nvml_index=5)


def test_empty_visible_devices_hides_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.a40())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    gpus, why = probe_nvidia()
    assert gpus == [] and why is not None
    assert "hides all 1 NVIDIA GPU" in why.reason and "unset CUDA_VISIBLE_DEVICES" in why.fix


# -- ZeusMonitor over NVIDIA GPUs -------------------------------------------------------------------
def test_monitor_reads_the_counters(monkeypatch: pytest.MonkeyPatch, clock: VirtualClock) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40(power_w=250.0), FakeGPUSpec.h100(power_w=500.0), clock=clock)
    with ZeusMonitor(cpu_indices=[], sync_execution_with=None, read_in_background=False) as monitor:
        fake.reset_calls()
        monitor.begin_window("step")
        clock.advance(4.0)
        m = monitor.end_window("step")
    assert m.gpu_energy == pytest.approx({0: 1000.0, 1: 2000.0}, abs=1e-3)
    assert m.estimated_gpus == frozenset() and not m.simulated
    assert dict(fake.calls) == {"nvmlDeviceGetTotalEnergyConsumption": 4}  # one read per GPU per edge


def test_monitor_follows_visible_devices(monkeypatch: pytest.MonkeyPatch, clock: VirtualClock) -> None:
    install(monkeypatch, FakeGPUSpec.a40(power_w=100.0), FakeGPUSpec.a40(power_w=200.0), clock=clock)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with ZeusMonitor(
        gpu_indices=[0], cpu_indices=[], sync_execution_with=None, read_in_background=False
    ) as monitor:
        monitor.begin_window("w")
        clock.advance(1.0)
        assert monitor.end_window("w").gpu_energy == pytest.approx({0: 200.0}, abs=1e-3)
        with pytest.raises(ZeusDeviceNotFoundError):
            ZeusMonitor(gpu_indices=[1], cpu_indices=[])


def test_monitor_estimates_energy_on_pre_volta(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGPUSpec.p100(power_w=150.0), FakeGPUSpec.a40(power_w=250.0))  # wall clock
    with ZeusMonitor(cpu_indices=[], sync_execution_with=None, power_sample_interval_s=0.02) as monitor:
        monitor.begin_window("w")
        time.sleep(0.25)
        m = monitor.end_window("w")
    assert m.estimated_gpus == frozenset({0}) and m.estimated
    assert m.gpu_energy[0] == pytest.approx(150.0 * m.time, rel=0.05)
    assert m.gpu_energy[1] == pytest.approx(250.0 * m.time, rel=0.05)
    assert "(estimated)" in m.describe()


def test_hot_path_measurement_is_the_same_frozen_dataclass() -> None:
    from dataclasses import FrozenInstanceError

    from zeus_core.monitor._measurement import Measurement
    from zeus_core.monitor._measurement import new_measurement as _new_measurement

    args = (2.0, {0: 10.0, 1: 20.0}, {0: 4.0}, {0: 1.0}, frozenset({1}), True, frozenset({0}))
    fast, slow = _new_measurement(*args), Measurement(*args)
    assert type(fast) is Measurement and fast == slow and repr(fast) == repr(slow)
    assert fast.total_energy == 35.0 and fast.average_power == 17.5 and fast.estimated
    with pytest.raises(FrozenInstanceError):
        fast.time = 3.0  # type: ignore[misc]


def test_overhead_benchmark_quick_mode_runs() -> None:
    pytest.importorskip("zeus")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "monitor_overhead.py"), "--runs", "2", "--pairs", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: target missed on a noisy machine; not a crash
    out = proc.stdout
    assert "zeus-suite" in out and "zeus 0.16" in out
    assert "NVML calls 0 vs 2" in out and "NVML calls 0 vs 16" in out  # none on the caller's thread


def test_permission_check_without_the_power_management_query(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeGPUSpec.a40())

    def gone(handle: object) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    monkeypatch.setattr(fake, "nvmlDeviceGetPowerManagementMode", gone)  # a driver that dropped it
    (gpu,) = nvidia_gpus()
    gpu.check_control_permission()  # the limit range (100-300 W) says the limit is settable
    assert fake.calls["nvmlDeviceSetPowerManagementLimit"] == 0
