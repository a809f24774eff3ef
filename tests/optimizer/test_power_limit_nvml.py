"""The optimizer on the NVML backend, against the fake pynvml (zeus_core/testing/_fake_nvml.py)."""

from __future__ import annotations

import pytest

from zeus_core.device import _base as device_base
from zeus_core.device._nvidia import PERMISSION_FIX, nvidia_gpus
from zeus_core.exceptions import ZeusPermissionError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer
from zeus_core.testing import FakeGPUSpec, FakeNVML, VirtualClock


def fake_nvml(monkeypatch: pytest.MonkeyPatch, root: bool) -> tuple[FakeNVML, list[tuple[int, int]]]:
    """Two fake A40s drawing 200 W; records every (GPU, mW) limit write that NVML accepted.

    Window times come from the fake's virtual clock too, so average powers are the real ones.
    """
    clock = VirtualClock()
    fake = FakeNVML([FakeGPUSpec.a40(power_w=200.0), FakeGPUSpec.a40(power_w=200.0)], clock=clock, root=root)
    fake.patch(monkeypatch)
    monkeypatch.setattr(device_base, "wall_clock", clock)
    writes: list[tuple[int, int]] = []
    real_set = fake.nvmlDeviceSetPowerManagementLimit

    def recording_set(handle, limit_mw: int) -> None:
        real_set(handle, limit_mw)
        writes.append((handle.index, limit_mw))

    monkeypatch.setattr(fake, "nvmlDeviceSetPowerManagementLimit", recording_set)
    return fake, writes


def test_without_permission_construction_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, writes = fake_nvml(monkeypatch, root=False)
    monitor = ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[])
    with pytest.raises(ZeusPermissionError) as err:
        GlobalPowerLimitOptimizer(monitor)
    message = str(err.value)
    assert message.startswith("GlobalPowerLimitOptimizer must set power limits on GPU 0: NVIDIA A40")
    assert PERMISSION_FIX in message  # says how to grant the permission (root / setcap / nvidia-smi)
    assert isinstance(err.value, PermissionError)
    assert writes == [] and [d.power_limit_mw for d in fake.devices] == [300_000, 300_000]


def test_limits_are_written_in_milliwatts_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, writes = fake_nvml(monkeypatch, root=True)
    clock: VirtualClock = fake.clock  # type: ignore[assignment]
    for dev in fake.devices:
        dev.power_limit_mw = 275_000  # the administrator's setting before training
    gpus = nvidia_gpus(environ={})
    monitor = ZeusMonitor(gpus=gpus, cpu_indices=[], read_in_background=False)  # exact on the VirtualClock
    plo = GlobalPowerLimitOptimizer(
        monitor, Energy(), wait_steps=0, warmup_steps=1, profile_steps=2, pl_step=100, early_stopping=None
    )
    assert writes == []  # the permission check writes nothing (issue 18)
    plo.on_train_begin()
    plo.on_epoch_begin()
    for _ in range(12):
        plo.on_step_begin()
        clock.advance(0.5)  # the GPUs draw min(200 W, limit) for 0.5 s per step
        plo.on_step_end()
    plo.on_epoch_end()
    assert isinstance(plo.state, Done) and plo.optimal_power_limit_w == 100  # least energy per step
    energies = [m.energy for m in plo.measurements]
    assert energies == pytest.approx([2 * 200 * 0.5, 2 * 200 * 0.5, 2 * 100 * 0.5])  # 300, 200, 100 W
    plo.on_train_end()
    # Each GPU: 300 W to start, 200 W, 100 W (kept as the optimum), then back to 275 W. Nothing redundant.
    per_gpu = [[mw for i, mw in writes if i == g] for g in (0, 1)]
    assert per_gpu == [[300_000, 200_000, 100_000, 275_000]] * 2
    assert [d.power_limit_mw for d in fake.devices] == [275_000, 275_000]
