"""Grams of CO2e and money for joules: offline first, with an optional live provider that may fail.

:class:`Footprint` turns energy into carbon (a region's average from the shipped table, a value the
user gives, or a live provider such as Electricity Maps) and into cost (a price per kWh the user
gives). It never blocks on the network and never fails because of it: a live provider is asked in a
daemon thread with a timeout, and until it answers, or when it fails, the table or the given value
is used, and the console says so once.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from zeus_core import console
from zeus_core.carbon._table import CarbonTable, shipped_table
from zeus_core.exceptions import ZeusConfigError

__all__ = [
    "CarbonIntensity",
    "CarbonIntensityProvider",
    "ElectricityMapsProvider",
    "Footprint",
    "J_PER_KWH",
    "REGION_ENV",
    "INTENSITY_ENV",
    "PRICE_ENV",
    "CURRENCY_ENV",
]

J_PER_KWH = 3.6e6
"""Joules in a kilowatt-hour.

Example:
    >>> from zeus_core.carbon import J_PER_KWH
    >>> 7.2e6 / J_PER_KWH  # a 300 W GPU for 6 h 40 min, kWh
    2.0
"""
REGION_ENV = "ZEUS_SUITE_CARBON_REGION"
INTENSITY_ENV = "ZEUS_SUITE_CARBON_INTENSITY"
PRICE_ENV = "ZEUS_SUITE_PRICE_PER_KWH"
CURRENCY_ENV = "ZEUS_SUITE_CURRENCY"


@dataclass(frozen=True)
class CarbonIntensity:
    """A carbon intensity and where it comes from.

    Attributes:
        g_per_kwh: Grams of CO2-equivalent per kWh.
        region: What it is for, e.g. ``"Germany (DE)"`` or ``"World average"``.
        source: Where the number comes from, e.g. ``"Ember via Our World in Data, 2023"``.
        live: Whether a live provider gave it (else the table or the user).

    Example:
        >>> from zeus_core.carbon import CarbonIntensity
        >>> grid = CarbonIntensity(400.0, "my grid", "my utility's bill")
        >>> grid.co2_g(3.6e6)  # one kWh, gCO2e
        400.0
        >>> grid.describe()
        "my grid, 400 gCO2e/kWh (my utility's bill)"
    """

    g_per_kwh: float
    region: str
    source: str
    live: bool = False

    def co2_g(self, energy_j: float) -> float:
        """Grams of CO2e of ``energy_j`` joules."""
        return energy_j / J_PER_KWH * self.g_per_kwh

    def describe(self) -> str:
        """E.g. ``"Germany (DE), 381 gCO2e/kWh (Ember via Our World in Data, 2023)"``."""
        return f"{self.region}, {self.g_per_kwh:g} gCO2e/kWh ({self.source})"


class CarbonIntensityProvider(ABC):
    """A live source of carbon intensity (the interface and method name of Zeus's provider).

    Implementations may block and raise; :class:`Footprint` calls them in a thread with a timeout
    and falls back when they fail.

    Example:
        >>> from zeus_core.carbon import CarbonIntensityProvider, Footprint
        >>> class Fixed(CarbonIntensityProvider):
        ...     name = "my meter"
        ...     def get_current_carbon_intensity(self) -> float:
        ...         return 120.0
        >>> footprint = Footprint("DE", provider=Fixed())
        >>> footprint.intensity().g_per_kwh  # the table's until the provider answers
        381.0
        >>> footprint.start(); footprint.wait(5.0)
        True
        >>> footprint.intensity().g_per_kwh, footprint.intensity().live
        (120.0, True)
    """

    name: str = "live provider"

    @abstractmethod
    def get_current_carbon_intensity(self) -> float:
        """The grid's carbon intensity now, gCO2e/kWh."""


class ElectricityMapsProvider(CarbonIntensityProvider):
    """Electricity Maps' ``carbon-intensity/latest`` for a zone or a place (an API token is needed for most).

    Args:
        zone: The Electricity Maps zone, e.g. ``"DE"`` or ``"US-CAL-CISO"``; or ``None`` with ``lat``/``lon``.
        token: The API token (sent as the ``auth-token`` header); default: ``ELECTRICITYMAPS_TOKEN``.
        timeout_s: Network timeout of one request, s.
        emission_factor_type: ``"lifecycle"`` (comparable with the shipped table) or ``"direct"``.
        url: The endpoint (for a proxy or a test server).
        lat: Latitude of the place (instead of ``zone``).
        lon: Longitude of the place.
        estimate: Whether Electricity Maps may answer with an estimate where it has no recent data.

    Example:
        >>> Footprint("DE", provider=ElectricityMapsProvider("DE"))  # doctest: +SKIP
    """

    def __init__(
        self,
        zone: str | None,
        token: str | None = None,
        *,
        timeout_s: float = 3.0,
        emission_factor_type: str = "lifecycle",
        url: str = "https://api.electricitymap.org/v3/carbon-intensity/latest",
        lat: float | None = None,
        lon: float | None = None,
        estimate: bool = True,
    ) -> None:
        if emission_factor_type not in ("lifecycle", "direct"):
            raise ZeusConfigError(
                f"ElectricityMapsProvider(emission_factor_type={emission_factor_type!r}): use 'lifecycle' or "
                "'direct'."
            )
        if zone is None and (lat is None or lon is None):
            raise ZeusConfigError(
                "ElectricityMapsProvider: give a zone (e.g. 'DE'), or lat= and lon= of the place."
            )
        self.zone = zone
        self.lat, self.lon, self.estimate = lat, lon, estimate
        self.token = token if token is not None else os.environ.get("ELECTRICITYMAPS_TOKEN")
        self.timeout_s = float(timeout_s)
        self.emission_factor_type = emission_factor_type
        self.url = url
        self.name = f"Electricity Maps ({zone if zone is not None else f'{lat}, {lon}'})"

    def _get(self, url: str) -> Any:
        where: dict[str, Any] = (
            {"zone": self.zone} if self.zone is not None else {"lat": self.lat, "lon": self.lon}
        )
        query = urllib.parse.urlencode(
            {
                **where,
                "disableEstimations": str(not self.estimate).lower(),
                "emissionFactorType": self.emission_factor_type,
            }
        )
        headers = {"auth-token": self.token} if self.token else {}
        request = urllib.request.Request(f"{url}?{query}", headers=headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - https URL
            return json.loads(response.read().decode("utf-8"))

    def get_current_carbon_intensity(self) -> float:
        """Ask Electricity Maps (one request, ``timeout_s``); raises on any network or format error."""
        body = self._get(self.url)
        value = body.get("carbonIntensity") if isinstance(body, dict) else None
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"no carbonIntensity in the answer: {str(body)[:200]}")
        return float(value)

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """The last 24 hours' intensities (Electricity Maps' ``history``): hour (UTC) -> gCO2e/kWh.

        Raises:
            ValueError: The answer holds no history.
        """
        body = self._get(self.url.replace("/latest", "/history"))
        history = body.get("history") if isinstance(body, dict) else None
        if not isinstance(history, list):
            raise ValueError(f"no history in the answer: {str(body)[:200]}")
        return {
            datetime.fromisoformat(h["datetime"].replace("Z", "+00:00")): float(h["carbonIntensity"])
            for h in history
            if isinstance(h, dict) and isinstance(h.get("carbonIntensity"), (int, float))
        }


class Footprint:
    """Carbon and cost of energy, offline by default.

    The carbon intensity comes, in this order, from a live ``provider`` once it has answered, from
    ``intensity_g_per_kwh``, from ``region`` in the shipped table (countries, Ember's 2023 averages
    via Our World in Data), or else the world average. Cost is ``price_per_kwh`` x kWh (``None``
    without a price). Nothing here waits for the network: :meth:`start` asks the provider in a
    daemon thread, and a failed or slow provider falls back (the console says so once).

    Args:
        region: A country (name, ISO alpha-2 or alpha-3 code) or ``"World"``; ``None``: world average.
        intensity_g_per_kwh: Your grid's carbon intensity, gCO2e/kWh (wins over ``region``).
        provider: A live :class:`CarbonIntensityProvider` (asked once, with its own timeout).
        price_per_kwh: Your electricity price per kWh, in ``currency``.
        currency: The currency of ``price_per_kwh``, e.g. ``"EUR"``.
        table: A table file of your own (``region,g_per_kwh[,year,source]`` CSV, or the shipped JSON
            format) to look ``region`` up in instead of the shipped one.

    Raises:
        ZeusConfigError: ``region`` is not in the table, or a number is negative.

    Example:
        >>> fp = Footprint("DE", price_per_kwh=0.30, currency="EUR")
        >>> round(fp.co2_g(3.6e6), 1), fp.cost(3.6e6)  # one kWh
        (381.0, 0.3)
    """

    def __init__(
        self,
        region: str | None = None,
        *,
        intensity_g_per_kwh: float | None = None,
        provider: CarbonIntensityProvider | None = None,
        price_per_kwh: float | None = None,
        currency: str = "USD",
        table: str | Path | None = None,
    ) -> None:
        for name, value in (("intensity_g_per_kwh", intensity_g_per_kwh), ("price_per_kwh", price_per_kwh)):
            if value is not None and (not isinstance(value, (int, float)) or value < 0):
                raise ZeusConfigError(f"Footprint({name}={value!r}): give a number >= 0 (or None).")
        self.table: CarbonTable = CarbonTable.from_file(table) if table is not None else shipped_table()
        self.region = region
        self.price_per_kwh = None if price_per_kwh is None else float(price_per_kwh)
        self.currency = currency
        self.provider = provider
        self._fallback = self._offline(region, intensity_g_per_kwh)
        self._live: CarbonIntensity | None = None
        self._live_error: str | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    def _offline(self, region: str | None, value: float | None) -> CarbonIntensity:
        if value is not None:
            return CarbonIntensity(float(value), region or "your grid", "given by you")
        entry = self.table.lookup(region if region is not None else "World")
        year = f", {entry.year}" if entry.year else ""
        where = "World average" if entry.code.upper() == "WORLD" else f"{entry.name} ({entry.code})"
        return CarbonIntensity(float(entry.g_per_kwh), where, f"{entry.source}{year}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Footprint:
        """A footprint from the environment (every variable optional).

        ``ZEUS_SUITE_CARBON_REGION``, ``ZEUS_SUITE_CARBON_INTENSITY`` (gCO2e/kWh),
        ``ZEUS_SUITE_PRICE_PER_KWH`` and ``ZEUS_SUITE_CURRENCY``.

        Raises:
            ZeusConfigError: A variable holds something that is not understood.
        """
        env = os.environ if environ is None else environ

        def number(name: str) -> float | None:
            raw = env.get(name, "").strip()
            if not raw:
                return None
            try:
                return float(raw)
            except ValueError:
                raise ZeusConfigError(f"{name}={raw!r}: give a number, or unset it.") from None

        return cls(
            env.get(REGION_ENV, "").strip() or None,
            intensity_g_per_kwh=number(INTENSITY_ENV),
            price_per_kwh=number(PRICE_ENV),
            currency=env.get(CURRENCY_ENV, "").strip() or "USD",
        )

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the provider's thread (a new process asks again)."""
        state = self.__dict__.copy()
        state.update(_thread=None, _done=None, _live=None, _live_error=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._done = threading.Event()

    # -- the live provider ----------------------------------------------------------------------------
    def start(self) -> None:
        """Ask the live provider in a daemon thread (once; no-op without a provider). Never blocks."""
        if self.provider is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._ask, name="zeus-carbon-provider", daemon=True)
        self._thread.start()

    def _ask(self) -> None:
        provider = self.provider
        assert provider is not None  # start() checked
        try:
            value = provider.get_current_carbon_intensity()
            if value < 0:
                raise ValueError(f"negative intensity {value}")
            self._live = CarbonIntensity(float(value), self._fallback.region, provider.name, live=True)
        except Exception as e:  # any failure of a live source falls back to the offline value
            self._live_error = f"{type(e).__name__}: {e}"
            console.warn_once(
                f"carbon-provider-{id(self)}",
                f"Carbon intensity: {provider.name} failed ({self._live_error}); using "
                f"{self._fallback.describe()} instead.",
            )
        finally:
            self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the live provider's answer; whether it has answered (or failed)."""
        return self._done.wait(timeout_s) if self._thread is not None else True

    # -- values ---------------------------------------------------------------------------------------
    def intensity(self) -> CarbonIntensity:
        """The carbon intensity to use now (live once it has answered, else the offline value)."""
        return self._live or self._fallback

    @property
    def live_error(self) -> str | None:
        """Why the live provider failed (``None``: it did not, or there is none)."""
        return self._live_error

    def co2_g(self, energy_j: float) -> float:
        """Grams of CO2e of ``energy_j`` joules."""
        return self.intensity().co2_g(energy_j)

    def cost(self, energy_j: float) -> float | None:
        """Cost of ``energy_j`` joules in :attr:`currency` (``None`` without a price)."""
        return None if self.price_per_kwh is None else energy_j / J_PER_KWH * self.price_per_kwh

    def describe(self) -> str:
        """One line: the intensity with its source, and the price if any."""
        text = self.intensity().describe()
        if self.provider is not None and self._live is None:
            text += f" [{self.provider.name}: " + (self._live_error or "no answer yet") + "]"
        if self.price_per_kwh is not None:
            text += f"; {self.price_per_kwh:g} {self.currency}/kWh"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe description for run records and reports."""
        i = self.intensity()
        return {
            "g_per_kwh": i.g_per_kwh,
            "region": i.region,
            "source": i.source,
            "live": i.live,
            "live_error": self._live_error,
            "price_per_kwh": self.price_per_kwh,
            "currency": self.currency,
        }
