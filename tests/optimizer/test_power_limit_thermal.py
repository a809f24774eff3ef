"""Thermally stable profiling (issue 34): a window slowed down by heat is measured again.

The fake NVML reports temperature and clock-event reasons; the optimizer asks
:func:`zeus_core.monitor.check_window` about each visit's window.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.optimizer.plo_support import ConsoleLines
from zeus_core.device import _base as base
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer
from zeus_core.testing import FakeGPUSpec, FakeNVML, VirtualClock, _fake_nvml

THERMAL = _fake_nvml._real.nvmlClocksEventReasonSwThermalSlowdown


def _run(
    monkeypatch: Any, hot_at_w: float | None, **options: Any
) -> tuple[GlobalPowerLimitOptimizer, list[str]]:
    """Energy() on one fake A40 (100 ms steps drawing 280 W under the limit), throttled at ``hot_at_w``."""
    clock = VirtualClock(1000.0)
    fake = FakeNVML([FakeGPUSpec.a40()], clock=clock, root=True).patch(monkeypatch)
    monkeypatch.setattr(base, "wall_clock", clock)
    device = fake.devices[0]
    real_mask = type(device).clock_event_mask

    def mask(dev: Any) -> int:  # thermal slowdown while the limit is ``hot_at_w``
        hot = hot_at_w is not None and dev.power_limit_mw == hot_at_w * 1000
        return real_mask(dev) | (THERMAL if hot else 0)

    monkeypatch.setattr(type(device), "clock_event_mask", mask)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(
        monitor, Energy(), warmup_steps=2, profile_steps=4, pl_step=50, budget_steps=200, **options
    )
    with ConsoleLines() as shown:
        plo.on_epoch_begin()
        for _ in range(200):
            plo.on_step_begin()
            limit = device.power_limit_mw / 1000
            fake.set_power(0, 280.0)
            clock.advance(0.1 * (300.0 / min(limit, 280.0)) ** 0.5)  # slower under a lower limit
            plo.on_step_end()
            if plo.optimal_power_limit_w is not None:
                break
        plo.on_epoch_end()
    plo.close()
    monitor.close()
    return plo, shown.lines


@pytest.mark.slow
def test_a_throttled_window_is_measured_again_then_kept(monkeypatch: Any) -> None:
    plo, lines = _run(monkeypatch, hot_at_w=200)
    rejected = [line for line in lines if "discarded the measurement of" in line]
    assert len(rejected) == 3 and all("200 W" in line and "slowed down by heat" in line for line in rejected)
    assert "Measuring it again" in rejected[0] and "Kept anyway" in rejected[-1]
    assert 200.0 in [m.power_limit for m in plo.measurements]  # a GPU that always throttles there
    assert plo.optimal_power_limit_w is not None


@pytest.mark.slow
def test_cool_windows_and_the_option_off_discard_nothing(monkeypatch: Any) -> None:
    for hot, options in ((None, {}), (200, {"thermal_check": False})):
        plo, lines = _run(monkeypatch, hot_at_w=hot, **options)
        assert not [line for line in lines if "discarded the measurement" in line]
        assert plo.optimal_power_limit_w is not None and len(plo.measurements) == 5
