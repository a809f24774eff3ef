"""Zeus's ``zeus.monitor.price``: :class:`EnergyCostMonitor`, :class:`OpenEIClient` and their errors.

Electricity cost per window and device, in the rate's currency: each UTC hour of the window at
that hour's rate (Zeus's tiered rate table: ``energy_rate_structure[tier][0]["rate"]`` per kWh,
the tier from the weekday or weekend schedule by month and hour), priced by
:meth:`zeus_core.carbon.Footprint.cost`. The rates are fetched once per monitor, when the first
window ends, in this process (Zeus polls them from a spawned process). A provider that fails
raises :class:`ZeusElectricityPriceHTTPError` or :class:`ZeusElectricityPriceNotFoundError` from
``end_window``, where Zeus's background process logs the error and never answers.

Example:
    >>> from zeus_core.compat.monitor.price import ElectricityPriceProvider, EnergyCostMonitor
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> class Flat(ElectricityPriceProvider):
    ...     def get_current_electricity_prices(self):
    ...         every_hour = [[0] * 24 for _ in range(12)]  # tier 0, all year
    ...         return {"energy_rate_structure": [[{"rate": 0.25}]],
    ...                 "energy_weekday_schedule": every_hour, "energy_weekend_schedule": every_hour}
    >>> clock = VirtualClock()
    >>> monitor = EnergyCostMonitor(Flat(), gpus=[simulated_gpu("a40", clock=clock, busy=True)])
    >>> monitor.begin_window("epoch"); clock.advance(3600.0)
    >>> round(monitor.end_window("epoch").gpu_energy_cost[0], 3)  # 300 W for 1 h: 0.3 kWh at 0.25
    0.075
"""

from __future__ import annotations

import abc
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Sequence

from zeus_core.carbon import Footprint
from zeus_core.compat.monitor._hourly import hour_shares
from zeus_core.compat.monitor.energy import ZeusMonitor
from zeus_core.exceptions import ZeusError

__all__ = [
    "get_time_info",
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
    "ElectricityPriceProvider",
    "OpenEIClient",
    "EnergyCostMeasurement",
    "EnergyCostMonitor",
]


def get_time_info() -> tuple[str, str, int]:
    """The month's name, ``"Weekday"`` or ``"Weekend"``, and the hour, now (local time), as Zeus's.

    Example:
        >>> from zeus_core.compat.monitor.price import get_time_info
        >>> month, day_type, hour = get_time_info()
        >>> day_type in ("Weekday", "Weekend") and 0 <= hour < 24
        True
    """
    now = datetime.now()
    return now.strftime("%B"), "Weekend" if now.weekday() >= 5 else "Weekday", now.hour


class ZeusElectricityPriceHTTPError(ZeusError):
    """The price provider could not be reached.

    Example:
        >>> from zeus_core.compat.monitor.price import ZeusElectricityPriceHTTPError
        >>> str(ZeusElectricityPriceHTTPError("offline"))
        'offline'
    """


class ZeusElectricityPriceNotFoundError(ZeusError):
    """The price provider has no rate for the place or label.

    Example:
        >>> from zeus_core.compat.monitor.price import ZeusElectricityPriceNotFoundError
        >>> issubclass(ZeusElectricityPriceNotFoundError, ZeusError)
        True
    """


class ElectricityPriceProvider(abc.ABC):
    """Where rates come from: ``get_current_electricity_prices()`` returns Zeus's rate table.

    The table: ``energy_rate_structure`` (per tier, a list whose first entry has ``"rate"``, per
    kWh), ``energy_weekday_schedule`` and ``energy_weekend_schedule`` (12 months x 24 hours of tiers).

    Example:
        >>> from zeus_core.compat.monitor.price import ElectricityPriceProvider
        >>> class Flat(ElectricityPriceProvider):
        ...     def get_current_electricity_prices(self):
        ...         hours = [[0] * 24] * 12
        ...         return {"energy_rate_structure": [[{"rate": 0.2}]],
        ...                 "energy_weekday_schedule": hours, "energy_weekend_schedule": hours}
        >>> Flat().get_current_electricity_prices()["energy_rate_structure"][0][0]["rate"]
        0.2
    """

    @abc.abstractmethod
    def get_current_electricity_prices(self) -> dict[str, list[Any]]:
        """The rate table of the provider's place (see the class)."""


def _search(data: Any, key: str, value: Any, wanted: str) -> list[Any]:
    """Every ``wanted`` field beside ``key == value`` in nested JSON (Zeus's ``search_json``)."""
    out: list[Any] = []
    if isinstance(data, dict):
        for k, v in data.items():
            if k == key and v == value:
                out.append(data.get(wanted))
            out.extend(_search(v, key, value, wanted))
    elif isinstance(data, list):
        for item in data:
            out.extend(_search(item, key, value, wanted))
    return out


