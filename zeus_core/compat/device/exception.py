"""Zeus's device exceptions (``zeus.device.exception`` and the ``*InitError`` classes), as the suite's.

Zeus's device errors map onto the suite's tree: a GPU that cannot do something raises
``ZeusNotSupportedError`` (Zeus's ``ZeusGPUNotSupportedError``), a missing right
``ZeusPermissionError`` (``ZeusGPUNoPermissionError``); the ``*InitError`` classes (no GPU, CPU or
SoC found) are ``ZeusDeviceNotFoundError``s.

Example:
    >>> from zeus_core.compat.device.exception import ZeusGPUInitError, ZeusBaseGPUError
    >>> issubclass(ZeusGPUInitError, ZeusBaseGPUError)
    True
"""

from __future__ import annotations

from zeus_core.exceptions import (
    ZeusDeviceError,
    ZeusDeviceNotFoundError,
    ZeusError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)

__all__ = [
    "ZeusBaseError",
    "ZeusBaseGPUError",
    "ZeusBaseCPUError",
    "ZeusBaseSoCError",
    "ZeusGPUNotSupportedError",
    "ZeusGPUNoPermissionError",
    "ZeusCPUNoPermissionError",
    "ZeusGPUInitError",
    "ZeusCPUInitError",
    "ZeusSoCInitError",
    "ZeusGPUHeterogeneousError",
]

ZeusBaseError = ZeusError
"""Zeus's root error: the suite's :class:`~zeus_core.exceptions.ZeusError`."""
ZeusBaseGPUError = ZeusError
"""Any GPU error (the suite's :class:`~zeus_core.exceptions.ZeusError`)."""
ZeusBaseCPUError = ZeusError
"""Any CPU error (the suite's :class:`~zeus_core.exceptions.ZeusError`)."""
ZeusBaseSoCError = ZeusError
"""Any SoC error (the suite's :class:`~zeus_core.exceptions.ZeusError`)."""
ZeusGPUNotSupportedError = ZeusNotSupportedError
"""The GPU or driver cannot do it (the suite's :class:`~zeus_core.exceptions.ZeusNotSupportedError`)."""
ZeusGPUNoPermissionError = ZeusPermissionError
"""Setting a limit or clock needs admin rights (a :class:`~zeus_core.exceptions.ZeusPermissionError`)."""
ZeusCPUNoPermissionError = ZeusPermissionError
"""RAPL needs root (the suite's :class:`~zeus_core.exceptions.ZeusPermissionError`)."""


class ZeusGPUInitError(ZeusDeviceNotFoundError):
    """No GPU was found (no NVML or amdsmi, or no device), as Zeus's ``get_gpus`` raises.

    Example:
        >>> from zeus_core.compat.device.exception import ZeusGPUInitError
        >>> isinstance(ZeusGPUInitError("no GPU"), ValueError)  # a ZeusConfigError in the suite's tree
        True
    """


class ZeusCPUInitError(ZeusDeviceNotFoundError):
    """No CPU package is metered (no RAPL), as Zeus's ``get_cpus`` raises.

    Example:
        >>> from zeus_core.compat.device.exception import ZeusCPUInitError
        >>> str(ZeusCPUInitError("no RAPL"))
        'no RAPL'
    """


class ZeusSoCInitError(ZeusDeviceNotFoundError):
    """No SoC (Apple silicon, Jetson) was found, as Zeus's ``get_soc`` raises.

    Example:
        >>> from zeus_core.compat.device.exception import ZeusSoCInitError
        >>> str(ZeusSoCInitError("no SoC"))
        'no SoC'
    """


class ZeusGPUHeterogeneousError(ZeusDeviceError):
    """``get_gpus(ensure_homogeneous=True)`` found GPUs of different models.

    Example:
        >>> from zeus_core.compat.device.exception import ZeusGPUHeterogeneousError
        >>> issubclass(ZeusGPUHeterogeneousError, RuntimeError)
        True
    """
