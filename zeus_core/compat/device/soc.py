"""Zeus's ``zeus.device.soc``: :func:`get_soc`. The suite meters no SoC (Apple silicon, Jetson) yet.

On a machine without an SoC, Zeus's ``get_soc`` raises ``ZeusSoCInitError`` and ``ZeusMonitor``
reports ``soc_energy=None``; here that holds on every machine (docs/migrating.md says so).

Example:
    >>> from zeus_core.compat.device import get_soc
    >>> from zeus_core.compat.device.exception import ZeusSoCInitError
    >>> try:
    ...     get_soc()
    ... except ZeusSoCInitError as e:
    ...     print("no SoC")
    no SoC
"""

from __future__ import annotations

import platform

from zeus_core.compat.device.exception import ZeusSoCInitError

__all__ = ["get_soc"]


def get_soc() -> None:
    """Zeus's SoC discovery; the suite has no SoC backend, so it always raises.

    Raises:
        ZeusSoCInitError: Always, naming the platform.

    Example:
        >>> from zeus_core.compat.device.soc import get_soc
        >>> get_soc()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        zeus_core.compat.device.exception.ZeusSoCInitError: No SoC energy backend for ...
    """
    raise ZeusSoCInitError(
        f"No SoC energy backend for {platform.system()} {platform.machine()}: Zeus Suite measures NVIDIA "
        "and AMD GPUs and RAPL CPUs, not Apple silicon or Jetson (soc_energy is None)."
    )
