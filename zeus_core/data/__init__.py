"""Measured data shipped with the package, found through :func:`path`.

Bundled (sources and licenses in ``zeus_core/data/NOTICE.md``):

* ``zeus_nsdi23``: the Zeus (NSDI'23) traces: ``summary_train.csv`` (epochs to each target metric per
  workload, batch size and seed) and ``summary_power_{a40,v100}.csv`` (time per epoch, s, and average
  power, W, per batch size and power limit). From the public Zeus repository, Apache-2.0.
* ``power_limit_profiles``: ``GlobalPowerLimitOptimizer`` profiles measured on NVIDIA A40 GPUs (one row
  per power limit: elapsed s and J per GPU). From the public Zeus repository, Apache-2.0.
* ``perseus/a100_4stage_profile.csv``: a **simulated** Perseus instruction profile (4 stages, A100-like,
  from :func:`zeus_core.testing._pipeline_profiles.physical_instruction_profile`
  with seed 0) to try ``zeus-suite plan`` with.
* ``carbon_intensity/electricity_2023.json``: lifecycle carbon intensity of electricity (gCO2e/kWh) of
  33 countries and the world in 2023, from Ember's yearly electricity data via Our World in Data,
  CC-BY-4.0 (read by :mod:`zeus_core.carbon`).

``python -m zeus_core.data NAME`` prints the path of ``NAME`` (for shell use), and
``python -m zeus_core.data`` lists what is bundled.

Example:
    >>> from zeus_core import data
    >>> (data.path("zeus_nsdi23") / "summary_train.csv").is_file()
    True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from zeus_core.exceptions import ZeusConfigError

__all__ = ["DATASETS", "path"]

DATASETS: dict[str, str] = {
    "zeus_nsdi23": "Zeus NSDI'23 traces (summary_train.csv, summary_power_{a40,v100}.csv), measured",
    "power_limit_profiles": "GlobalPowerLimitOptimizer profiles measured on NVIDIA A40 GPUs (6 CSV files)",
    "perseus/a100_4stage_profile.csv": (
        "a simulated A100-like 4-stage instruction profile for `zeus-suite plan`"
    ),
    "carbon_intensity/electricity_2023.json": (
        "carbon intensity of electricity per country, 2023, gCO2e/kWh "
        "(Ember via Our World in Data, CC-BY-4.0)"
    ),
}
"""What is bundled: name → one-line description.

Example:
    >>> from zeus_core import data
    >>> sorted(data.DATASETS)[:2]
    ['carbon_intensity/electricity_2023.json', 'perseus/a100_4stage_profile.csv']
"""


def path(name: str) -> Path:
    """The file system path of a bundled data set or file.

    Args:
        name: One of :data:`DATASETS` (``"zeus_nsdi23"``, ``"power_limit_profiles"``,
            ``"perseus/a100_4stage_profile.csv"``, ``"carbon_intensity/electricity_2023.json"``),
            or a file inside one of them
            (``"power_limit_profiles/A40_resnet50_1gpu.csv"``).

    Raises:
        ZeusConfigError: ``name`` is not bundled (the message lists what is).

    Example:
        >>> from zeus_core import data
        >>> data.path("power_limit_profiles/A40_resnet50_1gpu.csv").suffix
        '.csv'
    """
    root = resources.files(__name__)
    target = root.joinpath(*name.strip("/").split("/"))
    if not name or not (target.is_dir() or target.is_file()):
        raise ZeusConfigError(
            f"zeus_core.data.path: {name!r} is not bundled; choose one of {sorted(DATASETS)} "
            "(or a file inside one of them)."
        )
    # The package is installed as plain files (no zip), so the traversable is a real path.
    return Path(str(target))
