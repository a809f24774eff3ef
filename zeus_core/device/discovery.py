"""Find this machine's GPUs and CPUs, and say what is missing and why.

:func:`get_gpus` returns NVIDIA GPUs (NVML) when there are any, else AMD GPUs (amdsmi), else
``[]``. :func:`get_cpus` returns the CPU packages Linux RAPL meters. :func:`discover` returns
both plus a :class:`Unavailable` entry, with its fix, for every kind of device it could not use;
``zeus-suite env`` prints it.

Nothing here keeps devices in module-level state: every call builds fresh device objects (the
backends cache only their vendor library's initialisation).

GPU indices are the ones the user sees. :func:`parse_visible_devices` maps
``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` to the vendor library's indices the way the
CUDA runtime does, so GPU ``0`` here is ``cuda:0`` in PyTorch.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusError, ZeusPermissionError

if TYPE_CHECKING:
    from zeus_core.device.base import CPU, GPU

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


@dataclass(frozen=True)
class Unavailable:
    """A kind of device that could not be used, why, and how to fix it.

    Attributes:
        what: The kind of device, e.g. ``"NVIDIA GPUs"`` or ``"CPU energy (RAPL)"``.
        reason: Why it is not used.
        fix: What the user can do about it (empty when nothing needs doing).
    """

    what: str
    reason: str
    fix: str = ""

    def describe(self) -> str:
        """One line: ``"<what>: <reason> Fix: <fix>"``."""
        return f"{self.what}: {self.reason}" + (f" Fix: {self.fix}" if self.fix else "")


@dataclass
class DeviceReport:
    """What :func:`discover` found.

    Attributes:
        gpus: Usable GPUs, indexed as the user sees them.
        cpus: CPU packages whose energy RAPL meters.
        missing: One entry per kind of device that could not be used.
        visibility: The device-visibility environment variables that are set, name -> value.
    """

    gpus: list[GPU] = field(default_factory=list)
    cpus: list[CPU] = field(default_factory=list)
    missing: list[Unavailable] = field(default_factory=list)
    visibility: dict[str, str] = field(default_factory=dict)


def parse_visible_devices(
    spec: str, count: int, uuids: Callable[[], Sequence[str]], variable: str = "CUDA_VISIBLE_DEVICES"
) -> list[int]:
    """Map a ``CUDA_VISIBLE_DEVICES``-style list to the vendor library's device indices.

    Entries are integer indices or ``GPU-<uuid>`` prefixes (matched like the CUDA runtime does:
    any unique prefix of the UUID). As in CUDA, a negative index ends the list, so ``-1`` hides
    every GPU. An empty string hides every GPU.

    Args:
        spec: The variable's value, e.g. ``"2,0"`` or ``"GPU-5f0b,1"``.
        count: How many devices the vendor library sees.
        uuids: Returns every device's UUID, in library order (called only for UUID entries).
        variable: The variable's name, for messages.

    Returns:
        Library indices in the order the user sees them (position ``i`` is ``cuda:i``).

    Raises:
        ZeusConfigError: A ``MIG-`` entry (NVML cannot meter MIG slices), a duplicate, an
            ambiguous UUID prefix, or an entry that is neither an index nor a UUID.
        ZeusDeviceNotFoundError: An index or UUID this machine does not have.
    """
    indices: list[int] = []
    all_uuids: Sequence[str] | None = None
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            if spec.strip():
                raise ZeusConfigError(
                    f"{variable}={spec!r} has an empty entry. Write a comma-separated list such as '0,1'."
                )
            continue
        if entry.upper().startswith("MIG-"):
            raise ZeusConfigError(
                f"{variable}={spec!r} names the MIG slice {entry!r}: NVML cannot meter the power or energy "
                "of MIG slices. Measure the whole GPU instead: unset the MIG entry and use the parent "
                f"GPU's index or GPU-<uuid> in {variable} (`nvidia-smi -L` lists both)."
            )
        if entry.upper().startswith("GPU-"):
            if all_uuids is None:
                all_uuids = list(uuids())
            prefix = entry.lower()
            matches = [i for i, u in enumerate(all_uuids) if u.lower().startswith(prefix)]
            if not matches:
                raise ZeusDeviceNotFoundError(
                    f"{variable}={spec!r}: no GPU has a UUID starting with {entry!r}. This machine's GPUs "
                    f"are {list(all_uuids)}; fix the entry (`nvidia-smi -L` lists the UUIDs)."
                )
            if len(matches) > 1:
                raise ZeusConfigError(
                    f"{variable}={spec!r}: the UUID prefix {entry!r} matches GPUs {matches}. Give more "
                    "characters of the UUID."
                )
            index = matches[0]
        else:
            try:
                index = int(entry)
            except ValueError:
                raise ZeusConfigError(
                    f"{variable}={spec!r}: entry {entry!r} is neither a GPU index nor a GPU-<uuid>. "
                    "Use a comma-separated list such as '0,1' or 'GPU-5f0b…'."
                ) from None
            if index < 0:
                break  # CUDA stops at the first negative index ("-1" hides every GPU)
            if index >= count:
                raise ZeusDeviceNotFoundError(
                    f"{variable}={spec!r}: there is no GPU {index}; this machine has {count} GPU(s) "
                    f"(indices 0-{count - 1}). Fix or unset {variable}."
                    if count
                    else f"{variable}={spec!r}: there is no GPU {index}; this machine has no GPUs."
                )
        if index in indices:
            raise ZeusConfigError(f"{variable}={spec!r} lists GPU {entry!r} twice. List each GPU once.")
        indices.append(index)
    return indices


def _visibility(environ: Mapping[str, str]) -> dict[str, str]:
    names = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    return {n: environ[n] for n in names if n in environ}


def _find_gpus(environ: Mapping[str, str] | None) -> tuple[list[GPU], list[Unavailable]]:
    """NVIDIA first, then AMD; the reasons of the backends that found none."""
    from zeus_core.device.nvidia import probe_nvidia

    env = os.environ if environ is None else environ
    missing: list[Unavailable] = []
    nvidia, why = probe_nvidia(env)
    if nvidia:
        return list(nvidia), missing
    if why is not None:
        missing.append(why)
    from zeus_core.device.amd import probe_amd

    amd, why = probe_amd(env)
    if amd:
        return list(amd), []
    if why is not None:
        missing.append(why)
    from zeus_core.device.simulated import simulated_gpus_from_env

    return simulated_gpus_from_env(env), missing  # [] (said once, visibly) unless ZEUS_SUITE_SIMULATE


def get_gpus(environ: Mapping[str, str] | None = None) -> list[GPU]:
    """This machine's visible GPUs: NVIDIA ones if any, else AMD ones, else ``[]``.

    Args:
        environ: Environment to read ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` from
            (default: ``os.environ``).

    Raises:
        ZeusConfigError: ``CUDA_VISIBLE_DEVICES`` is malformed or names a MIG slice.
        ZeusDeviceNotFoundError: ``CUDA_VISIBLE_DEVICES`` names a GPU this machine lacks.

    Example:
        >>> from zeus_core.device.discovery import get_gpus
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
    """
    from zeus_core.device.rapl import rapl_cpus

    return list(rapl_cpus(sysfs_root=str(sysfs_root)))


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
        >>> from zeus_core.device.discovery import discover
        >>> report = discover()
        >>> for m in report.missing:  # doctest: +SKIP
        ...     print(m.describe())
        NVIDIA GPUs: NVML library libnvidia-ml.so.1 not found ... Fix: install the NVIDIA driver ...
    """
    env = os.environ if environ is None else environ
    report = DeviceReport(visibility=_visibility(env))
    try:
        report.gpus, report.missing = _find_gpus(env)
    except ZeusError as e:
        report.missing.append(
            Unavailable("GPUs", str(e), "fix or unset the device-visibility variable named above.")
        )
    report.cpus, cpu_missing = _rapl_status(sysfs_root)
    report.missing.extend(cpu_missing)
    return report
