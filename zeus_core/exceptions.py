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
    """Root of every error raised by Zeus Suite.

    Example:
        >>> from zeus_core import ZeusError, ZeusMonitor
        >>> try:
        ...     ZeusMonitor(gpus=[], cpu_indices=[]).end_window("never begun")
        ... except ZeusError as e:
        ...     print(type(e).__name__)
        ZeusWindowError
    """


class ZeusConfigError(ZeusError, ValueError):
    """An argument, environment variable or input file is invalid (also a ``ValueError``).

    Example:
        >>> from zeus_core import zeus_cost
        >>> try:
        ...     zeus_cost(100.0, 1.0, eta_knob=2.0, max_power_w=300.0)
        ... except ValueError as e:
        ...     print(e)
        zeus_cost: eta_knob=2.0 must be within [0, 1].
    """


class ZeusDeviceNotFoundError(ZeusConfigError):
    """A device index or UUID does not exist on this machine (or is not visible).

    Example:
        >>> from zeus_core import ZeusDeviceNotFoundError, ZeusMonitor
        >>> try:
        ...     ZeusMonitor(gpu_indices=[3], gpus=[], cpu_indices=[])
        ... except ZeusDeviceNotFoundError as e:
        ...     print(str(e).split(";")[0])
        ZeusMonitor(gpu_indices=[3]): there is no GPU 3
    """


class ZeusWindowError(ZeusConfigError):
    """A measurement window was begun twice or ended without being begun.

    Example:
        >>> from zeus_core import ZeusMonitor, ZeusWindowError
        >>> monitor = ZeusMonitor(gpus=[], cpu_indices=[])
        >>> monitor.begin_window("epoch")
        >>> try:
        ...     monitor.begin_window("epoch")
        ... except ZeusWindowError as e:
        ...     print(str(e).split(":")[0])
        begin_window('epoch')
    """


class ZeusProfileError(ZeusConfigError):
    """A profile or plan file is malformed, or was made for other hardware.

    Example:
        >>> from zeus_core import ZeusProfileError
        >>> from zeus_core.testing import MeasuredProfile
        >>> try:
        ...     MeasuredProfile(points=[])
        ... except ZeusProfileError as e:
        ...     print(e)
        MeasuredProfile needs at least one (limit, time, power) row.
    """


class ZeusPermissionError(ZeusError, PermissionError):
    """The process lacks the privilege for a device operation (e.g. setting power limits).

    Example:
        >>> from zeus_core import ZeusPermissionError
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), can_control=False)
        >>> try:
        ...     gpu.set_power_limit(200)
        ... except PermissionError as e:
        ...     print(type(e).__name__)
        ZeusPermissionError
    """


class ZeusDeviceError(ZeusError, RuntimeError):
    """The device or its driver failed (also a ``RuntimeError``).

    Example:
        >>> from zeus_core import ZeusDeviceError, ZeusNotSupportedError
        >>> issubclass(ZeusNotSupportedError, ZeusDeviceError), issubclass(ZeusDeviceError, RuntimeError)
        (True, True)
    """


class ZeusNotSupportedError(ZeusDeviceError):
    """The device does not support the requested operation or reading.

    Example:
        >>> from zeus_core import ZeusNotSupportedError
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU
        >>> old = SimulatedGPU(PhysicalModel.a40(), energy_counter=False)  # like a pre-Volta GPU
        >>> try:
        ...     old.get_total_energy()
        ... except ZeusNotSupportedError:
        ...     print("no energy counter: sample power instead")
        no energy counter: sample power instead
    """
