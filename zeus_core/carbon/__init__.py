"""Carbon (grams of CO2e) and cost of the energy Zeus Suite measures, offline first.

* :class:`Footprint`: turns joules into gCO2e (a country's 2023 average from the shipped table,
  a value you give, or a live provider) and into money (a price per kWh you give). It never
  blocks on, or fails without, a network.
* :func:`shipped_table` / :class:`CarbonTable`: the bundled carbon-intensity table (Ember's yearly
  electricity data via Our World in Data, CC-BY-4.0; see ``zeus_core/data/NOTICE.md``), or yours.
* :class:`CarbonIntensityProvider` / :class:`ElectricityMapsProvider`: live intensity (optional).

Training adapters log ``energy/co2_g`` and ``energy/cost`` with a :class:`Footprint`; see
docs/insights.md.

Example:
    >>> from zeus_core.carbon import Footprint
    >>> Footprint("FR").intensity().g_per_kwh
    56.0
"""

from zeus_core.carbon._footprint import (
    J_PER_KWH,
    CarbonIntensity,
    CarbonIntensityProvider,
    ElectricityMapsProvider,
    Footprint,
)
from zeus_core.carbon._table import CarbonTable, IntensityEntry, shipped_table

__all__ = [
    "J_PER_KWH",
    "CarbonIntensity",
    "CarbonIntensityProvider",
    "CarbonTable",
    "ElectricityMapsProvider",
    "Footprint",
    "IntensityEntry",
    "shipped_table",
]
