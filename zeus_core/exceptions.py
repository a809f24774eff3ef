"""Exceptions raised by Zeus Suite.

Every error derives from :class:`ZeusError` and from the built-in exception that
matches how a caller reacts to it, so ``except ValueError`` keeps working::

    ZeusError
    ├── ZeusConfigError (ValueError)        bad argument, environment or input file
    │   ├── ZeusDeviceNotFoundError         a device index/UUID that this machine does not have
    │   ├── ZeusWindowError                 measurement-window misuse (duplicate or unknown name)
    │   └── ZeusProfileError                malformed or mismatched profile / plan file
    ├── ZeusPermissionError (PermissionError)  the operation needs privileges the process lacks
    └── ZeusDeviceError (RuntimeError)      the hardware or its driver failed
        └── ZeusNotSupportedError           the device does not offer this feature

Messages name the call, the bad value and the fix.
"""

from __future__ import annotations

__all__ = [
    "ZeusError",
    "ZeusConfigError",
    "ZeusDeviceNotFoundError",
    "ZeusWindowError",
    "ZeusProfileError",
    "ZeusPermissionError",
    "ZeusDeviceError",
    "ZeusNotSupportedError",
]


class ZeusError(Exception):
    """Root of every error raised by Zeus Suite."""


class ZeusConfigError(ZeusError, ValueError):
    """An argument, environment variable or input file is invalid."""


class ZeusDeviceNotFoundError(ZeusConfigError):
    """A device index or UUID does not exist on this machine (or is not visible)."""


class ZeusWindowError(ZeusConfigError):
    """A measurement window was begun twice or ended without being begun."""


class ZeusProfileError(ZeusConfigError):
    """A profile or plan file is malformed, or was made for other hardware."""


class ZeusPermissionError(ZeusError, PermissionError):
    """The process lacks the privilege for a device operation (e.g. setting power limits)."""


class ZeusDeviceError(ZeusError, RuntimeError):
    """The device or its driver failed."""


class ZeusNotSupportedError(ZeusDeviceError):
    """The device does not support the requested operation or reading."""
