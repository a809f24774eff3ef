"""The one GPU catalogue: product facts that every simulator and fake derives its GPUs from.

Each :class:`GpuProduct` holds what the vendor's data sheet and NVML say about a GPU model: its
product name as NVML reports it, its architecture, its power-limit range (what
``nvidia-smi -q -d POWER`` reports) and its supported clocks. The simulated GPU's
:class:`~zeus_core.testing.PhysicalModel` presets, the fake NVML's ``FakeGPUSpec`` presets, the
power-limit workload generator's ``GPUS`` and the Perseus profiles' ``PHYSICAL_GPUS`` read their
facts from here and add only their own model parameters (how much power a workload draws, how
its time scales with the clock).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Generic, NamedTuple, TypeVar

from zeus_core.device._base import PowerLimitConstraints
from zeus_core.exceptions import ZeusConfigError

__all__ = ["ClockRange", "GpuProduct", "GPU_CATALOGUE", "gpu_product", "Preset"]

_T = TypeVar("_T")


class ClockRange(NamedTuple):
    """Supported SM clocks: from ``max_mhz`` down to ``min_mhz`` every ``step_mhz``, MHz."""

    max_mhz: int
    min_mhz: int
    step_mhz: int

    def clocks_mhz(self) -> list[int]:
        """The supported clocks, highest first, MHz (``min_mhz`` only where the steps land on it)."""
        return list(range(self.max_mhz, self.min_mhz - 1, -self.step_mhz))


@dataclass(frozen=True)
class GpuProduct:
    """Product facts of one GPU model, from the vendor's public specifications.

    Attributes:
        key: Short lower-case key, e.g. ``"a40"``.
        label: Short name for tables, e.g. ``"A40"`` or ``"RTX 6000"``.
        name: Product name as NVML reports it, e.g. ``"NVIDIA A40"``.
        architecture: ``"pascal"``, ``"volta"``, ``"turing"``, ``"ampere"``, ``"ada"`` or ``"hopper"``.
        limits: Power-limit range and default, W.
        sm_clocks: Supported SM clocks (``None`` where the catalogue does not list them).
        memory_clocks_mhz: Supported memory clocks, MHz, highest first.
        instant_power_field: Whether NVML's instant-power field answers on it.

    Example:
        >>> from zeus_core.testing import GPU_CATALOGUE
        >>> a40 = GPU_CATALOGUE["a40"]
        >>> a40.name, a40.limits.max_w, a40.sm_clocks.max_mhz
        ('NVIDIA A40', 300.0, 1740)
    """

    key: str
    label: str
    name: str
    architecture: str
    limits: PowerLimitConstraints
    sm_clocks: ClockRange | None
    memory_clocks_mhz: tuple[int, ...]
    instant_power_field: bool

    def clocks(self) -> ClockRange:
        """Its supported SM clocks.

        Raises:
            ZeusConfigError: The catalogue does not list them for this GPU.
        """
        if self.sm_clocks is None:
            raise ZeusConfigError(f"The GPU catalogue lists no SM clocks for the {self.name}.")
        return self.sm_clocks


def _product(
    label: str,
    name: str,
    architecture: str,
    limits_w: tuple[float, float],
    sm_clocks: tuple[int, int, int] | None,
    memory_clocks_mhz: tuple[int, ...] = (),
    instant_power_field: bool = True,
) -> GpuProduct:
    lo, hi = limits_w  # every product here boots at its highest limit
    return GpuProduct(
        key=_key(label),
        label=label,
        name=name,
        architecture=architecture,
        limits=PowerLimitConstraints(min_w=lo, max_w=hi, default_w=hi),
        sm_clocks=None if sm_clocks is None else ClockRange(*sm_clocks),
        memory_clocks_mhz=memory_clocks_mhz,
        instant_power_field=instant_power_field,
    )


def _key(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


# label, NVML name, architecture, (min, max) limit W, SM clocks (max, min, step) MHz, memory clocks MHz
_PRODUCTS = (
    _product("P100", "Tesla P100-PCIE-16GB", "pascal", (125.0, 250.0), (1328, 544, 13), (715,), False),
    _product("V100", "Tesla V100-SXM2-32GB", "volta", (150.0, 300.0), (1530, 135, 15), (877,), False),
    _product("RTX 6000", "Quadro RTX 6000", "turing", (100.0, 260.0), None),
    _product("A40", "NVIDIA A40", "ampere", (100.0, 300.0), (1740, 210, 15), (7251, 5001, 810, 405)),
    _product("A100", "NVIDIA A100-SXM4-40GB", "ampere", (100.0, 400.0), (1410, 210, 15), (1215,)),
    _product("L4", "NVIDIA L4", "ada", (40.0, 72.0), None),
    _product("H100", "NVIDIA H100 80GB HBM3", "hopper", (200.0, 700.0), (1980, 345, 15), (2619,)),
)

GPU_CATALOGUE: dict[str, GpuProduct] = {p.key: p for p in _PRODUCTS}
"""Every catalogued GPU by key (``"a40"``, ``"a100"``, ``"h100"``, ``"v100"``, ``"p100"``, ...).

Example:
    >>> from zeus_core.testing import GPU_CATALOGUE
    >>> [(p.label, p.limits.min_w, p.limits.max_w) for p in GPU_CATALOGUE.values()][:2]
    [('P100', 125.0, 250.0), ('V100', 150.0, 300.0)]
"""


def gpu_product(name: str) -> GpuProduct:
    """The catalogued GPU called ``name`` (its key or label, in any case: ``"a100"``, ``"RTX 6000"``).

    Raises:
        ZeusConfigError: No catalogued GPU has that name (the message lists them).

    Example:
        >>> gpu_product("H100").limits
        PowerLimitConstraints(min_w=200.0, max_w=700.0, default_w=700.0)
    """
    try:
        return GPU_CATALOGUE[_key(name)]
    except KeyError:
        raise ZeusConfigError(
            f"No GPU called {name!r} in the catalogue; use one of {', '.join(GPU_CATALOGUE)}."
        ) from None


class Preset(Generic[_T]):
    """A class attribute named after a catalogued GPU that builds the class's model of it.

    ``Cls.a40(**overrides)`` is ``Cls.preset("a40", **overrides)``: a class that models GPUs (the
    simulated GPU's :class:`~zeus_core.testing.PhysicalModel`, the fake NVML's ``FakeGPUSpec``)
    declares ``a40: ClassVar[Preset[Cls]] = Preset()`` once per GPU it has a preset for.

    Example:
        >>> from zeus_core.testing import PhysicalModel
        >>> PhysicalModel.h100(idle_power_w=60.0).idle_power_w
        60.0
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, instance: object, owner: type[_T]) -> Callable[..., _T]:
        build: Callable[..., Any] = getattr(owner, "preset")
        return functools.partial(build, self.key)