class OpenEIClient(ElectricityPriceProvider):
    """Rates of a US utility from OpenEI's Utility Rates API (needs the network).

    Args:
        location: ``(latitude, longitude)``.
        label: The rate's OpenEI label (one variant of one utility's rate).
        sector: ``"Residential"``, ``"Commercial"``, ``"Industrial"`` or ``"Lighting"``.
        radius: Search radius around the location, miles.

    Example:
        >>> from zeus_core.compat.monitor.price import OpenEIClient
        >>> OpenEIClient((40.7, -74.0), "539f6a23ec4f024411ec8bf9").sector
        'Residential'
    """

    #: Zeus's public OpenEI key (its source carries it).
    API_KEY = "tJASWWgPhBRpiZCwfhtKV2A3gyNxbDfvQvdI5Wa7"

    def __init__(
        self,
        location: tuple[float, float],
        label: str,
        sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
        radius: int = 0,
    ) -> None:
        self.lat, self.long = location
        self.label = label
        self.sector = sector
        self.radius = radius

    def get_current_electricity_prices(self) -> dict[str, list[Any]]:
        """The rate table of ``label`` near the location.

        Raises:
            ZeusElectricityPriceHTTPError: OpenEI could not be reached.
            ZeusElectricityPriceNotFoundError: No rate with that label there.
        """
        query = urllib.parse.urlencode(
            {
                "version": "latest",
                "format": "json",
                "api_key": self.API_KEY,
                "lat": self.lat,
                "lon": self.long,
                "radius": self.radius,
                "detail": "full",
                "sector": self.sector,
            }
        )
        try:
            with urllib.request.urlopen(f"https://api.openei.org/utility_rates?{query}", timeout=10) as r:
                data = json.load(r)
        except (OSError, ValueError) as e:
            raise ZeusElectricityPriceHTTPError(f"Failed to retrieve current electricity price: {e}") from e
        fields = ("energyratestructure", "energyweekdayschedule", "energyweekendschedule")
        found = [_search(data, "label", self.label, f) for f in fields]
        if not all(found) or any(f[0] is None for f in found):
            raise ZeusElectricityPriceNotFoundError(
                f"No rates found for the label {self.label!r} at ({self.lat}, {self.long}); check the "
                "label on https://apps.openei.org/USURDB/."
            )
        return dict(
            zip(
                ("energy_rate_structure", "energy_weekday_schedule", "energy_weekend_schedule"),
                (f[0] for f in found),
            )
        )


@dataclass
class EnergyCostMeasurement:
    """One window: energy (J) and cost (the rate's currency) per device; CPU, DRAM ``None`` if unmeasured.

    Example:
        >>> from zeus_core.compat.monitor.price import EnergyCostMeasurement
        >>> EnergyCostMeasurement(10.0, {0: 3600.0}, {0: 0.0002}).cpu_energy_cost is None
        True
    """

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None


class EnergyCostMonitor:
    """Zeus's cost monitor: windows of time, energy and electricity cost.

    Args:
        electricity_price_provider: Where rates come from (e.g. :class:`OpenEIClient`).
        gpu_indices: GPUs to measure; ``None``: all.
        cpu_indices: CPU packages; ``None``: all readable.
        sync_execution_with: ``"torch"``, ``"jax"`` or ``"cupy"``.
        **suite_options: Passed to the monitor (``gpus=``, ...).

    Example:
        >>> from zeus_core.compat.monitor.price import EnergyCostMonitor, OpenEIClient
        >>> monitor = EnergyCostMonitor(OpenEIClient((40.7, -74.0), "LABEL"))  # doctest: +SKIP
    """

    def __init__(
        self,
        electricity_price_provider: ElectricityPriceProvider,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
        sync_execution_with: str = "torch",
        **suite_options: Any,
    ) -> None:
        self.electricity_price_provider = electricity_price_provider
        self.zeus_monitor = ZeusMonitor(
            gpu_indices,
            cpu_indices,
            approx_instant_energy=True,
            sync_execution_with=sync_execution_with,
            **suite_options,
        )
        self.current_keys: set[str] = set()
        self._starts: dict[str, float] = {}
        self._rates: dict[str, list[Any]] | None = None

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Open window ``key``.

        Raises:
            ValueError: ``key`` is already open.
        """
        if key in self.current_keys:
            raise ValueError(f"Measurement window '{key}' already exists")
        self.zeus_monitor.begin_window(key, sync_execution)
        self.current_keys.add(key)
        self._starts[key] = self.zeus_monitor.clock()

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """Close window ``key``: its energy and cost per device.

        Raises:
            ValueError: ``key`` is not open.
            ZeusElectricityPriceHTTPError: The provider could not be reached.
            ZeusElectricityPriceNotFoundError: The provider has no rate, or its table is malformed.
        """
        if key not in self.current_keys:
            raise ValueError(f"Measurement window '{key}' does not exist")
        m = self.zeus_monitor.end_window(key, sync_execution)
        self.current_keys.discard(key)
        start = self._starts.pop(key)
        rate = self._rate(start, start + m.time)
        price = Footprint(price_per_kwh=rate)

        def cost(energies: dict[int, float] | None) -> dict[int, float] | None:
            return None if energies is None else {i: price.cost(j) or 0.0 for i, j in energies.items()}

        return EnergyCostMeasurement(
            m.time,
            dict(m.gpu_energy),
            cost(dict(m.gpu_energy)) or {},
            m.cpu_energy,
            cost(m.cpu_energy),
            m.dram_energy,
            cost(m.dram_energy),
        )

    def _rate(self, start_s: float, end_s: float) -> float:
        """The window's rate per kWh: each UTC hour's tier rate weighted by the window's time in it."""
        if self._rates is None:
            self._rates = self.electricity_price_provider.get_current_electricity_prices()
        try:
            structure = self._rates["energy_rate_structure"]
            total = 0.0
            for hour, share in hour_shares(start_s, end_s):
                days = "energy_weekday_schedule" if hour.weekday() < 5 else "energy_weekend_schedule"
                tier = self._rates[days][hour.month - 1][hour.hour]
                total += share * float(structure[tier][0]["rate"])
            return total
        except (IndexError, KeyError, TypeError, ValueError) as e:
            raise ZeusElectricityPriceNotFoundError(
                f"EnergyCostMonitor: the rate table is malformed ({type(e).__name__}: {e}); it needs "
                "energy_rate_structure[tier][0]['rate'] and 12 x 24 weekday and weekend schedules."
            ) from e
