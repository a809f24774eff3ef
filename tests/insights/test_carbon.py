"""Carbon and cost of energy, offline first: the shipped table, a user's value or table, live providers."""

from __future__ import annotations

import json
import pickle
import threading
import time
from pathlib import Path

import pytest

from zeus_core import data
from zeus_core.carbon import (
    CarbonIntensityProvider,
    CarbonTable,
    ElectricityMapsProvider,
    Footprint,
    shipped_table,
)
from zeus_core.exceptions import ZeusConfigError


def test_the_shipped_table_names_its_source_licence_and_year() -> None:
    doc = json.loads(data.path("carbon_intensity/electricity_2023.json").read_text())
    assert doc["license"] == "CC-BY-4.0" and doc["year"] == 2023 and doc["unit"] == "gCO2e/kWh"
    assert "Ember" in doc["attribution"] and "Our World in Data" in doc["attribution"]
    assert all(e["from"] in doc["sources"] and e["year"] == 2023 for e in doc["entries"] + doc["regions"])
    notice = (data.path("carbon_intensity").parent / "NOTICE.md").read_text()
    assert "carbon_intensity/electricity_2023.json" in notice and "CC-BY-4.0" in notice


def test_lookup_by_name_or_code_and_a_clear_error_for_an_unknown_region() -> None:
    table = shipped_table()
    assert table.lookup("DE") == table.lookup("deu") == table.lookup("Germany")
    assert table.lookup("fr").g_per_kwh == 56 and table.lookup("World").g_per_kwh == pytest.approx(483.2)
    with pytest.raises(ZeusConfigError, match=r"no region 'Atlantis'.*intensity_g_per_kwh="):
        table.lookup("Atlantis")


def test_footprint_turns_joules_into_grams_and_money() -> None:
    fp = Footprint("DE", price_per_kwh=0.30, currency="EUR")
    assert fp.co2_g(3.6e6) == pytest.approx(381.0)  # one kWh
    assert fp.cost(7.2e6) == pytest.approx(0.60)
    assert "Germany (DE)" in fp.describe() and "0.3 EUR/kWh" in fp.describe()
    assert Footprint().intensity().region == "World average"  # nothing given: the world, said so
    assert Footprint(intensity_g_per_kwh=100).co2_g(3.6e6) == pytest.approx(100.0)
    assert Footprint("DE").cost(1e9) is None  # no price, no cost


@pytest.mark.parametrize(
    "kwargs",
    [
        {"region": "Nowhere"},
        {"intensity_g_per_kwh": -1.0},
        {"price_per_kwh": -0.1},
        {"price_per_kwh": "cheap"},
    ],
)
def test_bad_settings_fail_before_training(kwargs: dict) -> None:
    with pytest.raises(ZeusConfigError):
        Footprint(**kwargs)


def test_environment_variables_set_the_defaults() -> None:
    env = {"ZEUS_SUITE_CARBON_REGION": "FR", "ZEUS_SUITE_PRICE_PER_KWH": "0.25", "ZEUS_SUITE_CURRENCY": "EUR"}
    fp = Footprint.from_env(env)
    assert fp.intensity().g_per_kwh == 56 and fp.cost(3.6e6) == pytest.approx(0.25) and fp.currency == "EUR"
    assert Footprint.from_env({"ZEUS_SUITE_CARBON_INTENSITY": "12"}).intensity().g_per_kwh == 12
    with pytest.raises(ZeusConfigError, match="ZEUS_SUITE_PRICE_PER_KWH='a lot'"):
        Footprint.from_env({"ZEUS_SUITE_PRICE_PER_KWH": "a lot"})


def test_a_table_of_your_own_for_grid_regions(tmp_path: Path) -> None:
    path = tmp_path / "grid.csv"
    path.write_text("region,g_per_kwh,year,source\nUS-CAL-CISO,210,2024,my utility\n")
    fp = Footprint("us-cal-ciso", table=path)
    assert fp.intensity().g_per_kwh == 210 and "my utility" in fp.describe()
    path.write_text("zone,value\nX,1\n")
    with pytest.raises(ZeusConfigError, match="region,g_per_kwh"):
        CarbonTable.from_file(path)


class _Fixed(CarbonIntensityProvider):
    name = "test provider"

    def __init__(self, value: float, delay_s: float = 0.0) -> None:
        self.value, self.delay_s = value, delay_s

    def get_current_carbon_intensity(self) -> float:
        time.sleep(self.delay_s)
        return self.value


def test_a_live_value_is_used_once_it_arrives_and_a_slow_provider_never_blocks() -> None:
    fp = Footprint("DE", provider=_Fixed(123.0))
    fp.start()
    assert fp.wait(5.0)
    assert fp.intensity().g_per_kwh == 123.0 and fp.intensity().live
    slow = Footprint("DE", provider=_Fixed(1.0, delay_s=30.0))
    began = time.perf_counter()
    slow.start()
    assert slow.intensity().g_per_kwh == 381  # the table, at once
    assert time.perf_counter() - began < 1.0
    assert "no answer yet" in slow.describe()


def test_with_the_network_cut_off_the_live_provider_falls_back_to_the_table_and_says_so(
    no_network: list[object], console_lines: list[str]
) -> None:
    fp = Footprint("DE", provider=ElectricityMapsProvider("DE", token="t", timeout_s=2.0), price_per_kwh=0.3)
    began = time.perf_counter()
    fp.start()
    assert fp.wait(5.0)
    assert time.perf_counter() - began < 5.0
    assert no_network  # it did try
    assert fp.intensity().g_per_kwh == 381 and not fp.intensity().live
    assert fp.co2_g(3.6e6) == pytest.approx(381.0) and fp.cost(3.6e6) == pytest.approx(0.3)
    assert fp.live_error is not None and fp.as_dict()["live_error"] == fp.live_error
    assert any("Electricity Maps (DE) failed" in line and "Germany (DE)" in line for line in console_lines)


def test_a_footprint_pickles_without_its_thread() -> None:
    fp = Footprint("DE", provider=_Fixed(5.0))
    fp.start()
    fp.wait(5.0)
    copy = pickle.loads(pickle.dumps(fp))
    assert copy.intensity().g_per_kwh == 381  # a new process asks again
    copy.start()
    assert copy.wait(5.0) and copy.intensity().g_per_kwh == 5.0
    assert isinstance(copy._done, threading.Event)
