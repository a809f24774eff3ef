"""Find this machine's GPUs and CPUs, and say what is missing and why.

:func:`get_gpus` asks each GPU vendor of :mod:`zeus_core.device._registry` in turn (NVIDIA
through NVML, then AMD through amdsmi) and returns the first one's GPUs, else ``[]``.
:func:`get_cpus` returns the CPU packages Linux RAPL meters. :func:`discover` returns both plus
a :class:`Unavailable` entry, with its fix, for every kind of device it could not use;
``zeus-suite env`` prints it.

Nothing here keeps devices in module-level state: every call builds fresh device objects (the
backends cache only their vendor library's initialisation).

GPU indices are the ones the user sees: each vendor maps ``CUDA_VISIBLE_DEVICES`` /
``HIP_VISIBLE_DEVICES`` with :func:`zeus_core.device._visibility.parse_visible_devices`, so GPU ``0``
here is ``cuda:0`` in PyTorch. ``Unavailable`` and ``parse_visible_devices`` are re-exported here.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from zeus_core.device._registry import Unavailable, gpu_vendors
from zeus_core.device._visibility import parse_visible_devices, visible_device_variables
from zeus_core.device._zeusd_devices import daemon_cpus, route_gpus
from zeus_core.exceptions import ZeusError, ZeusPermissionError

if TYPE_CHECKING:
    from zeus_core.device._base import CPU, GPU

__all__ = [
    "Unavailable",
    "DeviceReport",
    "get_gpus",
    "get_cpus",
    "discover",
    "parse_visible_devices",
]

logger = logging.getLogger(__name__)

_RAPL_ROOT = "/sys/class/powercap"
_SIMULATED_STAND_IN = "zeus_core.testing._stand_in:simulated_gpus_from_env"


@dataclass
class DeviceReport:
    """What :func:`discover` found.

    Attributes:
        gpus: Usable GPUs, indexed as the user sees them.
        cpus: CPU packages whose energy RAPL meters.
        missing: One entry per kind of device that could not be used.
        visibility: The device-visibility environment variables that are set, name -> value.

    Example:
        >>> from zeus_core.device import discover
        >>> report = discover({"CUDA_VISIBLE_DEVICES": "", "ZEUS_SUITE_SIMULATE": "0"})
        >>> report.gpus, report.visibility
        ([], {'CUDA_VISIBLE_DEVICES': ''})
    """

    gpus: list[GPU] = field(default_factory=list)
    cpus: list[CPU] = field(default_factory=list)
    missing: list[Unavailable] = field(default_factory=list)
    visibility: dict[str, str] = field(default_factory=dict)


def _find_gpus(environ: Mapping[str, str] | None) -> tuple[list[GPU], list[Unavailable]]:
    """The first registered vendor's GPUs; the reasons of the vendors tried before that found none."""
    env = os.environ if environ is None else environ
    missing: list[Unavailable] = []
    for vendor in gpu_vendors():
        gpus, why = vendor.load_probe()(env)
        if gpus:  # a vendor that has GPUs: the others are not missing
            return route_gpus(gpus, env), []  # privileged calls via ZEUSD_SOCK_PATH's daemon, if set
        if why is not None:
            missing.append(why)
    # [] (said once, visibly) unless ZEUS_SUITE_SIMULATE asks for simulated GPUs. They live in
    # zeus_core.testing, above this layer, so they are named here and loaded only when asked for.
    module, _, function = _SIMULATED_STAND_IN.partition(":")
    return getattr(importlib.import_module(module), function)(env), missing


def get_gpus(environ: Mapping[str, str] | None = None) -> list[GPU]:
    """This machine's visible GPUs: those of the first registered vendor that has any, else ``[]``.

    Vendors are tried in :func:`zeus_core.device._registry.gpu_vendors` order (NVIDIA, then AMD).

    Args:
        environ: Environment to read ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` from
            (default: ``os.environ``).

    Raises:
        ZeusConfigError: ``CUDA_VISIBLE_DEVICES`` is malformed or names a MIG slice.
        ZeusDeviceNotFoundError: ``CUDA_VISIBLE_DEVICES`` names a GPU this machine lacks.

    Example:
        >>> from zeus_core.device._discovery import get_gpus
        >>> [g.describe() for g in get_gpus()]  # doctest: +SKIP
        ['GPU 0: NVIDIA A40', 'GPU 1: NVIDIA A40']
    """
    gpus, missing = _find_gpus(environ)
    if not gpus:
        logger.info("No GPU found. %s", " ".join(m.describe() for m in missing))
    return gpus


