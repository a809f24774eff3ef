"""The GPU vendors that discovery tries, in order, and what a vendor's probe returns.

A vendor is a module with a *probe*: a function that takes the environment (to read
``CUDA_VISIBLE_DEVICES`` and the like) and returns the visible GPUs it drives, plus an
:class:`Unavailable` saying why it found none. Discovery asks each registered vendor in turn and
keeps the first one that finds GPUs.

Adding a vendor is one new module in ``zeus_core/device/`` (a :class:`~zeus_core.device._base.GPU`
subclass and its probe) and one :func:`register_gpu_vendor` line at the bottom of this module.
A probe given as ``"module:function"`` is imported only when discovery first asks it, so
registering costs no import of the vendor's library; code outside the package may register a
callable instead.

This module imports no vendor module, and no vendor module imports discovery: the arrows run
vendor → registry/base, discovery → registry, never back.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError

if TYPE_CHECKING:
    from zeus_core.device._base import GPU

__all__ = [
    "Unavailable",
    "GpuProbe",
    "GpuVendor",
    "register_gpu_vendor",
    "unregister_gpu_vendor",
    "gpu_vendors",
]


@dataclass(frozen=True)
class Unavailable:
    """A kind of device that could not be used, why, and how to fix it.

    Attributes:
        what: The kind of device, e.g. ``"NVIDIA GPUs"`` or ``"CPU energy (RAPL)"``.
        reason: Why it is not used.
        fix: What the user can do about it (empty when nothing needs doing).

    Example:
        >>> from zeus_core.device import Unavailable
        >>> Unavailable("AMD GPUs", "amdsmi is not installed.", "pip install amdsmi").describe()
        'AMD GPUs: amdsmi is not installed. Fix: pip install amdsmi'
    """

    what: str
    reason: str
    fix: str = ""

    def describe(self) -> str:
        """One line: ``"<what>: <reason> Fix: <fix>"``."""
        return f"{self.what}: {self.reason}" + (f" Fix: {self.fix}" if self.fix else "")


GpuProbe = Callable[[Mapping[str, str]], "tuple[Sequence[GPU], Unavailable | None]"]
"""``probe(environ) -> (gpus, why_none)``: the visible GPUs of one vendor, or why there are none.

A probe must not raise when the vendor's library or driver is missing (it returns ``[]`` and the
reason); it raises :class:`~zeus_core.exceptions.ZeusConfigError` for a malformed
``CUDA_VISIBLE_DEVICES`` and :class:`~zeus_core.exceptions.ZeusDeviceNotFoundError` for a GPU the
machine lacks.
"""


@dataclass(frozen=True)
class GpuVendor:
    """One registered GPU vendor.

    Attributes:
        name: Short name, e.g. ``"nvidia"``.
        probe: The probe, or where to import it from (``"package.module:function"``).
    """

    name: str
    probe: GpuProbe | str

    def load_probe(self) -> GpuProbe:
        """The probe function, importing its module on first use.

        Raises:
            ZeusConfigError: The ``"module:function"`` reference does not resolve.
        """
        if not isinstance(self.probe, str):
            return self.probe
        module_name, _, attribute = self.probe.partition(":")
        try:
            probe: GpuProbe = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as e:
            raise ZeusConfigError(
                f"GPU vendor {self.name!r}: its probe {self.probe!r} cannot be loaded ({e}). Fix the "
                "reference given to register_gpu_vendor ('package.module:function')."
            ) from e
        return probe


_GPU_VENDORS: list[GpuVendor] = []


def register_gpu_vendor(name: str, probe: GpuProbe | str, *, before: str | None = None) -> None:
    """Let discovery try one more GPU vendor, after those registered earlier.

    Args:
        name: Short unique name, e.g. ``"nvidia"``.
        probe: ``probe(environ) -> (gpus, why_none)``, or ``"package.module:function"`` naming it
            (imported only when discovery first runs).
        before: Try this vendor before the registered vendor of that name (default: last).

    Raises:
        ZeusConfigError: ``name`` is empty or already registered, ``probe`` is a malformed
            reference, or ``before`` names no registered vendor.

    Example:
        >>> from zeus_core.device._registry import gpu_vendors
        >>> [v.name for v in gpu_vendors()]
        ['nvidia', 'amd']
    """
    if not name:
        raise ZeusConfigError("register_gpu_vendor: give the vendor a name, e.g. 'nvidia'.")
    if any(v.name == name for v in _GPU_VENDORS):
        raise ZeusConfigError(
            f"register_gpu_vendor: a GPU vendor named {name!r} is already registered. Pick another "
            f"name, or call unregister_gpu_vendor({name!r}) first to replace it."
        )
    if isinstance(probe, str) and (probe.count(":") != 1 or not all(probe.split(":"))):
        raise ZeusConfigError(
            f"register_gpu_vendor({name!r}): probe={probe!r} is not a 'package.module:function' reference."
        )
    position = len(_GPU_VENDORS)
    if before is not None:
        names = [v.name for v in _GPU_VENDORS]
        if before not in names:
            raise ZeusConfigError(
                f"register_gpu_vendor({name!r}): before={before!r} is not a registered GPU vendor "
                f"(registered: {names})."
            )
        position = names.index(before)
    _GPU_VENDORS.insert(position, GpuVendor(name, probe))


def unregister_gpu_vendor(name: str) -> None:
    """Stop discovery from trying the GPU vendor ``name``.

    Raises:
        ZeusConfigError: No vendor of that name is registered.

    Example:
        >>> from zeus_core.device import register_gpu_vendor, unregister_gpu_vendor
        >>> register_gpu_vendor("acme", lambda environ: ([], None))
        >>> unregister_gpu_vendor("acme")
    """
    for i, vendor in enumerate(_GPU_VENDORS):
        if vendor.name == name:
            del _GPU_VENDORS[i]
            return
    raise ZeusConfigError(
        f"unregister_gpu_vendor: no GPU vendor named {name!r} (registered: {[v.name for v in _GPU_VENDORS]})."
    )


def gpu_vendors() -> list[GpuVendor]:
    """The registered GPU vendors, in the order discovery tries them."""
    return list(_GPU_VENDORS)


# The vendors that ship with Zeus Suite, most common first: discovery keeps the first that finds GPUs.
register_gpu_vendor("nvidia", "zeus_core.device._nvidia:probe_nvidia")
register_gpu_vendor("amd", "zeus_core.device._amd:probe_amd")
