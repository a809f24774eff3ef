"""Zeus's ``zeus.monitor.carbon``: :class:`CarbonEmissionMonitor` and :class:`ElectrictyMapsClient`.

Carbon emission per window and device, gCO2e: each UTC hour of the window at that hour's carbon
intensity from the provider (its 24-hour history, else its current value). Where the provider
cannot be reached, the window is priced at the world average of the suite's offline table
(:class:`zeus_core.carbon.Footprint`) and a console line says so: the monitor never fails or
hangs for want of a network.

Example:
    >>> from zeus_core.compat.monitor.carbon import CarbonEmissionMonitor, CarbonIntensityProvider
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> class Grid(CarbonIntensityProvider):
    ...     def get_current_carbon_intensity(self):
    ...         return 400.0  # gCO2e/kWh
    >>> clock = VirtualClock()
    >>> monitor = CarbonEmissionMonitor(Grid(), gpus=[simulated_gpu("a40", clock=clock, busy=True)])
    >>> monitor.begin_window("epoch"); clock.advance(3600.0)
    >>> round(monitor.end_window("epoch").gpu_carbon_emission[0], 1)  # 300 W for 1 h: 0.3 kWh
    120.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Sequence

from zeus_core import console
from zeus_core.carbon import J_PER_KWH, CarbonIntensityProvider, ElectricityMapsProvider, Footprint
from zeus_core.compat.monitor._hourly import hour_shares
from zeus_core.compat.monitor.energy import ZeusMonitor
from zeus_core.exceptions import ZeusError

__all__ = [
    "CarbonIntensityProvider",
    "ElectrictyMapsClient",
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
]


class ZeusCarbonIntensityHTTPError(ZeusError):
    """Electricity Maps could not be reached.

    Example:
        >>> from zeus_core.compat.monitor.carbon import ZeusCarbonIntensityHTTPError
        >>> str(ZeusCarbonIntensityHTTPError("offline"))
        'offline'
    """


class ZeusCarbonIntensityNotFoundError(ZeusError):
    """Electricity Maps has no intensity for the place.

    Example:
        >>> from zeus_core.compat.monitor.carbon import ZeusCarbonIntensityNotFoundError
        >>> issubclass(ZeusCarbonIntensityNotFoundError, ZeusError)
        True
    """


class ElectrictyMapsClient(ElectricityMapsProvider):
    """Zeus's Electricity Maps provider (named as Zeus spells it): intensity at a latitude and longitude.

    Args:
        location: ``(latitude, longitude)``.
        estimate: Whether Electricity Maps may estimate where it lacks recent data.
        emission_factor_type: ``"direct"`` (Zeus's default) or ``"lifecycle"``.

    Example:
        >>> from zeus_core.compat.monitor.carbon import ElectrictyMapsClient
        >>> client = ElectrictyMapsClient((47.4, 8.5), estimate=True)
        >>> client.update_period, client.history_length
        (datetime.timedelta(seconds=3600), 24)
    """

    def __init__(
        self, location: tuple[float, float], estimate: bool = False, emission_factor_type: str = "direct"
    ) -> None:
        lat, lon = location
        super().__init__(None, lat=lat, lon=lon, estimate=estimate, emission_factor_type=emission_factor_type)

    def get_current_carbon_intensity(self) -> float:
        """The intensity now, gCO2e/kWh.

        Raises:
            ZeusCarbonIntensityHTTPError: Electricity Maps could not be reached.
            ZeusCarbonIntensityNotFoundError: It has no value for the place.
        """
        try:
            return super().get_current_carbon_intensity()
        except ValueError as e:
            raise ZeusCarbonIntensityNotFoundError(
                f"No carbon intensity at ({self.lat}, {self.lon}): {e}"
            ) from e
        except OSError as e:
            raise ZeusCarbonIntensityHTTPError(f"Failed to retrieve the carbon intensity: {e}") from e

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """The last 24 hours: hour (UTC) -> gCO2e/kWh (errors as :meth:`get_current_carbon_intensity`)."""
        try:
            return super().get_recent_carbon_intensity()
        except (ValueError, KeyError) as e:
            raise ZeusCarbonIntensityNotFoundError(
                f"No recent intensity at ({self.lat}, {self.lon}): {e}"
            ) from e
        except OSError as e:
            raise ZeusCarbonIntensityHTTPError(f"Failed to retrieve the carbon intensity history: {e}") from e

    @property
    def update_period(self) -> timedelta:
        """How long each history value holds: one hour."""
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        """Values in the history: 24."""
        return 24


@dataclass
class CarbonEmissionMeasurement:
    """One window: energy (J) and carbon emission (gCO2e) per device; CPU and DRAM ``None`` if not measured.

    Example:
        >>> from zeus_core.compat.monitor.carbon import CarbonEmissionMeasurement
        >>> CarbonEmissionMeasurement(10.0, {0: 3600.0}, {0: 0.4}).cpu_carbon_emission is None
        True
    """

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None


def _grams(energies: dict[int, float] | None, g_per_kwh: float) -> dict[int, float] | None:
    return None if energies is None else {i: j / J_PER_KWH * g_per_kwh for i, j in energies.items()}


class CarbonEmissionMonitor:
    """Zeus's carbon monitor: windows of time, energy and carbon emission (gCO2e).

    Args:
        carbon_intensity_provider: Where intensities come from (e.g. :class:`ElectrictyMapsClient`).
        gpu_indices: GPUs to measure; ``None``: all.
        cpu_indices: CPU packages; ``None``: all readable.
        sync_execution_with: ``"torch"``, ``"jax"`` or ``"cupy"``.
        **suite_options: Passed to the monitor (``gpus=``, ...).

    Example:
        >>> from zeus_core.compat.monitor.carbon import CarbonEmissionMonitor, ElectrictyMapsClient
        >>> monitor = CarbonEmissionMonitor(ElectrictyMapsClient((47.4, 8.5)))  # doctest: +SKIP
    """

    def __init__(
        self,
        carbon_intensity_provider: CarbonIntensityProvider,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
        sync_execution_with: str = "torch",
        **suite_options: Any,
    ) -> None:
        self.carbon_intensity_provider = carbon_intensity_provider
        self.zeus_monitor = ZeusMonitor(
            gpu_indices, cpu_indices, sync_execution_with=sync_execution_with, **suite_options
        )
        self._starts: dict[str, float] = {}

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Open window ``key``."""
        self.zeus_monitor.begin_window(key, sync_execution)
        self._starts[key] = self.zeus_monitor.clock()

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """Close window ``key``: its energy and emission per device."""
        m = self.zeus_monitor.end_window(key, sync_execution)
        start = self._starts.pop(key)
        g = self._intensity(start, start + m.time)
        return CarbonEmissionMeasurement(
            m.time,
            dict(m.gpu_energy),
            _grams(m.gpu_energy, g) or {},
            m.cpu_energy,
            _grams(m.cpu_energy, g),
            m.dram_energy,
            _grams(m.dram_energy, g),
        )

    def _intensity(self, start_s: float, end_s: float) -> float:
        """The window's intensity, gCO2e/kWh: each hour's value weighted by the window's time in it."""
        provider = self.carbon_intensity_provider
        try:
            history: dict[datetime, float] = {}
            if hasattr(provider, "get_recent_carbon_intensity"):
                try:
                    history = {
                        h.replace(minute=0, second=0, microsecond=0): v
                        for h, v in provider.get_recent_carbon_intensity().items()
                    }
                except ZeusError:
                    history = {}
            shares = hour_shares(start_s, end_s)
            current: float | None = None
            total = 0.0
            for hour, share in shares:
                value = history.get(hour)
                if value is None:
                    current = provider.get_current_carbon_intensity() if current is None else current
                    value = current
                total += share * value
            if math.isfinite(total):
                return total
        except Exception as e:  # offline: the world average, said once
            console.warn_once(
                "compat-carbon-offline",
                f"CarbonEmissionMonitor: the carbon intensity provider failed ({e}); using "
                f"{Footprint().intensity().describe()}.",
            )
        return Footprint().intensity().g_per_kwh