def get_cpus(sysfs_root: str | Path = _RAPL_ROOT) -> list[CPU]:
    """CPU packages (with DRAM where metered) that Linux RAPL exposes under ``sysfs_root``.

    Returns:
        ``[]`` when RAPL is absent (not x86 Linux, a VM, or a container without powercap).

    Raises:
        ZeusPermissionError: The RAPL files exist but this process may not read them.

    Example:
        >>> from zeus_core.device import get_cpus
        >>> get_cpus("/no/such/powercap")
        []
    """
    from zeus_core.device._rapl import rapl_cpus

    try:
        return list(rapl_cpus(sysfs_root=str(sysfs_root)))
    except ZeusPermissionError:
        through_daemon = daemon_cpus()  # unprivileged RAPL reads via ZEUSD_SOCK_PATH's daemon, if set
        if through_daemon:
            return through_daemon
        raise


def _rapl_status(sysfs_root: str | Path) -> tuple[list[CPU], list[Unavailable]]:
    try:
        cpus = get_cpus(sysfs_root)
    except ModuleNotFoundError as e:
        return [], [Unavailable("CPU energy (RAPL)", f"the RAPL backend could not be imported ({e}).")]
    except ZeusPermissionError as e:
        message = str(e)
        fix = (
            ""
            if "Fix:" in message
            else (
                f"run as root, or let every user read the counters (until reboot): "
                f"`sudo chmod a+r {sysfs_root}/intel-rapl:*/energy_uj {sysfs_root}/intel-rapl:*/*/energy_uj`."
            )
        )
        return [], [Unavailable("CPU energy (RAPL)", message, fix)]
    except ZeusError as e:
        return [], [Unavailable("CPU energy (RAPL)", f"the RAPL counters could not be read ({e}).")]
    if not cpus:
        return [], [
            Unavailable(
                "CPU energy (RAPL)",
                f"no RAPL package domains under {sysfs_root} (not x86 Linux, a VM without RAPL, a "
                "container without /sys/class/powercap, or the intel_rapl driver is not loaded).",
                "on bare-metal x86 Linux: `sudo modprobe intel_rapl_common`; in a container, mount "
                "/sys/class/powercap read-only. Pass cpu_indices=[] to ZeusMonitor to skip CPUs.",
            )
        ]
    missing: list[Unavailable] = []
    if not any(c.has_dram for c in cpus):
        missing.append(
            Unavailable(
                "DRAM energy (RAPL)",
                "the CPU packages have no DRAM RAPL domain (usual on AMD and client CPUs); "
                "CPU package energy is still measured.",
            )
        )
    return cpus, missing


def discover(environ: Mapping[str, str] | None = None, sysfs_root: str | Path = _RAPL_ROOT) -> DeviceReport:
    """Find GPUs and CPUs, and explain every kind of device that is missing.

    Unlike :func:`get_gpus`, a malformed ``CUDA_VISIBLE_DEVICES`` does not raise here: it is
    reported as a missing-device entry with its fix.

    Args:
        environ: Environment to read (default: ``os.environ``).
        sysfs_root: Where the RAPL powercap tree lives.

    Example:
        >>> from zeus_core.device._discovery import discover
        >>> report = discover()
        >>> for m in report.missing:  # doctest: +SKIP
        ...     print(m.describe())
        NVIDIA GPUs: NVML library libnvidia-ml.so.1 not found ... Fix: install the NVIDIA driver ...
    """
    env = os.environ if environ is None else environ
    report = DeviceReport(visibility=visible_device_variables(env))
    try:
        report.gpus, report.missing = _find_gpus(env)
    except ZeusError as e:
        report.missing.append(
            Unavailable("GPUs", str(e), "fix or unset the device-visibility variable named above.")
        )
    report.cpus, cpu_missing = _rapl_status(sysfs_root)
    report.missing.extend(cpu_missing)
    return report
