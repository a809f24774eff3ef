"""The carbon-intensity table: the one shipped in ``zeus_core/data/carbon_intensity`` or the user's own.

A table maps a region (a country by name, ISO 3166 alpha-2 or alpha-3 code, or a region code
such as ``WORLD``) to grams of CO2-equivalent per kWh, with the year and source of each value.
The shipped one says where its numbers come from (Ember via Our World in Data, CC-BY-4.0) in the
file itself and in ``zeus_core/data/NOTICE.md``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from zeus_core import data
from zeus_core.exceptions import ZeusConfigError

__all__ = ["IntensityEntry", "CarbonTable", "shipped_table", "SHIPPED_TABLE"]

SHIPPED_TABLE = "carbon_intensity/electricity_2023.json"
"""The bundled table, as a :func:`zeus_core.data.path` name."""


@dataclass(frozen=True)
class IntensityEntry:
    """One region's average carbon intensity of electricity.

    Attributes:
        name: The region's name, e.g. ``"Germany"``.
        code: Its short code (ISO alpha-2 for countries), e.g. ``"DE"``.
        g_per_kwh: Grams of CO2-equivalent per kWh.
        year: The year the value is for (``None`` if not known).
        source: Where the value comes from, in a few words.
        iso3: ISO alpha-3 code, where there is one.

    Example:
        >>> from zeus_core.carbon import IntensityEntry
        >>> IntensityEntry("Exampleland", "EX", 250.0, 2023, "my table").describe()
        'Exampleland (EX), 250 gCO2e/kWh in 2023 (my table)'
    """

    name: str
    code: str
    g_per_kwh: float
    year: int | None
    source: str
    iso3: str = ""

    def describe(self) -> str:
        """E.g. ``"Germany (DE), 381 gCO2e/kWh in 2023 (Ember via Our World in Data)"``."""
        year = f" in {self.year}" if self.year else ""
        return f"{self.name} ({self.code}), {self.g_per_kwh:g} gCO2e/kWh{year} ({self.source})"


class CarbonTable:
    """Regions and their carbon intensity; looked up by name or code, case-insensitively.

    Args:
        entries: The table's rows.
        source: What the table is, for messages (e.g. its file and licence).
        license: The licence of its values (``""`` if unknown).

    Example:
        >>> table = shipped_table()
        >>> table.lookup("de").name, table.lookup("DEU").g_per_kwh
        ('Germany', 381)
    """

    def __init__(self, entries: Iterable[IntensityEntry], source: str, license: str = "") -> None:
        self.entries = list(entries)
        self.source = source
        self.license = license
        self._index: dict[str, IntensityEntry] = {}
        for e in self.entries:
            for key in (e.name, e.code, e.iso3):
                if key:
                    self._index[key.strip().lower()] = e

    def lookup(self, region: str) -> IntensityEntry:
        """The entry for ``region`` (name, alpha-2 or alpha-3 code, or region code such as ``WORLD``).

        Raises:
            ZeusConfigError: The table has no such region (the message lists what it has).
        """
        found = self._index.get(region.strip().lower())
        if found is None:
            known = ", ".join(sorted(e.code for e in self.entries))
            raise ZeusConfigError(
                f"Carbon intensity: no region {region!r} in {self.source}. It has {known}. Pass "
                "intensity_g_per_kwh= for your grid, or table= a CSV of region,g_per_kwh[,year,source]."
            )
        return found

    def __contains__(self, region: object) -> bool:
        return isinstance(region, str) and region.strip().lower() in self._index

    @classmethod
    def from_file(cls, path: str | Path) -> CarbonTable:
        """Read a table: the shipped JSON format, or a CSV with ``region,g_per_kwh[,year,source]`` columns.

        Raises:
            ZeusConfigError: The file is missing or malformed (the message names the row).
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ZeusConfigError(f"Carbon table {str(path)!r} cannot be read ({e}).") from e
        if path.suffix.lower() == ".json":
            return _from_json(json.loads(text), str(path))
        return _from_csv(text, str(path))


def _from_json(doc: dict[str, Any], where: str) -> CarbonTable:
    labels = {
        "owid-grapher": "Ember via Our World in Data",
        "owid-energy-data": "Ember via Our World in Data",
    }
    rows = []
    for row in [*doc.get("entries", []), *doc.get("regions", [])]:
        rows.append(
            IntensityEntry(
                name=str(row["name"]),
                code=str(row.get("code", row["name"])),
                g_per_kwh=row["g_per_kwh"],
                year=row.get("year", doc.get("year")),
                source=labels.get(str(row.get("from", "")), str(row.get("from") or doc.get("source", where))),
                iso3=str(row.get("iso3", "")),
            )
        )
    license = str(doc.get("license", ""))
    return CarbonTable(rows, f"{Path(where).name} ({license})" if license else where, license)


def _from_csv(text: str, where: str) -> CarbonTable:
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not {"region", "g_per_kwh"} <= set(reader.fieldnames):
        raise ZeusConfigError(
            f"Carbon table {where!r}: the first row must name the columns region,g_per_kwh[,year,source] "
            f"(found {reader.fieldnames})."
        )
    rows = []
    for line, row in enumerate(reader, start=2):
        try:
            value = float(row["g_per_kwh"])
            year = int(row["year"]) if row.get("year") else None
        except ValueError as e:
            raise ZeusConfigError(
                f"Carbon table {where}:{line}: {e}. Use numbers for g_per_kwh and year."
            ) from e
        if value < 0:
            raise ZeusConfigError(f"Carbon table {where}:{line}: g_per_kwh={value} is negative.")
        rows.append(IntensityEntry(row["region"], row["region"], value, year, row.get("source") or where))
    return CarbonTable(rows, where)


@lru_cache(maxsize=1)
def shipped_table() -> CarbonTable:
    """The table bundled with Zeus Suite (countries and the world average; see its file for the source).

    Example:
        >>> from zeus_core.carbon import shipped_table
        >>> shipped_table().lookup("FR").describe()
        'France (FR), 56 gCO2e/kWh in 2023 (Ember via Our World in Data)'
        >>> shipped_table().lookup("United States").g_per_kwh
        392.9
    """
    return CarbonTable.from_file(data.path(SHIPPED_TABLE))
