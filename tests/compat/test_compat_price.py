"""Zeus's ``EnergyCostMonitor`` (``zeus_core.compat.monitor.price``): each UTC hour at its tier's rate."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from zeus_core.compat.monitor.price import (
    ElectricityPriceProvider,
    EnergyCostMonitor,
    ZeusElectricityPriceHTTPError,
    ZeusElectricityPriceNotFoundError,
)
from zeus_core.testing import VirtualClock, simulated_gpu


class Tiered(ElectricityPriceProvider):
    """Tier 1 (0.40/kWh) from 17:00 UTC on weekdays, tier 0 (0.10/kWh) otherwise."""

    def __init__(self) -> None:
        self.calls = 0

    def get_current_electricity_prices(self) -> dict[str, list[Any]]:
        self.calls += 1
        weekday = [[1 if h >= 17 else 0 for h in range(24)] for _ in range(12)]
        return {
            "energy_rate_structure": [[{"rate": 0.10}], [{"rate": 0.40}]],
            "energy_weekday_schedule": weekday,
            "energy_weekend_schedule": [[0] * 24 for _ in range(12)],
        }


def _monitor(provider: ElectricityPriceProvider, start: datetime) -> tuple[EnergyCostMonitor, VirtualClock]:
    clock = VirtualClock(start.timestamp())
    return EnergyCostMonitor(provider, gpus=[simulated_gpu("a40", clock=clock, busy=True)]), clock


def test_a_window_across_a_tier_change_is_priced_per_hour() -> None:
    provider = Tiered()
    # Wednesday 2026-11-25, 16:30 to 17:30 UTC: half an hour at 0.10, half at 0.40.
    monitor, clock = _monitor(provider, datetime(2026, 11, 25, 16, 30, tzinfo=timezone.utc))
    monitor.begin_window("epoch")
    clock.advance(3600.0)
    m = monitor.end_window("epoch")
    kwh = m.gpu_energy[0] / 3.6e6
    assert kwh == pytest.approx(0.3)  # 300 W for one hour
    assert m.gpu_energy_cost[0] == pytest.approx(kwh * (0.10 + 0.40) / 2)
    assert m.cpu_energy_cost is None and m.dram_energy_cost is None
    monitor.begin_window("again")
    clock.advance(60.0)
    monitor.end_window("again")
    assert provider.calls == 1, "the rates are fetched once per monitor"


def test_weekends_follow_the_weekend_schedule() -> None:
    monitor, clock = _monitor(Tiered(), datetime(2026, 11, 28, 18, 0, tzinfo=timezone.utc))  # Saturday
    monitor.begin_window("w")
    clock.advance(1800.0)
    m = monitor.end_window("w")
    assert m.gpu_energy_cost[0] == pytest.approx(m.gpu_energy[0] / 3.6e6 * 0.10)


def test_windows_are_checked_and_provider_errors_reach_the_caller() -> None:
    class Offline(ElectricityPriceProvider):
        def get_current_electricity_prices(self) -> dict[str, list[Any]]:
            raise ZeusElectricityPriceHTTPError("offline")

    class Malformed(ElectricityPriceProvider):
        def get_current_electricity_prices(self) -> dict[str, list[Any]]:
            return {"energy_rate_structure": []}

    monitor, clock = _monitor(Offline(), datetime(2026, 11, 25, 12, tzinfo=timezone.utc))
    monitor.begin_window("a")
    with pytest.raises(ValueError, match="already exists"):
        monitor.begin_window("a")
    with pytest.raises(ZeusElectricityPriceHTTPError):
        monitor.end_window("a")
    with pytest.raises(ValueError, match="does not exist"):
        monitor.end_window("a")
    monitor, clock = _monitor(Malformed(), datetime(2026, 11, 25, 12, tzinfo=timezone.utc))
    monitor.begin_window("b")
    with pytest.raises(ZeusElectricityPriceNotFoundError, match="malformed"):
        monitor.end_window("b")
